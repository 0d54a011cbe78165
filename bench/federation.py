"""Federated SELECT (issue 21): TPC-H split over three sources against one database,
side by side in one run, through Quarry served by gunicorn.

    python bench/federation.py [--scale 1] [--repeat 3]
    python bench/federation.py --first [--scale 0.1] [--repeat 5] [--first-request N]
    python bench/federation.py --big-join 5000000 [--memory 268435456]

Generates TPC-H with ``tpchgen-cli`` (PyPI) and loads it twice: all of it in one PostgreSQL
database (source ``one``), and split — lineitem and orders in PostgreSQL (``pg``), customer,
nation and region in MariaDB (``maria``), part, partsupp and supplier in SQLite (``lite``).
Then, with one gunicorn worker (so its memory is the statements'), it prints:

- Q3, Q5, Q10, Q12 and Q14: median seconds of ``--repeat`` runs over one database, split,
  and split on a second server with dynamic filters off (FEDERATION_DYNAMIC_KEYS=0), run in
  turn, and each split time / single (Q12 reads only lineitem and orders: one source, so it
  takes the single-source path both ways);
- the rows a leg with a 0.1 %-selective filter on lineitem fetches, against the table's rows
  (the leg's SQL from EXPLAIN, counted in PostgreSQL);
- the worker's RSS growth during Q5 split (sampled every 50 ms) against FEDERATION_MEMORY;
- cancel: from DELETE /api/sql/queries/<id> to the leg gone from pg_stat_activity;
- the dynamic filters EXPLAIN shows for each split query.

``--first`` measures instead what a fresh server (gunicorn's default workers, so a request
may land on a worker that never ran the statement) does with statements it never saw: per
query, the single database's median (after one warming run), the split statement's
**first** run, then ``--repeat`` interleaved runs of both and their medians. With
``--baseline DIR`` (another checkout), a fresh server of it runs beside this one's, both
started at once: each first run and each round on both, interleaved. ``--first-request
N`` measures instead the very first request of fresh servers (TPC-H Q3 split): N rounds
of a fresh server of each checkout in turn, one at a time.

``--big-join N`` measures instead a join of two legs of N rows each (two PostgreSQL
databases, a view over generate_series in each) under ``--memory``: the worker's RSS growth
and the engine's spill folder at its fullest.

Everything it creates is dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pymysql
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import BIN, PG_SERVER, ROOT, migrate, quarry_env, serving  # noqa: E402

PID = os.getpid()
SPLIT_DB, ONE_DB = f"quarry_bench_fed_{PID}", f"quarry_bench_fed_one_{PID}"
MEMORY = 1024 * 1024 * 1024

DDL = {
    "region": "r_regionkey integer, r_name varchar(25), r_comment varchar(152)",
    "nation": "n_nationkey integer, n_name varchar(25), n_regionkey integer, "
              "n_comment varchar(152)",
    "customer": "c_custkey integer, c_name varchar(25), c_address varchar(40), "
                "c_nationkey integer, c_phone varchar(15), c_acctbal decimal(15,2), "
                "c_mktsegment varchar(10), c_comment varchar(117)",
    "supplier": "s_suppkey integer, s_name varchar(25), s_address varchar(40), "
                "s_nationkey integer, s_phone varchar(15), s_acctbal decimal(15,2), "
                "s_comment varchar(101)",
    "part": "p_partkey integer, p_name varchar(55), p_mfgr varchar(25), p_brand varchar(10), "
            "p_type varchar(25), p_size integer, p_container varchar(10), "
            "p_retailprice decimal(15,2), p_comment varchar(23)",
    "partsupp": "ps_partkey integer, ps_suppkey integer, ps_availqty integer, "
                "ps_supplycost decimal(15,2), ps_comment varchar(199)",
    "orders": "o_orderkey integer, o_custkey integer, o_orderstatus varchar(1), "
              "o_totalprice decimal(15,2), o_orderdate date, o_orderpriority varchar(15), "
              "o_clerk varchar(15), o_shippriority integer, o_comment varchar(79)",
    "lineitem": "l_orderkey integer, l_partkey integer, l_suppkey integer, "
                "l_linenumber integer, l_quantity decimal(15,2), "
                "l_extendedprice decimal(15,2), l_discount decimal(15,2), "
                "l_tax decimal(15,2), l_returnflag varchar(1), l_linestatus varchar(1), "
                "l_shipdate date, l_commitdate date, l_receiptdate date, "
                "l_shipinstruct varchar(25), l_shipmode varchar(10), l_comment varchar(44)",
}
KEYS = {"region": "r_regionkey", "nation": "n_nationkey", "customer": "c_custkey",
        "supplier": "s_suppkey", "part": "p_partkey", "orders": "o_orderkey",
        "partsupp": "ps_partkey, ps_suppkey", "lineitem": "l_orderkey, l_linenumber"}
INDEXES = ["CREATE INDEX ON orders (o_custkey)", "CREATE INDEX ON orders (o_orderdate)",
           "CREATE INDEX ON lineitem (l_shipdate)"]
PLACES = {"lineitem": "pg", "orders": "pg", "customer": "maria", "nation": "maria",
          "region": "maria", "part": "lite", "partsupp": "lite", "supplier": "lite"}

QUERIES = {
    "Q3": """SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue,
  o_orderdate, o_shippriority FROM {customer}, {orders}, {lineitem}
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate LIMIT 10""",
    "Q5": """SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM {customer}, {orders}, {lineitem}, {supplier}, {nation}, {region}
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
  AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
  AND r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'
