"""Benchmark of databases connected at run time (issue 11), under gunicorn.

    .venv/bin/python bench/databases.py [--iterations 300] [--creates 20]

Makes a PostgreSQL database quarry_bench_db_<pid> (10 000 rows), serves Quarry with
gunicorn (2 gthread workers, SQLite store, an encryption key) with that database configured
as ``conf`` (QUARRY_DATA_SOURCES), then prints:

1. ``POST /api/databases`` with ``check_connection: true`` (a password, so it is encrypted),
   and the first query on the new database (its pool is built and connected lazily);
2. the steady state: the same statements on ``rt`` (created at run time, same database) and
   on ``conf``, each against psycopg in this process (fetch + JSON encode); the issue asks
   that the runtime source's ratio to the raw driver be within 10 % of the configured one's.
   The two are sent alternately, and the median of the per-pair ratios is printed too: on a
   shared machine it is the steadier figure.

Everything it creates is removed at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from cryptography.fernet import Fernet

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import (  # noqa: E402
    PG_SERVER,
    migrate,
    pg_database,
    points_table,
    quarry_env,
    serving,
)

DB = f"quarry_bench_db_{os.getpid()}"
PARAMS = {"host": "127.0.0.1", "port": 5432, "database": DB, "user": "postgres",
          "password": "bench-password"}  # trust auth ignores it; it is stored encrypted
CASES = [("point lookup", "SELECT * FROM {db}.points WHERE id = 4242"),
         ("1 000 rows", "SELECT * FROM {db}.points WHERE id <= 1000")]


class Client:
    """One keep-alive connection (so one worker, as a script's session would see)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, float, dict]:
        payload = json.dumps(body) if body is not None else None
        started = time.perf_counter()
        self.conn.request(method, path, payload, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        return response.status, elapsed, json.loads(data) if data else {}

    def query(self, sql: str) -> float:
        status, elapsed, answer = self.call("POST", "/api/sql/query", {"query": sql})
        if status != 200 or answer.get("type") != "table":
            raise SystemExit(f"Quarry answered {status} {answer} to {sql}")
        return elapsed


def time_raw(sql: str, iterations: int) -> list[float]:
    samples = []
    with psycopg.connect(f"{PG_SERVER}/{DB}", autocommit=True) as conn:
        for i in range(iterations + 5):
            started = time.perf_counter()
            rows = conn.execute(sql).fetchall()
            json.dumps({"data": rows}, default=str)
            if i >= 5:
                samples.append(time.perf_counter() - started)
    return samples


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.2f}ms"


def bench_creates(client: Client, creates: int) -> None:
    create_times, first_times, second_times = [], [], []
    for i in range(creates):
        body = {"database": {"name": f"fresh_{i}", "engine": "postgres", "parameters": PARAMS},
                "check_connection": True}
        status, elapsed, answer = client.call("POST", "/api/databases", body)
        if status != 201:
            raise SystemExit(f"create answered {status}: {answer}")
        create_times.append(elapsed)
        first_times.append(client.query(f"SELECT * FROM fresh_{i}.points WHERE id = 42"))
        second_times.append(client.query(f"SELECT * FROM fresh_{i}.points WHERE id = 43"))
        client.call("DELETE", f"/api/databases/fresh_{i}")
    print(f"{'create (with check)':<28}{ms(create_times)}   median of {creates}")
    print(f"{'first query on it':<28}{ms(first_times)}")
    print(f"{'second query on it':<28}{ms(second_times)}")


def bench_steady(client: Client, iterations: int) -> None:
    print(f"\n{'statement':<16}{'source':<8}{'quarry p50':>12}{'raw p50':>11}{'Q/raw':>8}")
    for label, template in CASES:
        raw = time_raw(template.format(db="").replace(" .", " "), iterations)
        samples: dict[str, list[float]] = {"rt": [], "conf": []}
        for _ in range(5):  # warm-up of both pools
            client.query(template.format(db="rt"))
            client.query(template.format(db="conf"))
        for _ in range(iterations):  # interleaved, so load changes hit both alike
            for name in samples:
                samples[name].append(client.query(template.format(db=name)))
        ratios = {}
        for name, values in samples.items():
            ratios[name] = statistics.median(values) / statistics.median(raw)
            print(f"{label:<16}{name:<8}{ms(values):>12}{ms(raw):>11}{ratios[name]:>8.2f}")
        # Paired: each runtime query against the configured one sent right after it, so a
        # burst of load from other processes weighs on both sides of a pair alike.
        paired = statistics.median(r / c for r, c in zip(samples["rt"], samples["conf"],
                                                          strict=True))
        print(f"{'':<16}runtime/configured: ratio of medians {ratios['rt'] / ratios['conf']:.3f}"
              f", median of paired ratios {paired:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--creates", type=int, default=20)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="quarry-bench-db-")
    try:
        with pg_database(DB, *points_table(10_000)) as url:
            env = quarry_env(QUARRY_INSTANCE_PATH=work, QUARRY_WORKERS="2",
                             QUARRY_THREADS="4", QUARRY_DEMO_SOURCE="false",
                             QUARRY_ENCRYPTION_KEY=Fernet.generate_key().decode(),
                             QUARRY_DATA_SOURCES=json.dumps({"conf": url}))
            migrate(env)
            with serving(env, work) as server:
                client = Client(server.port)
                bench_creates(client, args.creates)
                status, _, answer = client.call("POST", "/api/databases", {
                    "database": {"name": "rt", "engine": "postgres", "parameters": PARAMS}})
                if status != 201:
                    raise SystemExit(f"create answered {status}: {answer}")
                bench_steady(client, args.iterations)
    finally:
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
