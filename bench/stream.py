"""Streamed SQL answers: the issue 13 figures, PostgreSQL and SQLite side by side, in one run.

    python bench/stream.py [--rows 10000000] [--sources pg,lite] [--repeat 1]

Builds a table of N rows x 4 columns (bigint, double, text of 20 characters, timestamptz) in a
new PostgreSQL database (on QUARRY_TEST_PG_URL's server) and in a SQLite file, serves Quarry
with gunicorn (one worker, so its memory is the stream's), and prints per source:
rows/s of the raw driver (server-side cursor fetch + orjson, in this process) and of each
format over HTTP, the worker's RSS growth during the jsonlines stream, the delay until the
first batch, cancel -> statement gone, and SELECT 1 latency while 8 streams run.
Everything it creates is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import psycopg
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import migrate, quarry_env, serving  # noqa: E402

PG_ADMIN = os.environ.get("QUARRY_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_ADMIN = PG_ADMIN.replace("postgresql+psycopg://", "postgresql://")
DB = f"quarry_bench_stream_{os.getpid()}"
QUERY = "SELECT a, b, c, d FROM t"


def pg_url(database: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + database


def build(rows: int, folder: Path, sources: list[str]) -> Path:
    """The table on PostgreSQL (an empty database without "pg") and in a SQLite file."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{DB}"')
    with psycopg.connect(pg_url(DB), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a bigint, b float8, c text, d timestamptz)")
        conn.execute("INSERT INTO t SELECT g, g * 0.25, md5(g::text)::varchar(20), "
                     "timestamptz '2024-01-01 00:00+00' + g * interval '1 second' "
                     "FROM generate_series(1, %s) g", (rows if "pg" in sources else 0,))
    path = folder / "bench.db"
    if "lite" not in sources:
        rows = 0
    lite = sqlite3.connect(path)
    lite.execute("CREATE TABLE t (a INTEGER, b REAL, c TEXT, d TEXT)")
    lite.execute("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) "
                 "INSERT INTO t SELECT n, n * 0.25, substr(hex(randomblob(10)), 1, 20), "
                 "strftime('%Y-%m-%dT%H:%M:%S+00:00', 1704067200 + n, 'unixepoch') FROM g",
                 (rows,))
    lite.commit()
    lite.close()
    return path


def raw_rate(source: str, lite_path: Path) -> float:
    """Rows/s of the driver alone: server-side cursor, batches of 10 000, orjson per batch."""
    started, count = time.perf_counter(), 0
    if source == "pg":
        with psycopg.connect(pg_url(DB)) as conn, conn.cursor(name="bench") as cur:
            cur.execute(QUERY)
            while batch := cur.fetchmany(10_000):
                orjson.dumps(batch)
                count += len(batch)
    else:
        conn = sqlite3.connect(lite_path)
        cur = conn.execute(QUERY)
        while batch := cur.fetchmany(10_000):
            orjson.dumps(batch)
            count += len(batch)
        conn.close()
    return count / (time.perf_counter() - started)


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def stream(url: str, source: str, fmt: str, pids: list[int]) -> dict[str, float]:
    """One full stream: rows/s (from the body), first-batch delay, peak RSS growth."""
    base, peak, done = rss_mib(pids), [0.0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib(pids) - base)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    first = None
    size = 0
    with requests.post(url + "/api/sql/query", stream=True, timeout=3600, json={
            "query": QUERY, "context": {"db": source}, "response_format": fmt}) as response:
        assert response.status_code == 200, response.text
        for chunk in response.iter_content(1 << 20):
            size += len(chunk)
            if first is None:
                first = time.perf_counter() - started
            tail = chunk[-200:]
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    if fmt == "jsonlines":
        end = json.loads(tail.splitlines()[-1])
        assert end["type"] == "end", end
    return {"seconds": elapsed, "first": first or 0.0, "rss": peak[0], "bytes": size}


def cancel_delay(url: str, source: str) -> float:
    """DELETE -> the statement gone: from pg_stat_activity (PostgreSQL), or the request
    answered CANCELLED (SQLite, whose statement lives inside the worker)."""
    slow = "SELECT pg_sleep(60)" if source == "pg" else \
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c"
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(requests.post(
        url + "/api/sql/query", json={"query": slow, "context": {"db": source}}, timeout=120)))
    thread.start()
    while not (listed := [q for q in requests.get(url + "/api/sql/queries").json()
                          if q["source"] == source]):
        time.sleep(0.02)
    query_id = listed[0]["query_id"]
    started = time.perf_counter()
    requests.delete(f"{url}/api/sql/queries/{query_id}")
    if source == "pg":
        with psycopg.connect(pg_url(DB), autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                               "AND pid <> pg_backend_pid() AND query LIKE %s",
                               (f"%quarry_{query_id}%",)).fetchone()[0]:
                time.sleep(0.005)
        gone = time.perf_counter() - started
        thread.join()
    else:
        thread.join()
        gone = time.perf_counter() - started
    assert answer[0].json()["error_code"] == 22
    return gone


