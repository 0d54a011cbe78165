"""The 2 %-selective join of ``mindsdb_peer.py`` (issue 32) without MindsDB: 1 M PostgreSQL
orders joined with 10 000 MariaDB customers, against the same statement with both tables in
PostgreSQL, on a fresh Quarry (gunicorn's default workers), side by side in one run.

    python bench/selective_join.py [--orders 1000000] [--customers 10000] [--repeat 7] \
        [--baseline CHECKOUT]

The data are ``mindsdb_peer.py``'s (same generator, same statements). For each Quarry served
(this checkout, then ``--baseline``, another checkout such as ``git archive main``), it
prints the one-source statement's median (after one warming run), the two-source
statement's **first** run on the fresh server, then ``--repeat`` interleaved runs of both:
their medians and the ratios two-source / one-source. Everything it makes is dropped.

``--fresh ROUNDS`` measures instead what a worker's first statement costs: each round, for
each checkout in turn, two fresh servers of **one** worker (so the first request is that
worker's first), one answering the two-source statement first and then the one-source
one, the other the one-source statement first; each line gives those first two answers'
times, then the same two statements again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import ROOT, migrate, pg_database, quarry_env, serving  # noqa: E402
from mindsdb_peer import DB, JOINS, maria_database, pg_setup  # noqa: E402

SPLIT = JOINS["join, date filter (2 %)"]
ONE = JOINS["one source, date filter"]


def timed(url: str, sql: str) -> tuple[float, list]:
    started = time.perf_counter()
    body = requests.post(f"{url}/api/sql/query", json={"query": sql}, timeout=300).json()
    elapsed = time.perf_counter() - started
    if body.get("type") != "table":
        raise SystemExit(f"failed: {sql[:60]}…\n{body}")
    return elapsed, body["data"]


def measure(url: str, repeat: int) -> None:
    timed(url, ONE)  # the one source's pool and caches: warm
    first, split_rows = timed(url, SPLIT)
    ones, splits = [], []
    for _ in range(repeat):
        t1, one_rows = timed(url, ONE)
        t2, split_rows = timed(url, SPLIT)
        ones.append(t1)
        splits.append(t2)
    one, split = statistics.median(ones), statistics.median(splits)
    same = json.dumps(one_rows) == json.dumps(split_rows)
    print(f"  one source {one:.4f} s; two sources: first {first:.4f} s ({first / one:.2f}x), "
          f"median {split:.4f} s ({split / one:.2f}x); same answer: {same}", flush=True)


def fresh(env: dict[str, str], work: str, roots: list[Path], rounds: int) -> None:
    one_worker = {**env, "QUARRY_WORKERS": "1"}
    for _ in range(rounds):
        for root in roots:
            for first, second in ((SPLIT, ONE), (ONE, SPLIT)):
                with serving(one_worker, work, name=f"gunicorn-{os.getpid()}", root=root) as server:
                    time.sleep(1.0)  # the worker's start-up (its background thread) ends
                    times = [timed(server.url, sql)[0] for sql in (first, second) * 2]
                print(f"{root.name}: {'two' if first is SPLIT else 'one'} source(s) first "
                      f"{times[0]:.3f} s, then {'one' if first is SPLIT else 'two'} "
                      f"{times[1]:.3f} s; again {times[2]:.3f} s, {times[3]:.3f} s "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT")
    parser.add_argument("--fresh", type=int, metavar="ROUNDS",
                        help="first statements of fresh one-worker servers, ROUNDS times")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quarry-bench-sel-") as work, \
            pg_database(DB, *pg_setup(args.orders, args.customers)) as pg_url, \
            maria_database(args.customers) as maria_url:
        sources = {"peer_pg": pg_url.replace("postgresql://", "postgresql+psycopg://"),
                   "peer_maria": maria_url}
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                         QUARRY_INSTANCE_PATH=work, QUARRY_DEMO_SOURCE="false",
                         QUARRY_DATA_SOURCES=json.dumps(sources))
        migrate(env)
        roots = [ROOT] + ([args.baseline] if args.baseline else [])
        if args.fresh:
            fresh(env, work, roots, args.fresh)
            return
        for root in roots:
            with serving(env, work, name=f"gunicorn-{os.getpid()}", root=root) as server:
                print(f"{root}: fresh server, {len(server.worker_pids())} workers, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                measure(server.url, args.repeat)


if __name__ == "__main__":
    main()
