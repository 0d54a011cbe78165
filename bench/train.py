"""Model benchmark of issue 4: training time and memory, describe and predict latency.

1. Training: for 10 000 and 100 000 synthetic rows x 10 input columns of mixed types
   (5 float, 1 integer, 2 categorical, 1 boolean, 1 ISO date as text) and a numeric target,
   each size is trained in a fresh child process by ``app.ml.train`` (the library the
   service runs); the child reports wall time and its peak RSS (``ru_maxrss``), and the RSS
   after the imports, before any data, for comparison.
2. Through the service (Flask test client, in-process, SQLite store): the 10 000-row table
   is written to a SQLite data source, ``CREATE MODEL … USING join_learn_process = true``
   trains from it end to end, then ``GET …/describe`` and ``POST …/predict`` with 1 and
   1 000 rows are timed (median and p95 over ``--samples`` calls, after a warm-up).

Aims (issue 4): 100 000 rows trained in <= 60 s; describe <= 5 ms median; one-row predict
<= 20 ms median.

    .venv/bin/python bench/train.py [--sizes 10000,100000] [--samples 100]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def synthetic(rows: int, seed: int = 0) -> pd.DataFrame:
    """Mixed-type rows whose target depends on most columns, plus noise."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=rows) for i in range(5)})
    frame["count"] = rng.integers(0, 100, size=rows)
    frame["colour"] = rng.choice(["red", "green", "blue", "black", "white"], size=rows)
    frame["city"] = rng.choice([f"city_{i}" for i in range(40)], size=rows)
    frame["member"] = rng.random(size=rows) < 0.3
    days = rng.integers(0, 3 * 365, size=rows)
    frame["joined"] = (pd.Timestamp("2022-01-01") + pd.to_timedelta(days, unit="D")) \
        .strftime("%Y-%m-%d")
    city_effect = {f"city_{i}": (i % 7) - 3.0 for i in range(40)}
    frame["target"] = (3 * frame.x0 - 2 * frame.x1 + frame.x2 * frame.x3
                       + 0.05 * frame["count"] + frame.colour.map(
                           {"red": 2, "green": 1, "blue": 0, "black": -1, "white": -2})
                       + frame.city.map(city_effect) + 2.5 * frame.member
                       + days / 365 + rng.normal(scale=1.0, size=rows))
    return frame


def child(rows: int) -> None:
    from app.ml import train

    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    frame = synthetic(rows)
    started = time.perf_counter()
    result = train(frame, "target")
    elapsed = time.perf_counter() - started
    print(json.dumps({
        "rows": rows, "seconds": round(elapsed, 2), "accuracy": result.accuracy,
        "model": result.description["info"]["model"].split(" --> ")[-1],
        "artifact_kb": len(result.artifact) // 1024,
        "rss_imports_mb": rss_imports // 1024,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }))


def timed(fn, samples: int, warmup: int = 5) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def service(samples: int) -> None:
    from flask_migrate import upgrade

    from app import create_app

    workdir = tempfile.mkdtemp(prefix="quarry_bench_train_")
    source = os.path.join(workdir, "bench.db")
    frame = synthetic(10_000)
    with sqlite3.connect(source) as conn:
        frame.assign(member=frame.member.astype(int)).to_sql("rows", conn, index=False)
    app = create_app({"DATABASE_URL": f"sqlite:///{workdir}/store.db",
                      "INSTANCE_PATH": workdir,
                      "DATA_SOURCES": {"bench": f"sqlite:///{source}"}})
    with app.app_context():
        upgrade()
    client = app.test_client()
    started = time.perf_counter()
    created = client.post("/api/projects/mindsdb/models", json={
        "query": "CREATE MODEL mindsdb.bench FROM bench (SELECT * FROM rows) PREDICT target "
                 "USING join_learn_process = true"})
    elapsed = time.perf_counter() - started
    assert created.status_code == 201, created.get_json()
    print(f"service: CREATE MODEL on 10 000 rows (read + train + store): {elapsed:.2f} s, "
          f"r2 {created.get_json()['accuracy']}")

    def describe():
        assert client.get("/api/projects/mindsdb/models/bench/describe").status_code == 200

    rows = frame.drop(columns="target").assign(member=frame.member.astype(bool)) \
        .to_dict("records")

    def predict(n):
        def call():
            response = client.post("/api/projects/mindsdb/models/bench/predict",
                                   json={"data": rows[:n]})
            assert response.status_code == 200, response.get_json()
        return call

    for label, fn, count in (("describe (info)", describe, samples),
                             ("predict 1 row", predict(1), samples),
                             ("predict 1 000 rows", predict(1000), max(10, samples // 5))):
        median, p95 = timed(fn, count)
        print(f"service: {label:<20} median {median:7.2f} ms   p95 {p95:7.2f} ms   "
              f"({count} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores)")
    for size in (int(s) for s in args.sizes.split(",")):
        output = subprocess.run([sys.executable, __file__, "--child", str(size)], cwd=ROOT,
                                check=True, capture_output=True, text=True).stdout
        result = json.loads(output.strip().splitlines()[-1])
        print(f"train {result['rows']:>7} rows x 10 columns: {result['seconds']:6.2f} s  "
              f"r2 {result['accuracy']:.3f}  selected {result['model']}  "
              f"artifact {result['artifact_kb']} KiB  peak RSS {result['peak_rss_mb']} MiB "
              f"(after imports {result['rss_imports_mb']} MiB)")
    service(args.samples)


if __name__ == "__main__":
    main()
