"""The default deployment at rest: memory (PSS) after a few requests, and SELECT 1 latency.

    .venv/bin/python bench/idle.py [--workers 3] [--requests 2000] [--baseline DIR]

Serves Quarry as ``make serve`` does (gunicorn.conf.py, its default settings: a SQLite store
in a fresh instance folder, scikit-learn preloaded), with ``--workers`` workers (3, as on a
machine of 2 cores). Sends a few requests to the common routes through every worker, then
prints the PSS of the master and each worker (/proc/<pid>/smaps_rollup: shared pages divided
among their sharers, so the sum is what the group uses) and the latency of
``POST /api/sql/query {"query": "SELECT 1"}`` under 8 concurrent clients (keep-alive,
``--requests`` in all): median and p99. ``--baseline DIR`` does the same for the Quarry in
DIR, served at the same time, and the latency rounds of the two alternate.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="3")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline", help="another Quarry checkout, served beside this one")
    args = parser.parse_args()
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
        samples: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, server in servers.items():
                samples[name] += latencies(server, args.requests // args.rounds)
        for name, values in samples.items():
            ordered = sorted(values)
            at = {q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
                  for q in (0.9, 0.95, 0.98)}
            print(f"{name}: SELECT 1, 8 clients, {len(values)} requests: median "
                  f"{statistics.median(values) * 1000:.1f} ms, p90 {at[0.9]:.1f}, "
                  f"p95 {at[0.95]:.1f}, p98 {at[0.98]:.1f}, p99 {p99(values) * 1000:.1f}, "
                  f"max {ordered[-1] * 1000:.1f} ms")
        for name, server in servers.items():
            print(f"{name}: after the latency rounds")
            memory(server)


if __name__ == "__main__":
    main()
