"""Benchmark of POST /api/sql/query: Quarry under gunicorn vs the raw driver, side by side.

    .venv/bin/python bench/sql.py [--iterations 200] [--duration 5]

Makes a PostgreSQL database quarry_bench_<pid> (100 000 rows x 4 columns), starts gunicorn
(2 workers, gthread) on a free port, and prints for each statement: median and p99 latency
through Quarry (one client, keep-alive) and through psycopg/sqlite3 in this process (fetch
+ JSON encode), their ratio, throughput with 8 concurrent clients (wrk), and the resident
memory of the gunicorn processes. Everything it creates is removed at the end.

Then the MindsDB statements about the service's own objects (issue 5): a project with 1 000
skills and a model trained on 2 000 rows of the same table, ``SHOW MODELS``,
``SELECT * FROM p.skills`` and a JOIN prediction over 10 000 rows (Quarry only: there is no
raw equivalent). ``--catalog-only`` skips the data-path cases.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import (  # noqa: E402
    PG_SERVER,
    Server,
    migrate,
    pg_database,
    points_table,
    quarry_env,
    serving,
)

DB = f"quarry_bench_{os.getpid()}"

CASES = [
    ("SELECT 1", "SELECT 1", None),
    ("point lookup", "SELECT * FROM bench.points WHERE id = 4242", "pg"),
    ("1 000 rows", "SELECT * FROM bench.points WHERE id <= 1000", "pg"),
    ("100 000 rows x 4", "SELECT * FROM bench.points", "pg"),
]

BENCH_PROJECT = "bench_catalog"
CATALOG_CASES = [
    ("SHOW MODELS", f"SHOW MODELS FROM {BENCH_PROJECT}"),
    ("1 000 skills", f"SELECT * FROM {BENCH_PROJECT}.skills"),
    ("describe", f"DESCRIBE {BENCH_PROJECT}.points_model.features"),
    ("predict 1 row", f"SELECT y, y_confidence FROM {BENCH_PROJECT}.points_model "
                      "WHERE x = 2.5"),
    ("JOIN 10 000 rows", f"SELECT t.id, m.y FROM bench.points AS t JOIN "
                         f"{BENCH_PROJECT}.points_model AS m WHERE t.id <= 10000"),
]


def prepare_catalog(port: int) -> None:
    """A project with 1 000 skills and one model, made through the REST routes."""
    conn = http.client.HTTPConnection("127.0.0.1", port)

    def post(path: str, body: dict) -> None:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
        if response.status != 201:
            raise SystemExit(f"POST {path} answered {response.status}: {payload[:300]!r}")

    post("/api/projects", {"name": BENCH_PROJECT})
    for i in range(1000):
        post(f"/api/projects/{BENCH_PROJECT}/skills",
             {"skill": {"name": f"skill_{i}", "type": "retrieval",
                        "params": {"source": f"kb_{i}", "api_key": "never shown"}}})
    post(f"/api/projects/{BENCH_PROJECT}/models",
         {"query": f"CREATE MODEL {BENCH_PROJECT}.points_model FROM bench "
                   "(SELECT x, y FROM points WHERE id <= 2000) PREDICT y "
                   "USING join_learn_process = true"})
    conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def time_quarry(port: int, sql: str, iterations: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"query": sql})
    headers = {"Content-Type": "application/json"}
    samples = []
    for i in range(iterations + 3):
        started = time.perf_counter()
        conn.request("POST", "/api/sql/query", body, headers)
        response = conn.getresponse()
        payload = response.read()
        elapsed = time.perf_counter() - started
        answer = json.loads(payload)
        if answer.get("type") != "table":
            raise SystemExit(f"Quarry answered {answer} to {sql}")
        if i >= 3:  # warm-up: connections, caches
            samples.append(elapsed)
    conn.close()
    return samples


def time_raw(sql: str, source: str | None, iterations: int) -> list[float]:
    """The same statement through the driver in this process: fetch, then JSON-encode."""
    raw_sql = sql.replace("bench.", "")
    if source == "pg":
        conn = psycopg.connect(f"{PG_SERVER}/{DB}", autocommit=True)
        run = conn.execute
    else:
        conn = sqlite3.connect(":memory:")
        run = conn.execute
    samples = []
    for i in range(iterations + 3):
        started = time.perf_counter()
        cursor = run(raw_sql)
        rows = cursor.fetchall()
        json.dumps({"data": rows}, default=str)
        if i >= 3:
            samples.append(time.perf_counter() - started)
    conn.close()
    return samples


def wrk(port: int, sql: str, duration: int) -> tuple[float, str]:
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                 f"wrk.body = {json.dumps(json.dumps({'query': sql}))}\n")
    script.close()
    try:
        out = subprocess.run(["wrk", "-t2", "-c8", f"-d{duration}s", "--timeout", "30s",
                              "-s", script.name, f"http://127.0.0.1:{port}/api/sql/query"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(script.name)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    return rps, errors.group(0) if errors else "no errors"


def gunicorn_memory_mib(master_pid: int) -> tuple[float, float, int]:
    """Summed RSS and PSS of the master and its workers, in MiB, and the process count.

    RSS counts the pages the workers share with the master (preload_app) once per process;
    PSS divides each shared page among its sharers, so it sums to what the group really uses.
    """
    pids = [master_pid]
    for task in os.listdir(f"/proc/{master_pid}/task"):
        with open(f"/proc/{master_pid}/task/{task}/children") as handle:
            pids += [int(p) for p in handle.read().split()]
    rss = pss = 0
    for pid in pids:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            text = handle.read()
        rss += int(re.search(r"^Rss:\s+(\d+) kB", text, re.M).group(1))
        pss += int(re.search(r"^Pss:\s+(\d+) kB", text, re.M).group(1))
    return rss / 1024, pss / 1024, len(pids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--duration", type=int, default=5, help="seconds of wrk per case")
    parser.add_argument("--catalog-only", action="store_true",
                        help="only the statements about the service's own objects")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: apt-get install -y wrk")

    work = tempfile.mkdtemp(prefix="quarry-bench-")
    try:
        with pg_database(DB, *points_table(100_000)) as url:
            env = quarry_env(QUARRY_INSTANCE_PATH=work, QUARRY_WORKERS="2",
                             QUARRY_THREADS="4", QUARRY_DATA_SOURCES=json.dumps({"bench": url}))
            migrate(env)
            with serving(env, work) as server:
                measure(server, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(server: Server, args: argparse.Namespace) -> None:
    port = server.port
    print(f"{'statement':<18}{'quarry p50':>12}{'p99':>10}{'raw p50':>10}{'p99':>10}"
          f"{'ratio':>8}{'req/s (8 clients)':>20}  errors")
    for label, sql, source in [] if args.catalog_only else CASES:
        iterations = args.iterations if "100 000" not in label else \
            max(10, args.iterations // 10)
        quarry = time_quarry(port, sql, iterations)
        raw = time_raw(sql, source, iterations)
        q50, r50 = statistics.median(quarry), statistics.median(raw)
        rps, errors = wrk(port, sql, args.duration)
        print(f"{label:<18}{q50 * 1000:>10.2f}ms{percentile(quarry, .99) * 1000:>8.2f}ms"
              f"{r50 * 1000:>8.2f}ms{percentile(raw, .99) * 1000:>8.2f}ms"
              f"{q50 / r50:>8.2f}{rps:>20.0f}  {errors}")
    if not args.catalog_only:
        rss, pss, count = gunicorn_memory_mib(server.pid)
        print(f"gunicorn memory after the data statements, {count} processes (master + 2 "
              f"workers): PSS {pss:.0f} MiB, RSS summed {rss:.0f} MiB")
    prepare_catalog(port)
    print(f"\n{'service statement':<18}{'quarry p50':>12}{'p99':>10}"
          f"{'req/s (8 clients)':>20}  errors")
    for label, sql in CATALOG_CASES:
        iterations = args.iterations if "JOIN" not in label else \
            max(10, args.iterations // 10)
        quarry = time_quarry(port, sql, iterations)
        rps, errors = wrk(port, sql, args.duration)
        print(f"{label:<18}{statistics.median(quarry) * 1000:>10.2f}ms"
              f"{percentile(quarry, .99) * 1000:>8.2f}ms{rps:>20.0f}  {errors}")
    rss, pss, count = gunicorn_memory_mib(server.pid)
    print(f"gunicorn memory after the service statements (models loaded), {count} "
          f"processes (master + 2 workers): "
          f"PSS {pss:.0f} MiB, RSS summed {rss:.0f} MiB")


if __name__ == "__main__":
    main()
