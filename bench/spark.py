"""Federated statements on Spark (issue 34) against DuckDB's route and one database, side by
side in one run, through Quarry served by gunicorn.

    python bench/spark.py [--scale 1] [--repeat 3] [--memory 67108864] [--cluster]

Loads TPC-H as bench/federation.py does (all of it in PostgreSQL ``one``; lineitem and
orders in PostgreSQL ``pg``, customer, nation and region in MariaDB ``maria``, part,
partsupp and supplier in SQLite ``lite``), starts a Spark Connect server in ``local[2]``
from pyspark (tests/spark_server.py), and four Quarry servers of one worker each: DuckDB's
route (FEDERATION_MEMORY 1 GiB), DuckDB's route with ``--memory`` (far below the legs'
size), Spark's route, and Spark's route without dynamic filters and parallel JDBC reads
(FEDERATION_DYNAMIC_KEYS 0, SPARK_PARTITION_ROWS 0). It prints:

- Q3, Q5, Q10, Q14: median seconds of ``--repeat`` runs over one database, split on
  DuckDB, split on DuckDB with little memory (its time, or its error), split on Spark,
  split on Spark without dynamic filters and parallel JDBC reads ("plain");
  Spark / DuckDB, Spark / plain; whether each answer equals the single database's;
- cancel on Spark: from DELETE /api/sql/queries/<id> to no running Spark job (Spark's UI
  REST API) and no JDBC read of the statement left in pg_stat_activity;
- ``--cluster``: a standalone master with two workers and a Connect server against it:
  Q5's time there and whether its answer equals the single database's.

Everything it creates is dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import federation as fed  # noqa: E402
from _server import serving  # noqa: E402

from tests.spark_server import cluster_server, connect_server  # noqa: E402

NAMES = ["Q3", "Q5", "Q10", "Q14"]


def attempt(url: str, sql: str) -> tuple[float, dict]:
    started = time.perf_counter()
    response = requests.post(f"{url}/api/sql/query", json={"query": sql}, timeout=1800)
    body = response.json() if response.headers.get("content-type", "").find("json") >= 0 \
        else {"type": "error", "error_message": response.text[:200]}
    return time.perf_counter() - started, body


def median_of(url: str, sql: str, repeat: int) -> tuple[float | None, dict]:
    times, body = [], {}
    for _ in range(repeat):
        seconds, body = attempt(url, sql)
        if body.get("type") != "table":
            return None, body
        times.append(seconds)
    return statistics.median(times), body


def queries(single: str, duck: str, small: str, spark: str, plain: str, repeat: int,
            memory: int) -> dict[str, dict]:
    """The table above; the single database's answers, by query."""
    answers = {}
    print(f"{'query':<6}{'single s':>10}{'duckdb s':>10}{'small-mem s':>13}{'spark s':>10}"
          f"{'plain s':>10}{'spark/duckdb':>14}{'spark/plain':>13}"
          "  same answer (duckdb, small, spark, plain)")
    for name in NAMES:
        single_sql, split_sql = fed.statement(name, False), fed.statement(name, True)
        for url in (single, duck, spark, plain):  # warm pools, caches and the JVM
            attempt(url, single_sql if url == single else split_sql)
        one, want = median_of(single, single_sql, repeat)
        answers[name] = want
        on_duck, duck_body = median_of(duck, split_sql, repeat)
        on_small, small_body = median_of(small, split_sql, 1)
        on_spark, spark_body = median_of(spark, split_sql, repeat)
        on_plain, plain_body = median_of(plain, split_sql, repeat)
        same = [fed.same(want["data"], b["data"]) if b.get("type") == "table" else "-"
                for b in (duck_body, small_body, spark_body, plain_body)]
        small_text = f"{on_small:.2f}" if on_small is not None else "failed"
        ratio = f"{on_spark / on_duck:.2f}" if on_spark and on_duck else "-"
        gain = f"{on_spark / on_plain:.2f}" if on_spark and on_plain else "-"
        print(f"{name:<6}{one:>10.2f}{on_duck or 0:>10.2f}{small_text:>13}"
              f"{on_spark or 0:>10.2f}{on_plain or 0:>10.2f}{ratio:>14}{gain:>13}  {same}",
              flush=True)
        if on_small is None:
            print(f"       small memory ({memory} bytes): "
                  f"{small_body.get('error_message', small_body)!s:.200}")
        if on_spark is None:
            print(f"       spark: {spark_body.get('error_message', spark_body)!s:.300}")
    return answers


def _running_jobs(ui: str) -> int:
    count = 0
    for app in requests.get(ui + "/api/v1/applications", timeout=60).json():
        count += len(requests.get(f"{ui}/api/v1/applications/{app['id']}/jobs"
                                  "?status=running", timeout=60).json())
    return count