GROUP BY n_name ORDER BY revenue DESC""",
    "Q10": """SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue,
  c_acctbal, n_name, c_address, c_phone, c_comment FROM {customer}, {orders}, {lineitem}, {nation}
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01'
  AND o_orderdate < DATE '1994-01-01' AND l_returnflag = 'R' AND c_nationkey = n_nationkey
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC, c_custkey LIMIT 20""",
    "Q12": """SELECT l_shipmode, sum(CASE WHEN o_orderpriority = '1-URGENT'
  OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count,
  sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0
  END) AS low_line_count FROM {orders}, {lineitem}
WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
  AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
  AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'
GROUP BY l_shipmode ORDER BY l_shipmode""",
    "Q14": """SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN
  l_extendedprice * (1 - l_discount) ELSE 0 END) / sum(l_extendedprice * (1 - l_discount))
  AS promo_revenue FROM {lineitem}, {part}
WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01'
  AND l_shipdate < DATE '1995-10-01'""",
}


def generate(scale: float, folder: Path) -> None:
    subprocess.run([str(BIN / "tpchgen-cli"), "csv", "-s", str(scale),
                    f"--output-dir={folder}"], check=True)


def _pg(database: str) -> psycopg.Connection:
    return psycopg.connect(f"{PG_SERVER}/{database}", autocommit=True)


def _maria(database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database=database,
                           autocommit=True, ssl_disabled=True, local_infile=True)


def _ddl(table: str) -> str:
    return f"CREATE TABLE {table} ({DDL[table]}, PRIMARY KEY ({KEYS[table]}))"


def load_pg(database: str, tables: list[str], folder: Path) -> None:
    with _pg(database) as conn:
        for table in tables:
            conn.execute(_ddl(table))
            with conn.cursor().copy(f"COPY {table} FROM STDIN WITH (FORMAT csv, HEADER)") \
                    as copy, open(folder / f"{table}.csv", "rb") as data:
                while chunk := data.read(1 << 20):
                    copy.write(chunk)
        for index in INDEXES:
            if index.split(" ON ")[1].split()[0] in tables:
                conn.execute(index)
        conn.execute("ANALYZE")


def load_maria(tables: list[str], folder: Path) -> None:
    with contextlib.closing(_maria()) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{SPLIT_DB}`")
        cur.execute(f"USE `{SPLIT_DB}`")
        for table in tables:
            cur.execute(_ddl(table))
            with open(folder / f"{table}.csv", newline="") as data:
                rows = csv.reader(data)
                header = next(rows)
                marks = ", ".join(["%s"] * len(header))
                batch = []
                for row in rows:
                    batch.append(row)
                    if len(batch) == 5000:
                        cur.executemany(f"INSERT INTO {table} VALUES ({marks})", batch)
                        batch = []
                if batch:
                    cur.executemany(f"INSERT INTO {table} VALUES ({marks})", batch)
        cur.execute("CREATE INDEX c_nation ON customer (c_nationkey)")


def load_sqlite(path: Path, tables: list[str], folder: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as lite:
        for table in tables:
            lite.execute(_ddl(table))
            with open(folder / f"{table}.csv", newline="") as data:
                rows = csv.reader(data)
                header = next(rows)
                lite.executemany(f"INSERT INTO {table} VALUES "
                                 f"({', '.join(['?'] * len(header))})", rows)
        lite.commit()
        lite.execute("ANALYZE")


def build(folder: Path, data: Path) -> dict[str, str]:
    with _pg("postgres") as admin:
        for name in (SPLIT_DB, ONE_DB):
            admin.execute(f'CREATE DATABASE "{name}"')
    load_pg(ONE_DB, list(DDL), data)
    load_pg(SPLIT_DB, [t for t, place in PLACES.items() if place == "pg"], data)
    load_maria([t for t, place in PLACES.items() if place == "maria"], data)
    lite = folder / "tpch.db"
    load_sqlite(lite, [t for t, place in PLACES.items() if place == "lite"], data)
    return {"one": f"postgresql+psycopg://{PG_SERVER.split('://', 1)[1]}/{ONE_DB}",
            "pg": f"postgresql+psycopg://{PG_SERVER.split('://', 1)[1]}/{SPLIT_DB}",
            "maria": f"mysql+pymysql://root@127.0.0.1:3306/{SPLIT_DB}",
            "lite": f"sqlite:///{lite}"}


def drop() -> None:
    with _pg("postgres") as admin:
        for name in (SPLIT_DB, ONE_DB):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    with contextlib.closing(_maria()) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{SPLIT_DB}`")


def statement(name: str, split: bool) -> str:
    names = {t: f"{PLACES[t] if split else 'one'}.{t}" for t in DDL}
    return QUERIES[name].format(**names)


def post(url: str, sql: str, **extra) -> dict:
    response = requests.post(f"{url}/api/sql/query", json={"query": sql, **extra},
                             timeout=900)
    body = response.json()
    if body.get("type") != "table":
        raise SystemExit(f"failed: {sql[:80]}…\n{body}")
    return body


def timed(url: str, sql: str) -> tuple[float, dict]:
    started = time.perf_counter()
    body = post(url, sql)
    return time.perf_counter() - started, body


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def same(a: list, b: list) -> bool:
    def norm(rows):
        return [[round(v, 6) if isinstance(v, float) else v for v in row] for row in rows]
    return norm(a) == norm(b)


def queries(url: str, off_url: str, repeat: int) -> None:
    """Single, split, and split on a second server whose dynamic filters are off
    (FEDERATION_DYNAMIC_KEYS=0), run in turn."""
    print(f"{'query':<6}{'single s':>10}{'split s':>10}{'split/single':>14}"
          f"{'no dyn. s':>11}{'no dyn./single':>16}  same answer")
    for name in QUERIES:
        single_sql, split_sql = statement(name, False), statement(name, True)
        # Warm all three (pools, caches, DuckDB); the first split run also learns the
        # legs' sizes, which order the dynamic filters of the next ones.
        timed(url, single_sql), timed(url, split_sql), timed(off_url, split_sql)
        singles, splits, offs = [], [], []
        for _ in range(repeat):
            t1, one = timed(url, single_sql)
            t2, fed = timed(url, split_sql)
            t3, unfiltered = timed(off_url, split_sql)
            singles.append(t1)
            splits.append(t2)
            offs.append(t3)
        a, b, c = (statistics.median(singles), statistics.median(splits),
                   statistics.median(offs))
        agree = same(one["data"], fed["data"]) and same(one["data"], unfiltered["data"])
        print(f"{name:<6}{a:>10.3f}{b:>10.3f}{b / a:>14.2f}{c:>11.3f}{c / a:>16.2f}  "
              f"{agree}", flush=True)
    print("\ndynamic filters (EXPLAIN, once the legs' sizes are known):")
    for name in QUERIES:
        if len({PLACES[t] for t in DDL if "{" + t + "}" in QUERIES[name]}) == 1:
            continue  # one source: its own EXPLAIN
        steps = post(url, "EXPLAIN " + statement(name, True))["data"]
        shown = [f"{step[1]}: {step[0].split('; ', 1)[1]}" for step in steps
                 if "; " in step[0]]
        print(f"  {name}: " + ("; ".join(shown) if shown else "none"))


def start_together(stack: contextlib.ExitStack, managers: list) -> list:
    """Enter the ``serving`` managers at once (each stopped by ``stack``): fresh servers
    that start one after the other would have the later ones' workers starting beside the
    earlier ones' first statements; started together, each server's start is beside the
    others' alike."""
    entered: list = [None] * len(managers)
    failures: list[BaseException] = []

    def enter(i: int) -> None:
        try:
            entered[i] = managers[i].__enter__()
        except BaseException as exc:  # noqa: BLE001 - raised below, the others stopped
            failures.append(exc)

    threads = [threading.Thread(target=enter, args=(i,)) for i in range(len(managers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for manager, server in zip(managers, entered, strict=True):
        if server is not None:
            stack.push(manager.__exit__)
    if failures:
        raise failures[0]
    return entered


def first_requests(env: dict[str, str], folder: Path, roots: list[Path], rounds: int,
                   name: str = "Q3") -> None:
    """A fresh server's very first request: ``rounds`` times, a fresh server of each
    checkout in turn (one at a time), given the split ``name`` as its first request the
    moment it answers, then the single statement 3 times (its median)."""
    print(f"{name} split as a fresh server's first request, seconds, and / single")
    times: dict[int, list[float]] = {i: [] for i in range(len(roots))}
    for round_ in range(rounds):
        for i, root in enumerate(roots):
            with serving(env, folder, name=f"gunicorn-first-{i}", root=root) as server:
                first, _ = timed(server.url, statement(name, True))
                single = statistics.median(timed(server.url, statement(name, False))[0]
                                           for _ in range(3))
            times[i].append(first / single)
            print(f"  round {round_ + 1} {'this' if i == 0 else 'base'}: first {first:.3f}, "
                  f"single {single:.3f}, first/single {first / single:.2f}, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for i, root in enumerate(roots):
        print(f"{'this' if i == 0 else 'base'} ({root}): median first/single "
              f"{statistics.median(times[i]):.2f}")


def first_runs(urls: list[str], repeat: int) -> None:
    """Split statements never run before on these servers (fresh ones: this checkout's and
    the baselines'), against the single database: per query, the single database once to
    warm it, the split statement's first run on each server, then ``repeat`` rounds of
    the single statement and the split one on each server, interleaved."""
    names = ["this"] + [f"base{i}" if len(urls) > 2 else "base" for i in range(1, len(urls))]
    print(f"{'query':<6}{'single s':>10}" + "".join(
        f"{name + ' first s':>15}{'first/single':>14}{name + ' split s':>15}"
        f"{'split/single':>14}" for name in names) + "  same answer")
    for turn, name in enumerate(QUERIES):
        single_sql, split_sql = statement(name, False), statement(name, True)
        timed(urls[0], single_sql)  # the single database's pools and caches: warm
        # The servers take turns at going first (the first one warms the sources' caches).
        order = list(range(len(urls)))[turn % len(urls):] + \
            list(range(len(urls)))[:turn % len(urls)]
        firsts, answers = [0.0] * len(urls), []
        for i in order:
            firsts[i], fed = timed(urls[i], split_sql)
            answers.append(fed)
        singles, splits = [], [[] for _ in urls]
        for round_ in range(repeat):
            t1, one = timed(urls[0], single_sql)
            singles.append(t1)
            for i in order[round_ % len(urls):] + order[:round_ % len(urls)]:
                t2, fed = timed(urls[i], split_sql)
                splits[i].append(t2)
                answers.append(fed)
        single = statistics.median(singles)
        shown = "".join(
            f"{first:>15.3f}{first / single:>14.2f}{statistics.median(times):>15.3f}"
            f"{statistics.median(times) / single:>14.2f}"
            for first, times in zip(firsts, splits, strict=True))
        agree = all(same(one["data"], fed["data"]) for fed in answers)
        print(f"{name:<6}{single:>10.3f}{shown}  {agree}", flush=True)


def selective_leg(url: str) -> None:
    top = post(url, "SELECT max(l_orderkey), count(*) FROM lineitem", context={"db": "pg"})
    highest, total = top["data"][0]
    cut = highest // 1000
    sql = ("SELECT l.l_orderkey, l.l_quantity, n.n_name FROM pg.lineitem l "
           "JOIN lite.supplier s ON s.s_suppkey = l.l_suppkey "
           f"JOIN maria.nation n ON n.n_nationkey = s.s_nationkey WHERE l.l_orderkey <= {cut}")
    legs = {row[1]: row[2] for row in post(url, "EXPLAIN " + sql)["data"]}
    fetched = post(url, f"SELECT count(*) FROM ({legs['pg']}) x", context={"db": "pg"})
    rows = fetched["data"][0][0]
    answer = len(post(url, sql)["data"])
    print(f"\nleg with a 0.1 %-selective filter on lineitem: {rows} of {total} rows fetched "
          f"({100 * rows / total:.3f} %), answer {answer} rows\n  leg SQL: {legs['pg']}")


def memory(url: str, pid: int) -> None:
    before, peak, done = rss(pid), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        post(url, statement("Q5", True))
    finally:
        done.set()
        sampler.join()
    growth = peak[0] - before
    print(f"\nworker RSS during Q5 split: {before / 2**20:.0f} MiB before, peak "
          f"{peak[0] / 2**20:.0f} MiB, growth {growth / 2**20:.0f} MiB "
          f"(FEDERATION_MEMORY {MEMORY / 2**20:.0f} MiB)")


def cancel(url: str) -> None:
    sql = ("SELECT count(*) FROM pg.lineitem l JOIN lite.part p ON p.p_partkey = l.l_partkey "
           "JOIN pg.orders o ON o.o_orderkey = l.l_orderkey")
    thread = threading.Thread(target=lambda: requests.post(
        f"{url}/api/sql/query", json={"query": sql}, timeout=900))
    thread.start()
    query_id = None
    while query_id is None:
        time.sleep(0.05)
        listed = requests.get(f"{url}/api/sql/queries", timeout=10).json()
        for item in listed:
            if item["statement"] == sql:
                query_id = item["query_id"]
    time.sleep(0.5)  # the PostgreSQL leg is under way
    with _pg(SPLIT_DB) as conn:
        marker = f"%quarry_{query_id}%"
        running = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s "
                               "AND state = 'active' AND pid <> pg_backend_pid()",
                               (marker,)).fetchone()[0]
        asked = time.perf_counter()
        requests.delete(f"{url}/api/sql/queries/{query_id}", timeout=10)
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND "
                           "state = 'active' AND pid <> pg_backend_pid()",
                           (marker,)).fetchone()[0]:
            time.sleep(0.01)
        gone = time.perf_counter() - asked
    thread.join()
    print(f"\ncancel: leg running in PostgreSQL before: {running}; gone from "
          f"pg_stat_activity {gone * 1000:.0f} ms after DELETE")


def big_join(rows: int, memory: int) -> None:
    """Two legs of ``rows`` rows each (PostgreSQL views over generate_series, in two
    databases), joined in the engine with FEDERATION_MEMORY ``memory``: the worker's RSS
    growth, and the engine's spill folder at its fullest."""
    view = ("CREATE VIEW big AS SELECT g::bigint AS n, md5(g::text) AS label "
            f"FROM generate_series(1, {rows}) g")
    with _pg("postgres") as admin:
        for name in (SPLIT_DB, ONE_DB):
            admin.execute(f'CREATE DATABASE "{name}"')
    for name in (SPLIT_DB, ONE_DB):
        with _pg(name) as conn:
            conn.execute(view)
    server_part = PG_SERVER.split("://", 1)[1]
    sources = {"a": f"postgresql+psycopg://{server_part}/{SPLIT_DB}",
               "b": f"postgresql+psycopg://{server_part}/{ONE_DB}"}
    with tempfile.TemporaryDirectory(prefix="quarry-bench-fed-") as work:
        folder = Path(work)
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{folder}/store.db",
                         QUARRY_INSTANCE_PATH=str(folder), QUARRY_WORKERS="1",
                         QUARRY_DEMO_SOURCE="false", QUARRY_DATA_SOURCES=json.dumps(sources),
                         QUARRY_SQL_TIMEOUT_S="900", QUARRY_FEDERATION_MEMORY=str(memory),
                         QUARRY_FEDERATION_TEMP=str(folder / "spill"))
        migrate(env)
        with serving(env, folder) as server:
            pid = server.worker_pids()[0]
            post(server.url, "SELECT count(*) FROM a.big x JOIN b.big y ON x.n = y.n "
                             "WHERE x.n < 10")  # loads DuckDB and the drivers
            before, peak, spill, done = rss(pid), [0], [0], threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], rss(pid))
                    used = sum(f.stat().st_size for f in (folder / "spill").rglob("*")
                               if f.is_file()) if (folder / "spill").exists() else 0
                    spill[0] = max(spill[0], used)
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample)
            sampler.start()
            started = time.perf_counter()
            try:
                body = post(server.url, "SELECT count(*), sum(x.n), count(DISTINCT y.label) "
                                        "FROM a.big x JOIN b.big y ON x.n = y.n")
            finally:
                done.set()
                sampler.join()
            print(f"join of two legs of {rows} rows, FEDERATION_MEMORY "
                  f"{memory / 2**20:.0f} MiB: {time.perf_counter() - started:.1f} s, "
                  f"answer {body['data']}; worker RSS {before / 2**20:.0f} MiB before, "
                  f"growth {(peak[0] - before) / 2**20:.0f} MiB; spill folder at most "
                  f"{spill[0] / 2**20:.0f} MiB")


