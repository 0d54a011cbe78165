"""Jobs (issue 33): each slot once across instances, the lag from slot to start, and LAST.

    .venv/bin/python bench/jobs.py [--jobs 100] [--minutes 3] [--kb-rows 100000]
                                   [--new-rows 500] [--skip schedule|last]

- **schedule**: two Quarry instances (gunicorn, 3 workers each, every worker with its
  scheduler, default QUARRY_JOBS_POLL_S) on one PostgreSQL store made for the run;
  ``--jobs`` jobs ``EVERY minute`` created through instance 1, their first slot at the next
  whole minute. After ``--minutes`` minutes the runs are read from the store: slots run
  once, twice or missed, the lag from slot to start (p50, p99, max) side by side with the
  poll interval, and how the runs spread over the six workers;
- **last**: in this process (Flask test client, SQLite store), a knowledge base fed by
  ``INSERT INTO kb SELECT … FROM src.docs WHERE id > LAST`` from a SQLite data source of
  ``--kb-rows`` rows; after the first run ``--new-rows`` rows are added, and the next run's
  rows read (the audit log's count of each insert) are set beside the table's size. The
  embeddings come from an OpenAI-compatible endpoint this script serves on 127.0.0.1
  (32-dimension vectors hashed from the text), so that the figure is about the rows read,
  not about the embedded model's speed (bench/kb.py measures that).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import migrate, pg_database, quarry_env, serving  # noqa: E402

TIME = "%Y-%m-%d %H:%M:%S"


def _sql(url: str, query: str) -> dict:
    body = requests.post(url + "/api/sql/query", json={"query": query}, timeout=120).json()
    if body["type"] == "error":
        raise SystemExit(f"{query[:80]}: {body['error_message']}")
    return body


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def schedule(jobs: int, minutes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, pg_database(f"quarry_bench_jobs_{os.getpid()}"
                                                           ) as store:
        env = quarry_env(QUARRY_DATABASE_URL=store.replace("postgresql://",
                                                           "postgresql+psycopg://"),
                         QUARRY_INSTANCE_PATH=tmp, QUARRY_WORKERS="3", QUARRY_THREADS="4",
                         QUARRY_PRELOAD_ML="false")
        migrate(env)
        poll = float(env.get("QUARRY_JOBS_POLL_S", "2.0"))
        with serving(env, tmp, name="one") as one, serving(env, tmp, name="two"):
            now = datetime.now(UTC)
            first = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
            if (first - now).total_seconds() < 20:  # time to create them all before it
                first += timedelta(minutes=1)
            for n in range(jobs):
                _sql(one.url, f"CREATE JOB mindsdb.bench{n} (SELECT {n}) "
                              f"START '{first:{TIME}}' EVERY minute")
            last_slot = first + timedelta(minutes=minutes - 1)
            load = os.getloadavg()
            print(f"{jobs} jobs, slots {first:%H:%M} … {last_slot:%H:%M} UTC, "
                  f"load {load[0]:.1f} at start")
            # Until the last slot's runs have all ended (or a minute past it).
            deadline = last_slot + timedelta(seconds=60)
            while datetime.now(UTC) < deadline:
                time.sleep(2)
                with psycopg.connect(store) as conn:
                    done = conn.execute(
                        "SELECT count(*) FROM job_runs WHERE slot_at = %s AND ended_at IS "
                        "NOT NULL", (last_slot,)).fetchone()[0]
                if done == jobs:
                    break
        with psycopg.connect(store) as conn:
            runs = conn.execute(
                "SELECT j.name, r.slot_at, r.started_at, r.ended_at, r.outcome, r.runner "
                "FROM job_runs r JOIN jobs j ON j.id = r.job_id").fetchall()
    wanted = {(f"bench{n}", first + timedelta(minutes=m))
              for n in range(jobs) for m in range(minutes)}
    seen: dict[tuple[str, datetime], int] = {}
    for name, slot, *_ in runs:
        seen[(name, slot)] = seen.get((name, slot), 0) + 1
    lags = [(started - slot).total_seconds() for _, slot, started, *_ in runs]
    runners: dict[str, int] = {}
    for *_, runner in runs:
        runners[runner] = runners.get(runner, 0) + 1
    outcomes = {o: sum(1 for r in runs if r[4] == o) for o in {r[4] for r in runs}}
    print(f"slots wanted {len(wanted)}, run {sum(1 for k in wanted if k in seen)}, "
          f"missed {sum(1 for k in wanted if k not in seen)}, "
          f"twice {sum(1 for v in seen.values() if v > 1)}, "
          f"runs outside the slots {sum(1 for k in seen if k not in wanted)}; "
          f"outcomes {outcomes}")
    print(f"lag slot→start s: p50 {statistics.median(lags):.2f}  p99 "
          f"{_percentile(lags, 0.99):.2f}  max {max(lags):.2f}  (poll {poll:g} s; p99/poll "
          f"{_percentile(lags, 0.99) / poll:.2f})")
    took = [(ended - started).total_seconds() for _, _, started, ended, *_ in runs if ended]
    print(f"run time s (claimed to recorded): p50 {statistics.median(took):.2f}  p99 "
          f"{_percentile(took, 0.99):.2f}; runs per worker ({len(runners)} workers): "
          f"{sorted(runners.values())}")


class _Embeddings(BaseHTTPRequestHandler):
    """POST /v1/embeddings: a 32-dimension vector hashed from each text."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = [{"index": i, "embedding": [b / 255 for b in hashlib.sha256(
            text.encode()).digest()]} for i, text in enumerate(body["input"])]
        answer = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        pass