def cancel(url: str, ui: str) -> None:
    """A statement whose PostgreSQL leg is slow to read (a view that sleeps 20 ms a row),
    cancelled once Spark's job runs and its JDBC read is in PostgreSQL."""
    with fed._pg(fed.SPLIT_DB) as conn:
        conn.execute("CREATE VIEW slow_bench AS SELECT g + length(pg_sleep(0.02)::text) "
                     "AS k FROM generate_series(1, 5000) g")
    sql = "SELECT count(*) FROM pg.slow_bench s JOIN maria.customer c ON c.c_custkey = s.k"
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(attempt(url, sql)[1]))
    thread.start()
    with fed._pg(fed.SPLIT_DB) as conn:
        def reads() -> int:  # Spark's JDBC reads of the view, running or left open
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                "'%slow_bench%SPARK_GEN_SUBQ%' AND state <> 'idle' "
                                "AND pid <> pg_backend_pid()").fetchone()[0]

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (reads() and _running_jobs(ui)):
            time.sleep(0.05)
        query_id = next(item["query_id"] for item in
                        requests.get(f"{url}/api/sql/queries", timeout=10).json()
                        if item["statement"] == sql)
        before = (reads(), _running_jobs(ui))
        asked = time.perf_counter()
        requests.delete(f"{url}/api/sql/queries/{query_id}", timeout=10)
        jobs_gone = reads_gone = None
        while (jobs_gone is None or reads_gone is None) and \
                time.perf_counter() - asked < 30:
            if reads_gone is None and not reads():
                reads_gone = time.perf_counter() - asked
            if jobs_gone is None and not _running_jobs(ui):
                jobs_gone = time.perf_counter() - asked
            time.sleep(0.02)
    thread.join()
    answered = answer[0].get("error_message", answer[0].get("type")) if answer else "-"
    shown = [f"{v * 1000:.0f} ms" if v is not None else "> 30 s"
             for v in (jobs_gone, reads_gone)]
    print(f"\ncancel on Spark: before: {before[0]} JDBC reads in PostgreSQL, {before[1]} "
          f"Spark jobs; after DELETE: no running job {shown[0]}, no JDBC read "
          f"{shown[1]} (each poll of Spark's UI takes its time); answer: {answered}",
          flush=True)


def cluster(folder: Path, env: dict[str, str], want: dict, repeat: int) -> None:
    with cluster_server(str(folder / "cluster")) as server, \
            serving({**env, "QUARRY_FEDERATION_ENGINE": "spark",
                     "QUARRY_SPARK_REMOTE": server.remote}, folder,
                    name="gunicorn-cluster") as quarry:
        sql = fed.statement("Q5", True)
        attempt(quarry.url, sql)
        seconds, body = median_of(quarry.url, sql, repeat)
        apps = requests.get(server.ui + "/api/v1/applications", timeout=60).json()
        executors = requests.get(f"{server.ui}/api/v1/applications/{apps[0]['id']}/executors",
                                 timeout=60).json()
        workers = len([e for e in executors if e["id"] != "driver"])
        same = body.get("type") == "table" and fed.same(want["data"], body["data"])
        print(f"\nstandalone cluster ({workers} executors on 2 workers): Q5 "
              f"{seconds if seconds is not None else float('nan'):.2f} s, same answer: "
              f"{same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", type=int, default=64 * 1024 * 1024,
                        help="FEDERATION_MEMORY of the small-memory DuckDB server")
    parser.add_argument("--cluster", action="store_true",
                        help="also Q5 on a standalone cluster of two workers")
    parser.add_argument("--no-queries", action="store_true",
                        help="only the cancel (and --cluster): no query table")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="quarry-bench-spark-") as work:
        folder = Path(work)
        try:
            env = fed.tpch_env(args.scale, folder, timeout_s=1200)
            with connect_server(str(folder / "spark")) as spark, contextlib.ExitStack() as s:
                duck = s.enter_context(serving(env, folder))
                small = s.enter_context(serving(
                    {**env, "QUARRY_FEDERATION_MEMORY": str(args.memory)}, folder,
                    name="gunicorn-small"))
                on_spark = s.enter_context(serving(
                    {**env, "QUARRY_FEDERATION_ENGINE": "spark",
                     "QUARRY_SPARK_REMOTE": spark.remote}, folder, name="gunicorn-spark"))
                # The same Spark without Quarry's dynamic filters and parallel reads.
                plain = s.enter_context(serving(
                    {**env, "QUARRY_FEDERATION_ENGINE": "spark",
                     "QUARRY_SPARK_REMOTE": spark.remote, "QUARRY_FEDERATION_DYNAMIC_KEYS": "0",
                     "QUARRY_SPARK_PARTITION_ROWS": "0"}, folder, name="gunicorn-plain"))
                answers = {"Q5": attempt(duck.url, fed.statement("Q5", False))[1]} \
                    if args.no_queries else queries(duck.url, duck.url, small.url,
                                                    on_spark.url, plain.url, args.repeat,
                                                    args.memory)
                cancel(on_spark.url, spark.ui)
            if args.cluster:  # alone on the machine: the local server is stopped
                cluster(folder, env, answers["Q5"], args.repeat)
            print(f"load average at end: {os.getloadavg()}")
        finally:
            fed.drop()


if __name__ == "__main__":
    main()