def select1_under_load(url: str, source: str) -> float:
    """Median latency (ms) of SELECT 1 while 8 streams of the table run."""
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            with requests.post(url + "/api/sql/query", stream=True, timeout=3600, json={
                    "query": QUERY, "context": {"db": source},
                    "response_format": "jsonlines"}) as response:
                for _ in response.iter_content(1 << 20):
                    if stop.is_set():
                        break

    readers = [threading.Thread(target=reader) for _ in range(8)]
    for r in readers:
        r.start()
    time.sleep(2)
    latencies = []
    for _ in range(40):
        started = time.perf_counter()
        assert requests.post(url + "/api/sql/query", json={"query": "SELECT 1"}).ok
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(0.05)
    stop.set()
    for r in readers:
        r.join()
    return statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--sources", default="pg,lite",
                        help="pg and/or lite (comma-separated)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="streams per format, taken in turn; the fastest of each counts "
                             "(a shared machine's load comes and goes)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sources = args.sources.split(",")
        print(f"building {args.rows:,} rows on {' and '.join(sources)} …", flush=True)
        lite = build(args.rows, folder, sources)
        try:
            env = quarry_env(
                QUARRY_DATABASE_URL=f"sqlite:///{folder}/store.db",
                QUARRY_INSTANCE_PATH=str(folder), QUARRY_DEMO_SOURCE="false",
                QUARRY_DATA_SOURCES=json.dumps({"pg": pg_url(DB).replace(
                    "postgresql://", "postgresql+psycopg://"), "lite": f"sqlite:///{lite}"}),
                QUARRY_WORKERS="1", QUARRY_THREADS="12", QUARRY_SQL_POOL_SIZE="10",
                QUARRY_SQL_STREAM_MAX_ROWS="0", QUARRY_SQL_STREAM_TIMEOUT_S="3600",
                QUARRY_LOG_LEVEL="WARNING")
            migrate(env)
            with serving(env, folder) as server:
                report(server.url, server.worker_pids(), lite, args.rows, args.sources,
                       args.repeat)
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


def report(url: str, pids: list[int], lite: Path, rows: int, sources: str,
           repeat: int) -> None:
    figures: dict[str, dict[str, str]] = {}
    for source in sources.split(","):
        # Steady state: the worker's first statement on a source opens its pool.
        requests.post(url + "/api/sql/query", json={"query": "SELECT 1 FROM t LIMIT 1",
                                                    "context": {"db": source}})
        raw = raw_rate(source, lite)
        runs: dict[str, dict[str, float]] = {}
        for _ in range(repeat):
            for fmt in ("jsonlines", "csv", "arrow"):
                run = stream(url, source, fmt, pids)
                best = runs.setdefault(fmt, run)
                best["rss"] = max(best["rss"], run["rss"])
                if run["seconds"] < best["seconds"]:
                    best.update(seconds=run["seconds"], first=run["first"])
        rate = {fmt: rows / run["seconds"] for fmt, run in runs.items()}
        figures[source] = {
            "raw driver fetch + orjson (rows/s)": f"{raw:,.0f}",
            "jsonlines over HTTP (rows/s)": f"{rate['jsonlines']:,.0f}",
            "csv over HTTP (rows/s)": f"{rate['csv']:,.0f}",
            "arrow over HTTP (rows/s)": f"{rate['arrow']:,.0f}",
            "jsonlines / raw (aim >= 0.5)": f"{rate['jsonlines'] / raw:.2f}",
            "arrow / jsonlines (aim >= 2)": f"{rate['arrow'] / rate['jsonlines']:.2f}",
            "csv / jsonlines (aim >= 0.8)": f"{rate['csv'] / rate['jsonlines']:.2f}",
            "RSS growth, jsonlines (MiB, aim <= 50)":
                f"{runs['jsonlines']['rss']:.1f}",
            "RSS growth, arrow (MiB)": f"{runs['arrow']['rss']:.1f}",
            "RSS growth, csv (MiB)": f"{runs['csv']['rss']:.1f}",
            "first batch (ms, aim <= 200)": f"{runs['jsonlines']['first'] * 1000:.0f}",
            "cancel -> gone (ms, aim <= 1000)": f"{cancel_delay(url, source) * 1000:.0f}",
            "SELECT 1 median, 8 streams running (ms)":
                f"{select1_under_load(url, source):.1f}",
        }
    names = list(next(iter(figures.values())))
    width = max(len(n) for n in names)
    titles = {"pg": "PostgreSQL", "lite": "SQLite"}
    print(f"\n{rows:,} rows x 4 columns (bigint, double, text(20), timestamptz)")
    print(f"{'figure':<{width}}" + "".join(f"  {titles[s]:>12}" for s in figures))
    for name in names:
        print(f"{name:<{width}}" + "".join(f"  {figures[s][name]:>12}" for s in figures))


if __name__ == "__main__":
    main()