def _rows(conn: sqlite3.Connection, start: int, count: int) -> None:
    conn.executemany("INSERT INTO docs VALUES (?, ?)",
                     [(i, f"document {i}: notes about item {i % 97}")
                      for i in range(start, start + count)])
    conn.commit()


def last(kb_rows: int, new_rows: int) -> None:
    embedder = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    threading.Thread(target=embedder.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{embedder.server_port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        source = sqlite3.connect(f"{tmp}/docs.db")
        source.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT)")
        _rows(source, 1, kb_rows)
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/store.db",
                         QUARRY_INSTANCE_PATH=tmp)
        migrate(env)
        from app import create_app
        from app.config import load_settings

        app = create_app(load_settings(env) | {
            "DATA_SOURCES": {"src": f"sqlite:///{tmp}/docs.db"}, "DEMO_SOURCE": False,
            "EMBEDDING_ENDPOINTS": base, "KB_DIR": f"{tmp}/kb", "JOBS_POLL_S": 0.2,
            "KB_INSERT_MAX_ROWS": max(100_000, kb_rows)})
        client = app.test_client()

        def sql(query: str) -> dict:
            body = client.post("/api/sql/query", json={"query": query}).get_json()
            if body["type"] == "error":
                raise SystemExit(f"{query[:80]}: {body['error_message']}")
            return body

        sql("CREATE KNOWLEDGE_BASE mindsdb.docs USING embedding_model = {'provider': "
            f"'openai', 'model_name': 'hash', 'base_url': '{base}'}}")
        sql("CREATE JOB mindsdb.sync (INSERT INTO mindsdb.docs SELECT id, body AS content "
            "FROM src.docs WHERE id > LAST) EVERY minute")

        def runs() -> list[dict]:
            return client.get("/api/projects/mindsdb/jobs/sync/history").get_json()

        def wait(count: int) -> list[dict]:
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                found = runs()
                if len([r for r in found if r["end_at"]]) >= count:
                    return found
                time.sleep(0.5)
            raise SystemExit("the job's runs did not end in 15 minutes")

        first = wait(1)[-1]
        _rows(source, kb_rows + 1, new_rows)
        second = wait(2)[0]
        counts = [json.loads(r[1])["rows"] for r in sql(
            "SELECT id, after FROM quarry.audit WHERE kind = 'knowledge_base' AND "
            "action = 'insert' ORDER BY id")["data"]]
        documents = client.get("/api/projects/mindsdb/knowledge_bases/docs").get_json()[
            "documents"]
        app.extensions["quarry.jobs"].shutdown()
    embedder.shutdown()
    print(f"first run: {first['outcome']}, {counts[0]} rows read in {first['duration_s']:.1f}"
          f" s; second run: {second['outcome']}, {counts[1]} rows read of "
          f"{kb_rows + new_rows} in the table ({counts[1] / (kb_rows + new_rows):.4f} of "
          f"it), {second['duration_s']:.2f} s ({second['duration_s'] / first['duration_s']:.3f}"
          f" of the first run's time); the knowledge base holds {documents} documents")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--kb-rows", type=int, default=100_000)
    parser.add_argument("--new-rows", type=int, default=500)
    parser.add_argument("--skip", choices=("schedule", "last"))
    args = parser.parse_args()
    if args.skip != "schedule":
        schedule(args.jobs, args.minutes)
    if args.skip != "last":
        last(args.kb_rows, args.new_rows)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
