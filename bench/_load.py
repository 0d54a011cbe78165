"""8 clients at once for a benchmark: ``wrk`` (one thread, 8 keep-alive connections, each
sending its next request as soon as its answer is in) and the CPU the server spent.

``wrk`` is Debian's package (``apt-get install wrk``): a client in C that takes a few
per cent of a core where 8 Python threads took about as much CPU as the server itself.
Each round's figures come from wrk's own latency histogram (a Lua ``done`` hook prints them
as JSON); the server's CPU time is read from /proc/<pid>/stat for its master and workers.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from pathlib import Path

_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests": %d, "duration_us": %d, "errors": %d, "non_2xx": %d, '
    .. '"p50": %d, "p90": %d, "p95": %d, "p98": %d, "p99": %d, "max": %d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(95),
    latency:percentile(98), latency:percentile(99), latency.max))
end
"""


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def wrk_script(path: str | Path, body: str, headers: dict[str, str] | None = None) -> str:
    """Write the Lua script of a POST with ``body`` (JSON) and ``headers``; its path."""
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body)}",
             'wrk.headers["Content-Type"] = "application/json"']
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}"
              for k, v in (headers or {}).items()]
    Path(path).write_text("\n".join(lines) + "\n" + _DONE)
    return str(path)


def cpu_ticks(pids: list[int]) -> int:
    """User and system CPU of ``pids``, in clock ticks."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def wrk_round(url: str, script: str, seconds: float, pids: list[int],
              connections: int = 8) -> dict[str, float]:
    """One round of ``seconds``: wrk's figures (µs), and ``cpu_ms`` of ``pids`` during it."""
    before = cpu_ticks(pids)
    done = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", script,
                           url], capture_output=True, text=True, timeout=seconds + 60)
    cpu_ms = (cpu_ticks(pids) - before) * 1000 / os.sysconf("SC_CLK_TCK")
    line = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode != 0 or not line:
        raise SystemExit(f"wrk failed: {done.stdout}{done.stderr}")
    result = json.loads(line[-1])
    if result["errors"] or result["non_2xx"]:
        raise SystemExit(f"requests failed under wrk: {result}")
    result["cpu_ms"] = cpu_ms
    return result


def summary(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Medians over the rounds of each percentile (ms), the worst round's p99 and the
    largest latency (ms), requests per second and server CPU per request (ms)."""
    requests = sum(r["requests"] for r in rounds)
    out = {k: statistics.median(r[k] for r in rounds) / 1000
           for k in ("p50", "p90", "p95", "p98", "p99")}
    out["worst_p99"] = max(r["p99"] for r in rounds) / 1000
    out["max"] = max(r["max"] for r in rounds) / 1000
    out["requests"] = requests
    out["rate"] = requests / (sum(r["duration_us"] for r in rounds) / 1e6)
    out["cpu"] = sum(r["cpu_ms"] for r in rounds) / requests
    return out


def summary_text(s: dict[str, float]) -> str:
    return (f"{s['requests']:.0f} requests: median {s['p50']:.1f} ms, p90 {s['p90']:.1f}, "
            f"p95 {s['p95']:.1f}, p98 {s['p98']:.1f}, p99 {s['p99']:.1f} (worst round "
            f"{s['worst_p99']:.1f}), max {s['max']:.1f} ms; {s['rate']:.0f} requests/s; "
            f"server CPU {s['cpu']:.2f} ms per request")
