"""TPC-H Q3, Q5, Q10, Q12 and Q14 through POST /api/sql/query against the driver alone.

    .venv/bin/pip install -e '.[bench]'          # tpchgen-cli
    .venv/bin/python bench/tpch.py [--scale 0.1] [--rounds 15] [--sources pg,mariadb,sqlite]
                                   [--baseline DIR] [--keep-data DIR]

Generates the TPC-H tables with ``tpchgen-cli`` (CSV) at the given scale factor, loads them
into a new PostgreSQL database (quarry_tpch_<pid>), a new MariaDB database of the same name
and a SQLite file, serves Quarry with gunicorn with the three as data sources, and runs each
query through Quarry (one client, keep-alive) and through the raw driver in this process
(PostgreSQL: psycopg plain ``execute`` + ``fetchall``; MariaDB: PyMySQL's default buffered
cursor; SQLite: ``sqlite3``), interleaved, round after round, the order of the two swapped
every round. Prints the median of each and their ratio. For PostgreSQL it also times the
statement in a psycopg named (server-side) cursor, the way every statement used to run; for
MariaDB, PyMySQL's unbuffered SSCursor, the way Quarry reads. ``--baseline DIR`` serves a
second Quarry from DIR (another version, e.g. ``git archive main | tar -x -C DIR``) beside
this one and times it in the same rounds ("quarry-base"). Everything it creates is removed
at the end.

Quarry's answer is JSON-encoded and sent over HTTP; the raw driver's rows are not encoded:
the ratio counts all of Quarry's own cost. The queries return 1 to 20 rows, so it is
the time in the database that is compared.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import BIN, migrate, pg_database, quarry_env, serving  # noqa: E402

NAME = f"quarry_tpch_{os.getpid()}"
MARIADB = dict(host=os.environ.get("QUARRY_BENCH_MARIADB_HOST", "127.0.0.1"),
               port=int(os.environ.get("QUARRY_BENCH_MARIADB_PORT", "3306")),
               user=os.environ.get("QUARRY_BENCH_MARIADB_USER", "root"))

# The TPC-H schema (types of the specification; primary keys only, as generated).
TABLES = {
    "region": "r_regionkey integer PRIMARY KEY, r_name char(25), r_comment varchar(152)",
    "nation": "n_nationkey integer PRIMARY KEY, n_name char(25), n_regionkey integer, "
              "n_comment varchar(152)",
    "supplier": "s_suppkey integer PRIMARY KEY, s_name char(25), s_address varchar(40), "
                "s_nationkey integer, s_phone char(15), s_acctbal decimal(15,2), "
                "s_comment varchar(101)",
    "customer": "c_custkey integer PRIMARY KEY, c_name varchar(25), c_address varchar(40), "
                "c_nationkey integer, c_phone char(15), c_acctbal decimal(15,2), "
                "c_mktsegment char(10), c_comment varchar(117)",
    "part": "p_partkey integer PRIMARY KEY, p_name varchar(55), p_mfgr char(25), "
            "p_brand char(10), p_type varchar(25), p_size integer, p_container char(10), "
            "p_retailprice decimal(15,2), p_comment varchar(23)",
    "partsupp": "ps_partkey integer, ps_suppkey integer, ps_availqty integer, "
                "ps_supplycost decimal(15,2), ps_comment varchar(199), "
                "PRIMARY KEY (ps_partkey, ps_suppkey)",
    "orders": "o_orderkey integer PRIMARY KEY, o_custkey integer, o_orderstatus char(1), "
              "o_totalprice decimal(15,2), o_orderdate date, o_orderpriority char(15), "
              "o_clerk char(15), o_shippriority integer, o_comment varchar(79)",
    "lineitem": "l_orderkey integer, l_partkey integer, l_suppkey integer, "
                "l_linenumber integer, l_quantity decimal(15,2), "
                "l_extendedprice decimal(15,2), l_discount decimal(15,2), "
                "l_tax decimal(15,2), l_returnflag char(1), l_linestatus char(1), "
                "l_shipdate date, l_commitdate date, l_receiptdate date, "
                "l_shipinstruct char(25), l_shipmode char(10), l_comment varchar(44), "
                "PRIMARY KEY (l_orderkey, l_linenumber)",
}

# The queries with the specification's validation parameters. Dates are written as
# strings (each database compares a date column with one; SQLite keeps dates as text) and
# date arithmetic is done beforehand, so that one text runs on all three.
QUERIES = {
    "Q3": """
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate,
       o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < '1995-03-15' AND l_shipdate > '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority
ORDER BY revenue DESC, o_orderdate
LIMIT 10""",
    "Q5": """
SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer, orders, lineitem, supplier, nation, region
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
  AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey
  AND n_regionkey = r_regionkey AND r_name = 'ASIA'
  AND o_orderdate >= '1994-01-01' AND o_orderdate < '1995-01-01'