def tpch_env(scale: float, folder: Path, *, timeout_s: int) -> dict[str, str]:
    """Generate TPC-H at ``scale`` and load it (``build``); the environment of a Quarry
    server of one worker over its sources, its store migrated. ``drop()`` undoes it."""
    started = time.perf_counter()
    generate(scale, folder / "data")
    sources = build(folder, folder / "data")
    print(f"TPC-H scale {scale}: generated and loaded in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{folder}/store.db",
                     QUARRY_INSTANCE_PATH=str(folder), QUARRY_WORKERS="1",
                     QUARRY_DEMO_SOURCE="false", QUARRY_DATA_SOURCES=json.dumps(sources),
                     QUARRY_SQL_TIMEOUT_S=str(timeout_s), QUARRY_SQL_MAX_ROWS="1000000",
                     QUARRY_FEDERATION_MEMORY=str(MEMORY))
    migrate(env)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first", action="store_true",
                        help="first runs on a fresh server of the default workers")
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT", action="append",
                        default=[],
                        help="with --first: the same on a fresh server of another checkout "
                             "of Quarry (e.g. a worktree of main), run beside this one's, "
                             "interleaved (may be given more than once)")
    parser.add_argument("--first-request", type=int, default=0, metavar="ROUNDS",
                        help="with --first: instead, ROUNDS fresh servers of each checkout "
                             "in turn, each given a split statement as its first request")
    parser.add_argument("--big-join", type=int, default=0, metavar="ROWS",
                        help="instead of TPC-H: join two legs of ROWS rows each")
    parser.add_argument("--memory", type=int, default=MEMORY,
                        help="FEDERATION_MEMORY in bytes for --big-join")
    args = parser.parse_args()
    if args.big_join:
        try:
            big_join(args.big_join, args.memory)
        finally:
            drop()
        return
    with tempfile.TemporaryDirectory(prefix="quarry-bench-fed-") as work:
        folder = Path(work)
        try:
            env = tpch_env(args.scale, folder, timeout_s=600)
            if args.first:
                fresh = {k: v for k, v in env.items() if k != "QUARRY_WORKERS"}
                if args.first_request:
                    first_requests(fresh, folder, [ROOT] + list(args.baseline),
                                   args.first_request)
                    return
                with contextlib.ExitStack() as stack:
                    roots = [ROOT] + list(args.baseline)
                    servers = start_together(stack, [
                        serving(fresh, folder, name=f"gunicorn-fresh-{i}", root=root)
                        for i, root in enumerate(roots)])
                    urls = []
                    for i, (root, server) in enumerate(zip(roots, servers, strict=True)):
                        print(f"{'this' if i == 0 else 'base'}: {root}, fresh server, "
                              f"{len(server.worker_pids())} workers")
                        urls.append(server.url)
                    print(f"load average before: {os.getloadavg()}", flush=True)
                    first_runs(urls, args.repeat)
                    print(f"load average after: {os.getloadavg()}")
                return
            off_env = {**env, "QUARRY_FEDERATION_DYNAMIC_KEYS": "0"}
            with serving(env, folder) as server, \
                    serving(off_env, folder, name="gunicorn-off") as off:
                worker = server.worker_pids()[0]
                queries(server.url, off.url, args.repeat)
                selective_leg(server.url)
                memory(server.url, worker)
                cancel(server.url)
        finally:
            drop()


if __name__ == "__main__":
    main()
