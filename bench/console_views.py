"""The console's schema with views: what reading each view's columns costs.

    .venv/bin/python bench/console_views.py [--rows 1000000] [--views 20] [--samples 5]

Serves Quarry with gunicorn (sign-in off, a SQLite source `big` of --rows rows), then times
over HTTP, side by side in one run (medians of --samples):

- `GET /api/console/schema` with no view (the floor: catalogs and models);
- the same with --views views over `big.numbers` (each `SELECT … WHERE value > k`): the
  console reads each view's columns as `SELECT * FROM mindsdb.<view> LIMIT 0`;
- for contrast, one whole read of one of those views (`SELECT count(*) FROM mindsdb.v0`),
  what reading its columns would cost if the view were run.

The per-view cost is (schema with views - floor) / views; "per view / whole read" should be
far below 1 (the LIMIT 0 reads no row). Report the load average with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import migrate, quarry_env, serving  # noqa: E402


def _big(path: Path, rows: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE numbers (id INTEGER PRIMARY KEY, label TEXT, value REAL)")
        conn.executemany("INSERT INTO numbers VALUES (?, ?, ?)",
                         ((i, f"row {i}", (i * 7919) % 1000 / 10) for i in range(rows)))


def _call(url: str, path: str, body: dict | None = None) -> tuple[float, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.loads(response.read())
    return time.perf_counter() - started, answer


def _median(url: str, path: str, samples: int, body: dict | None = None) -> float:
    _call(url, path, body)  # warm: pools, caches
    return statistics.median(_call(url, path, body)[0] for _ in range(samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--views", type=int, default=20)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _big(work / "big.db", args.rows)
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                         QUARRY_INSTANCE_PATH=str(work), QUARRY_WORKERS="2",
                         QUARRY_DATA_SOURCES=json.dumps({"big": f"sqlite:///{work}/big.db"}))
        migrate(env)
        with serving(env, work) as server:
            floor = _median(server.url, "/api/console/schema", args.samples)
            for n in range(args.views):
                _, made = _call(server.url, "/api/sql/query", {"query": (
                    f"CREATE VIEW mindsdb.v{n} AS (SELECT id, label, value FROM big.numbers "
                    f"WHERE value > {n})")})
                assert made["type"] == "ok", made
            _, schema = _call(server.url, "/api/console/schema")
            views = schema["projects"][0]["views"]
            assert len(views) == args.views and all(len(v["columns"]) == 3 for v in views), views
            with_views = _median(server.url, "/api/console/schema", args.samples)
            whole = _median(server.url, "/api/sql/query", args.samples,
                            {"query": "SELECT count(*) FROM mindsdb.v0"})
    per_view = (with_views - floor) / args.views
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rows:,} rows, {args.views} views, "
          f"median of {args.samples}")
    print(f"{'schema, no view':<34}{floor * 1000:>10.1f} ms")
    print(f"{f'schema, {args.views} views':<34}{with_views * 1000:>10.1f} ms")
    print(f"{'per view (difference / views)':<34}{per_view * 1000:>10.1f} ms")
    print(f"{'one whole read of a view':<34}{whole * 1000:>10.1f} ms")
    print(f"{'per view / whole read':<34}{per_view / whole:>10.3f}")


if __name__ == "__main__":
    main()
