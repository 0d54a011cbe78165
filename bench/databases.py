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
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg
from cryptography.fernet import Fernet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG = os.environ.get("QUARRY_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
DB = f"quarry_bench_db_{os.getpid()}"
PARAMS = {"host": "127.0.0.1", "port": 5432, "database": DB, "user": "postgres",
          "password": "bench-password"}  # trust auth ignores it; it is stored encrypted
CASES = [("point lookup", "SELECT * FROM {db}.points WHERE id = 4242"),
         ("1 000 rows", "SELECT * FROM {db}.points WHERE id <= 1000")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_database() -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{DB}"')
    with psycopg.connect(f"{PG}/{DB}", autocommit=True) as conn:
        conn.execute("CREATE TABLE points (id integer PRIMARY KEY, x float8, y float8, "
                     "label text)")
        conn.execute("INSERT INTO points SELECT g, g * 0.25, sqrt(g), 'point ' || g "
                     "FROM generate_series(1, 10000) g")
        conn.execute("ANALYZE points")


def drop_database() -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


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
    with psycopg.connect(f"{PG}/{DB}", autocommit=True) as conn:
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
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("QUARRY_")},
           "QUARRY_INSTANCE_PATH": work, "QUARRY_WORKERS": "2", "QUARRY_THREADS": "4",
           "QUARRY_LOG_LEVEL": "WARNING", "QUARRY_DEMO_SOURCE": "false",
           "QUARRY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
           "QUARRY_DATA_SOURCES": json.dumps({"conf": f"postgresql://postgres@127.0.0.1:5432/"
                                                      f"{DB}"})}
    make_database()
    server = None
    try:
        bin_dir = os.path.dirname(sys.executable)
        subprocess.run([os.path.join(bin_dir, "flask"), "--app", "wsgi", "db", "upgrade"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        server = subprocess.Popen(
            [os.path.join(bin_dir, "gunicorn"), "-c", "gunicorn.conf.py", "-b",
             f"127.0.0.1:{port}", "--access-logfile", "/dev/null", "wsgi:app"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("gunicorn did not start") from None
                time.sleep(0.2)
        client = Client(port)
        bench_creates(client, args.creates)
        status, _, answer = client.call("POST", "/api/databases", {
            "database": {"name": "rt", "engine": "postgres", "parameters": PARAMS}})
        if status != 201:
            raise SystemExit(f"create answered {status}: {answer}")
        bench_steady(client, args.iterations)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        drop_database()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
