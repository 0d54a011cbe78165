"""The default deployment at rest: memory (PSS) after a few requests, and SELECT 1 latency.

    .venv/bin/python bench/idle.py [--workers 3] [--rounds 6] [--seconds 5] [--client auto]
                                   [--baseline DIR]

Serves Quarry as ``make serve`` does (gunicorn.conf.py, its default settings: a SQLite store
in a fresh instance folder, the demo source), with ``--workers`` workers (3, as on a machine
of 2 cores). Sends a few requests to the common routes through every worker, then prints the
PSS of the master and each worker (/proc/<pid>/smaps_rollup: shared pages divided among their
sharers, so the sum is what the group uses) and the latency of
``POST /api/sql/query {"query": "SELECT 1"}`` under 8 concurrent clients, each sending its
next request as soon as its answer is in (keep-alive): median, p90-p99 and max, requests per
second, and the CPU time the server's processes spent per request (from /proc/<pid>/stat:
the figure the machine's other load disturbs least).

The clients: ``wrk`` (``apt-get install wrk``; one thread, 8 connections) when it is
installed, or with ``--client python``, 8 Python threads with ``http.client``. The Python
clients take a good part of the 2 cores themselves (the interpreter's own time per request is
close to the server's), which lengthens the server's queue: compare figures of one client.
With ``wrk`` each round runs ``--seconds``; its percentiles are per round, and the table
shows their median over the rounds (and the worst round's p99). The Python client sends
``--requests`` in all.

``--baseline DIR`` does the same for the Quarry in DIR (e.g. ``git worktree add`` or
``git archive`` of another commit), served at the same time; the rounds of the two alternate,
so that the machine's other load falls on both alike.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _load import cpu_ticks, have_wrk, summary, summary_text, wrk_round, wrk_script  # noqa: E402
from _server import Server, migrate, quarry_env, serving  # noqa: E402

ROUTES = [("GET", "/api/status", None), ("GET", "/", None), ("GET", "/api/projects", None),
          ("GET", "/api/databases", None), ("GET", "/api/projects/mindsdb/models", None),
          ("GET", "/api/sql/queries", None), ("GET", "/metrics", None),
          ("POST", "/api/sql/query", {"query": "SELECT 1"}),
          ("POST", "/api/sql/query", {"query": "SHOW DATABASES"}),
          ("POST", "/api/sql/query", {"query": "SELECT * FROM demo.iris LIMIT 5"}),
          ("POST", "/api/sql/query", {"query": "SELECT * FROM demo.iris LIMIT 5",
                                      "response_format": "jsonlines"})]
SELECT_1 = json.dumps({"query": "SELECT 1"})


def request(conn: http.client.HTTPConnection, method: str, path: str, body: dict | None,
            ) -> int:
    data = json.dumps(body) if body is not None else None
    conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
    response = conn.getresponse()
    response.read()
    return response.status


def warm(server: Server, rounds: int = 12) -> None:
    """The common routes, on new connections (gunicorn hands them to every worker)."""
    for _ in range(rounds):
        for method, path, body in ROUTES:
            conn = http.client.HTTPConnection("127.0.0.1", server.port)
            status = request(conn, method, path, body)
            conn.close()
            if status >= 500:
                raise SystemExit(f"{method} {path} answered {status}")


def pss_kib(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        text = handle.read()
    return {k: int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M).group(1))
            for k in ("Rss", "Pss", "Private_Dirty", "Private_Clean")}


def memory(server: Server) -> None:
    rows = [("master", server.pid)] + [(f"worker {i}", pid)
                                       for i, pid in enumerate(server.worker_pids(), 1)]
    total = 0
    for name, pid in rows:
        m = pss_kib(pid)
        total += m["Pss"]
        print(f"  {name:<9} PSS {m['Pss'] / 1024:6.1f} MiB  private "
              f"{(m['Private_Dirty'] + m['Private_Clean']) / 1024:6.1f} MiB  "
              f"RSS {m['Rss'] / 1024:6.1f} MiB")
    print(f"  total     PSS {total / 1024:6.1f} MiB")


def latencies(server: Server, requests: int, clients: int = 8) -> list[float]:
    samples: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        mine = []
        for _ in range(requests // clients):
            started = time.perf_counter()
            conn.request("POST", "/api/sql/query", SELECT_1,
                          {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            mine.append(time.perf_counter() - started)
            if response.status != 200:
                raise SystemExit(f"SELECT 1 answered {response.status}")
        conn.close()
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples


def python_round(server: Server, requests: int) -> dict[str, float]:
    before = cpu_ticks(server_pids(server))
    started = time.perf_counter()
    values = sorted(latencies(server, requests))
    duration = time.perf_counter() - started

    def at(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1e6

    return {"requests": len(values), "duration_us": duration * 1e6,
            "p50": statistics.median(values) * 1e6, "p90": at(0.9), "p95": at(0.95),
            "p98": at(0.98), "p99": at(0.99), "max": values[-1] * 1e6,
            "cpu_ms": (cpu_ticks(server_pids(server)) - before) * 1000
            / os.sysconf("SC_CLK_TCK")}


def server_pids(server: Server) -> list[int]:
    return [server.pid, *server.worker_pids()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="3")
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5, help="per round (wrk)")
    parser.add_argument("--requests", type=int, default=2000, help="in all (python)")
    parser.add_argument("--baseline", help="another Quarry checkout, served beside this one")
    args = parser.parse_args()
    client = args.client
    if client == "auto":
        client = "wrk" if have_wrk() else "python"
    print(f"load average {os.getloadavg()[0]:.2f} at the start; client: {client}")
    with tempfile.TemporaryDirectory(prefix="quarry-idle-") as work, ExitStack() as stack:
        roots = {"quarry": None}
        if args.baseline:
            roots["quarry-base"] = Path(args.baseline).resolve()
        servers: dict[str, Server] = {}
        for name, root in roots.items():
            folder = Path(work) / name
            folder.mkdir()
            env = quarry_env(QUARRY_INSTANCE_PATH=str(folder), QUARRY_WORKERS=args.workers)
            if root is not None:
                env["PYTHONPATH"] = str(root)
                migrate(env, root)
                servers[name] = stack.enter_context(serving(env, folder, root=root))
            else:
                migrate(env)
                servers[name] = stack.enter_context(serving(env, folder))
        for server in servers.values():
            warm(server)
        time.sleep(1)
        for name, server in servers.items():
            print(f"{name}: after the common routes")
            memory(server)
        if client == "wrk":
            script = wrk_script(Path(work) / "select1.lua", SELECT_1)
            for server in servers.values():  # warm-up: every thread of every worker
                wrk_round(f"{server.url}/api/sql/query", script, 1, [])

            def run_round(server: Server) -> dict[str, float]:
                return wrk_round(f"{server.url}/api/sql/query", script, args.seconds,
                                 server_pids(server))
        else:
            def run_round(server: Server) -> dict[str, float]:
                return python_round(server, args.requests // args.rounds)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        for i in range(args.rounds):
            order = list(servers.items())
            if i % 2:
                order.reverse()  # neither always first after the other's round
            for name, server in order:
                results[name].append(run_round(server))
        for name, rounds in results.items():
            print(f"{name}: SELECT 1, 8 clients ({client}), {len(rounds)} rounds, "
                  + summary_text(summary(rounds)))
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        for name, server in servers.items():
            print(f"{name}: after the latency rounds")
            memory(server)


if __name__ == "__main__":
    main()