GROUP BY n_name
ORDER BY revenue DESC""",
    "Q10": """
SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal,
       n_name, c_address, c_phone, c_comment
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate >= '1993-10-01' AND o_orderdate < '1994-01-01'
  AND l_returnflag = 'R' AND c_nationkey = n_nationkey
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC
LIMIT 20""",
    "Q12": """
SELECT l_shipmode,
       sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
                THEN 1 ELSE 0 END) AS high_line_count,
       sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
                THEN 1 ELSE 0 END) AS low_line_count
FROM orders, lineitem
WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
  AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
  AND l_receiptdate >= '1994-01-01' AND l_receiptdate < '1995-01-01'
GROUP BY l_shipmode
ORDER BY l_shipmode""",
    "Q14": """
SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount)
                         ELSE 0 END) / sum(l_extendedprice * (1 - l_discount))
       AS promo_revenue
FROM lineitem, part
WHERE l_partkey = p_partkey AND l_shipdate >= '1995-09-01' AND l_shipdate < '1995-10-01'""",
}


def generate(scale: float, out: Path) -> None:
    done = subprocess.run([str(BIN / "tpchgen-cli"), "csv", "-s", str(scale),
                           f"--output-dir={out}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tpchgen-cli failed: {done.stderr}")


def load_postgresql(url: str, data: Path) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table, columns in TABLES.items():
            conn.execute(f"CREATE TABLE {table} ({columns})")
            with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv, HEADER true)") \
                    as copy, open(data / f"{table}.csv", "rb") as f:
                while chunk := f.read(1 << 20):
                    copy.write(chunk)
        conn.execute("VACUUM ANALYZE")


def mariadb_connect(database: str | None = None, **extra):
    import pymysql

    return pymysql.connect(**MARIADB, database=database, autocommit=True, **extra)


def load_mariadb(data: Path) -> None:
    conn = mariadb_connect(local_infile=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {NAME}")
            cursor.execute(f"USE {NAME}")
            for table, columns in TABLES.items():
                cursor.execute(f"CREATE TABLE {table} ({columns}) ENGINE=InnoDB")
                cursor.execute(f"LOAD DATA LOCAL INFILE '{data / (table + '.csv')}' "
                               f"INTO TABLE {table} FIELDS TERMINATED BY ',' "
                               "OPTIONALLY ENCLOSED BY '\"' IGNORE 1 LINES")
                cursor.execute(f"ANALYZE TABLE {table}")
                cursor.fetchall()
    finally:
        conn.close()


def drop_mariadb() -> None:
    conn = mariadb_connect()
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {NAME}")
    finally:
        conn.close()


def load_sqlite(path: Path, data: Path) -> None:
    conn = sqlite3.connect(path)
    for table, columns in TABLES.items():
        conn.execute(f"CREATE TABLE {table} ({columns})")
        with open(data / f"{table}.csv", newline="") as f:
            reader = csv.reader(f)
            width = len(next(reader))
            conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * width)})",
                             reader)
    conn.commit()
    conn.execute("ANALYZE")
    conn.close()


class Quarry:
    def __init__(self, port: int, source: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port)
        self.source = source

    def __call__(self, sql: str) -> list:
        body = json.dumps({"query": sql, "context": {"db": self.source}})
        try:
            answer = self._ask(body)
        except (ConnectionError, http.client.RemoteDisconnected):
            # gunicorn closes a connection idle for 5 s (keepalive): at scale factor 1 the
            # other runners take longer than that. A new connection, then the same request.
            self.conn.close()
            answer = self._ask(body)
        if answer.get("type") != "table":
            raise SystemExit(f"Quarry answered {answer}")
        return answer["data"]

    def _ask(self, body: str) -> dict:
        self.conn.request("POST", "/api/sql/query", body, {"Content-Type": "application/json"})
        return json.loads(self.conn.getresponse().read())


class RawPostgreSQL:
    def __init__(self, url: str, named: bool = False) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.named = named

    def __call__(self, sql: str) -> list:
        if self.named:  # a server-side cursor in a transaction, as Quarry ran all statements
            with self.conn.transaction(), self.conn.cursor(name="bench") as cursor:
                cursor.execute(sql)
                return cursor.fetchall()
        return self.conn.execute(sql).fetchall()


class RawMariaDB:
    def __init__(self) -> None:
        self.conn = mariadb_connect(NAME)

    def __call__(self, sql: str) -> list:
        with self.conn.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()


class RawMariaDBUnbuffered(RawMariaDB):
    def __call__(self, sql: str) -> list:
        import pymysql.cursors

        with self.conn.cursor(pymysql.cursors.SSCursor) as cursor:
            cursor.execute(sql)
            return cursor.fetchall()


class RawSQLite:
    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def __call__(self, sql: str) -> list:
        return self.conn.execute(sql).fetchall()


def measure(runners: dict, rounds: int) -> dict[str, dict[str, float]]:
    """{query: {runner: median seconds}}, the runners interleaved, their order turning."""
    samples = {q: {r: [] for r in runners} for q in QUERIES}
    names = list(runners)
    for sql in QUERIES.values():  # warm-up: caches, connections, the gate's cache
        for r in names:
            runners[r](sql)
    for i in range(rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for q, sql in QUERIES.items():
            for r in order:
                started = time.perf_counter()
                rows = runners[r](sql)
                samples[q][r].append(time.perf_counter() - started)
                if not rows:
                    raise SystemExit(f"{r} returned no rows for {q}")
    return {q: {r: statistics.median(s) for r, s in by.items()} for q, by in samples.items()}


def report(title: str, medians: dict[str, dict[str, float]], base: str) -> None:
    runners = list(next(iter(medians.values())))
    others = [r for r in runners if r != base]
    print(f"\n{title}: median ms, and / {base}")
    print("query " + "".join(f"{r:>14}" for r in runners) + "".join(f"{r:>14}" for r in others))
    for q, by in medians.items():
        print(f"{q:<6}" + "".join(f"{by[r] * 1000:>14.1f}" for r in runners)
              + "".join(f"{by[r] / by[base]:>13.2f}x" for r in others))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sources", default="pg,mariadb,sqlite")
    parser.add_argument("--keep-data", help="generate into / reuse this folder")
    parser.add_argument("--baseline", help="another Quarry checkout, served beside this one")
    args = parser.parse_args()
    wanted = set(args.sources.split(","))

    work = tempfile.mkdtemp(prefix="quarry-tpch-")
    data = Path(args.keep_data) if args.keep_data else Path(work) / "data"
    try:
        if not (data / "lineitem.csv").exists():
            started = time.monotonic()
            generate(args.scale, data)
            print(f"tpchgen-cli SF {args.scale:g}: {time.monotonic() - started:.1f} s")
        with pg_database(NAME) as pg_url:
            sources: dict[str, str] = {}
            started = time.monotonic()
            if "pg" in wanted:
                load_postgresql(pg_url, data)
                sources["tpch_pg"] = pg_url.replace("postgresql://", "postgresql+psycopg://")
            if "mariadb" in wanted:
                load_mariadb(data)
                sources["tpch_my"] = (f"mysql+pymysql://{MARIADB['user']}@{MARIADB['host']}:"
                                      f"{MARIADB['port']}/{NAME}")
            sqlite_path = Path(work) / "tpch.sqlite"
            if "sqlite" in wanted:
                load_sqlite(sqlite_path, data)
                sources["tpch_lite"] = f"sqlite:///{sqlite_path}"
            print(f"loaded {', '.join(sources)} in {time.monotonic() - started:.0f} s")
            env = quarry_env(QUARRY_INSTANCE_PATH=work, QUARRY_WORKERS="2",
                             QUARRY_THREADS="4", QUARRY_DATA_SOURCES=json.dumps(sources))
            migrate(env)
            with ExitStack() as stack:
                servers = {"quarry": stack.enter_context(serving(env, work))}
                if args.baseline:
                    root = Path(args.baseline).resolve()
                    base_dir = Path(work) / "base"
                    base_dir.mkdir()
                    # Its own store, and its own code first on the path.
                    base_env = {**env, "QUARRY_INSTANCE_PATH": str(base_dir),
                                "PYTHONPATH": str(root)}
                    migrate(base_env, root)
                    servers["quarry-base"] = stack.enter_context(
                        serving(base_env, base_dir, root=root, name="base"))

                def quarries(source: str) -> dict:
                    return {name: Quarry(server.port, source) for name, server in servers.items()}

                if "pg" in wanted:
                    report(f"PostgreSQL, SF {args.scale:g}", measure({
                        **quarries("tpch_pg"),
                        "psycopg": RawPostgreSQL(pg_url),
                        "psycopg-named": RawPostgreSQL(pg_url, named=True),
                    }, args.rounds), "psycopg")
                if "mariadb" in wanted:
                    report(f"MariaDB, SF {args.scale:g}", measure({
                        **quarries("tpch_my"),
                        "pymysql": RawMariaDB(),
                        "pymysql-SS": RawMariaDBUnbuffered(),
                    }, args.rounds), "pymysql")
                if "sqlite" in wanted:
                    report(f"SQLite, SF {args.scale:g}", measure({
                        **quarries("tpch_lite"),
                        "sqlite3": RawSQLite(sqlite_path),
                    }, args.rounds), "sqlite3")
    finally:
        if "mariadb" in wanted:
            drop_mariadb()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
