"""Quarry against a running MindsDB (issues 21 and 22): the same 2-source join and the same
GROUP BY over an uploaded file, sent to both in one run, alternately.

    python bench/mindsdb_peer.py --mindsdb http://127.0.0.1:47335 [--mindsdb-pid PID] \
        [--orders 1000000] [--customers 10000] [--file-rows 1000000] [--repeat 5]

MindsDB is not started here: run it yourself (bench/README.md says how) and give its URL.
The bench makes a PostgreSQL database ``quarry_bench_peer_<pid>`` with ``orders`` (``--orders``
rows: id, customer_id, amount numeric(12,2), order_date over four years, indexed) and a
copy of ``customers``, and a MariaDB database of the same name with ``customers``
(``--customers`` rows: id, name, segment, country). Both servers get the two as data sources
``peer_pg`` and ``peer_maria`` (Quarry through QUARRY_DATA_SOURCES, MindsDB through
``CREATE DATABASE … WITH ENGINE = 'postgres' / 'mysql'``), and both answer:

- joins of ``peer_pg.orders`` with ``peer_maria.customers`` (a 2 %-selective date filter on
  orders; the whole join), and the filtered one with both tables in PostgreSQL (one source:
  what the statement costs without federation);
- a 1 M-row CSV (the one bench/files.py makes) uploaded to both with ``PUT /api/files/peer``,
  then ``SELECT grp, count(*), avg(x) FROM files.peer GROUP BY grp``.

Each statement: one warm-up on each server, then ``--repeat`` runs alternating between
them; the table gives the medians, MindsDB / Quarry, and whether the answers agree ("exact":
same values and types; "within 1e-9": numbers within a relative 1e-9, a float sum's
rounding). An error on either side is printed instead of a time. With ``--mindsdb-pid`` the
PSS of both servers (main process and children) is sampled every 0.25 s: before and at its
peak during the joins and during each upload. Everything the bench made is dropped at the
end, on both servers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import children, migrate, pg_database, quarry_env, serving  # noqa: E402
from federation import _maria  # noqa: E402
from files import QUERY as FILE_QUERY  # noqa: E402
from files import make_csv  # noqa: E402
from idle import pss_kib  # noqa: E402

DB = f"quarry_bench_peer_{os.getpid()}"
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")

JOINS = {
    "join, date filter (2 %)":
        "SELECT c.segment, count(*) AS n, sum(o.amount) AS total "
        "FROM peer_pg.orders o JOIN peer_maria.customers c ON o.customer_id = c.id "
        "WHERE o.order_date >= '2023-12-01' GROUP BY c.segment ORDER BY c.segment",
    "join, whole (count)":
        "SELECT c.segment, count(*) AS n "
        "FROM peer_pg.orders o JOIN peer_maria.customers c ON o.customer_id = c.id "
        "GROUP BY c.segment ORDER BY c.segment",
    "join, whole (sum amount)":
        "SELECT c.segment, sum(o.amount) AS total "
        "FROM peer_pg.orders o JOIN peer_maria.customers c ON o.customer_id = c.id "
        "GROUP BY c.segment ORDER BY c.segment",
    "one source, date filter":
        "SELECT c.segment, count(*) AS n, sum(o.amount) AS total "
        "FROM peer_pg.orders o JOIN peer_pg.customers c ON o.customer_id = c.id "
        "WHERE o.order_date >= '2023-12-01' GROUP BY c.segment ORDER BY c.segment",
}


def pg_setup(orders: int, customers: int) -> tuple[str, ...]:
    return (
        "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, "
        "amount numeric(12,2), order_date date)",
        f"INSERT INTO orders SELECT g, 1 + (g * 7919) % {customers}, "
        "((g * 104729) % 100000) / 100.0, DATE '2020-01-01' + (g % 1461)::integer "
        f"FROM generate_series(1::bigint, {orders}) g",
        "CREATE INDEX ON orders (order_date)",
        "CREATE TABLE customers (id integer PRIMARY KEY, name varchar(40), "
        "segment varchar(10), country varchar(2))",
        "INSERT INTO customers SELECT g, 'customer ' || g, "
        f"(ARRAY{list(SEGMENTS)})[1 + g % 5], chr(65 + g % 26) || chr(65 + g % 7) "
        f"FROM generate_series(1, {customers}) g",
        "ANALYZE")


@contextlib.contextmanager
def maria_database(customers: int):
    """The MariaDB database DB with ``customers`` (the rows of the PostgreSQL copy)."""
    rows = [(g, f"customer {g}", SEGMENTS[g % 5], chr(65 + g % 26) + chr(65 + g % 7))
            for g in range(1, customers + 1)]
    with contextlib.closing(_maria()) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{DB}`")
        try:
            cur.execute(f"CREATE TABLE `{DB}`.customers (id integer PRIMARY KEY, "
                        "name varchar(40), segment varchar(10), country varchar(2))")
            cur.executemany(f"INSERT INTO `{DB}`.customers VALUES (%s, %s, %s, %s)", rows)
            cur.execute(f"ANALYZE TABLE `{DB}`.customers")
            yield f"mysql+pymysql://root@127.0.0.1:3306/{DB}"
        finally:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")


class Peer:
    """One server speaking the MindsDB REST interface."""

    def __init__(self, name: str, url: str):
        self.name, self.url = name, url.rstrip("/")
        self.session = requests.Session()

    def sql(self, query: str) -> dict:
        response = self.session.post(f"{self.url}/api/sql/query", json={"query": query},
                                     timeout=1800)
        try:
            return response.json()
        except ValueError:
            return {"type": "error", "error_message": f"HTTP {response.status_code}: "
                                                     f"{response.text[:200]}"}

    def timed(self, query: str) -> tuple[float, dict]:
        started = time.perf_counter()
        body = self.sql(query)
        return time.perf_counter() - started, body

    def upload(self, name: str, path: Path) -> tuple[float, str]:
        started = time.perf_counter()
        with open(path, "rb") as handle:
            response = self.session.put(
                f"{self.url}/api/files/{name}", files={"file": (path.name, handle)},
                data={"source_type": "file", "original_file_name": path.name}, timeout=3600)
        seconds = time.perf_counter() - started
        return seconds, "" if response.ok else f"HTTP {response.status_code}: {response.text}"


class Footprint:
    """The PSS of a server (a process and its children: shared pages divided among their
    sharers), sampled every 0.25 s in a thread: its value at ``mark()`` and its peak since."""

    def __init__(self, pid: int):
        self.pid, self.rest, self.peak = pid, 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def now(self) -> int:
        total = 0
        for pid in (self.pid, *children(self.pid)):
            with contextlib.suppress(OSError, AttributeError):
                total += pss_kib(pid)["Pss"] * 1024
        return total

    def mark(self) -> None:
        self.rest = self.peak = self.now()

    def _sample(self) -> None:
        while not self.done.wait(0.25):
            self.peak = max(self.peak, self.now())

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def connect_mindsdb(mindsdb: Peer, pg_url: str, maria_url: str) -> None:
    """The two data sources in MindsDB, under the names Quarry has them. MindsDB's MySQL
    handler wants a password unless it is given a URL, so MariaDB goes by URL."""
    server = pg_url.split("://", 1)[1].split("/", 1)[0]
    user, host = server.split("@") if "@" in server else ("postgres", server)
    host, port = host.split(":") if ":" in host else (host, "5432")
    sources = {
        "peer_pg": ("postgres", {"host": host, "port": int(port), "user": user,
                                 "password": "", "database": DB}),
        "peer_maria": ("mysql", {"url": "mysql://" + maria_url.split("://", 1)[1]}),
    }
    for name, (engine, parameters) in sources.items():
        mindsdb.sql(f"DROP DATABASE IF EXISTS {name}")
        body = mindsdb.sql(f"CREATE DATABASE {name} WITH ENGINE = '{engine}', "
                           f"PARAMETERS = {json.dumps(parameters)}")
        if body.get("type") == "error":
            raise SystemExit(f"MindsDB refused CREATE DATABASE {name}: "
                             f"{body.get('error_message')}")


def disconnect_mindsdb(mindsdb: Peer) -> None:
    for name in ("peer_pg", "peer_maria"):
        mindsdb.sql(f"DROP DATABASE IF EXISTS {name}")
    mindsdb.session.delete(f"{mindsdb.url}/api/files/peer", timeout=60)


def _number(value):
    """A number sent as a string (an exact decimal) as a float; other values as they are."""
    if isinstance(value, str):
        with contextlib.suppress(InvalidOperation):
            return float(Decimal(value))
    return value


def agree(a: dict, b: dict, exact: bool) -> bool:
    """The same rows, in any order (the file's GROUP BY has no ORDER BY); numbers equal
    (``exact``: of the same type too) or within a relative 1e-9 (a float sum's rounding)."""
    def rows(body):
        return sorted(([_number(v) for v in row] for row in body["data"]),
                      key=lambda row: repr([v for v in row if not isinstance(v, float)]))

    def same(x, y) -> bool:
        if exact or not (isinstance(x, float) and isinstance(y, float)):
            return type(x) is type(y) and x == y
        return math.isclose(x, y, rel_tol=1e-9)

    left, right = rows(a), rows(b)
    if len(left) != len(right) or any(len(p) != len(q) for p, q in zip(left, right,
                                                                        strict=True)):
        return False
    return all(same(x, y) for p, q in zip(left, right, strict=True)
               for x, y in zip(p, q, strict=True))


def _error(body: dict) -> str:
    return str(body.get("error_message") or body)[:160]


def compare(peers: list[Peer], label: str, query: str, repeat: int) -> None:
    quarry, mindsdb = peers
    for peer in peers:
        peer.sql(query)  # warm: pools, caches, DuckDB
    times: dict[str, list[float]] = {p.name: [] for p in peers}
    answers: dict[str, dict] = {}
    for turn in range(repeat):
        for peer in peers if turn % 2 == 0 else reversed(peers):
            seconds, body = peer.timed(query)
            answers[peer.name] = body
            if body.get("type") == "table":
                times[peer.name].append(seconds)
    line = f"{label:<26}"
    for peer in peers:
        line += (f"{statistics.median(times[peer.name]):>10.3f}" if times[peer.name]
                 else f"{'error':>10}")
    q, m = answers[quarry.name], answers[mindsdb.name]
    if times[quarry.name] and times[mindsdb.name]:
        ratio = statistics.median(times[mindsdb.name]) / statistics.median(times[quarry.name])
        same = ("exact" if agree(q, m, True) else "within 1e-9" if agree(q, m, False)
                else "DIFFERENT")
        line += f"{ratio:>10.2f}  {same}"
    print(line, flush=True)
    for peer in peers:
        body = answers[peer.name]
        if body.get("type") != "table":
            print(f"    {peer.name} error: {_error(body)}")
        elif body["data"]:
            print(f"    {peer.name} first row: {body['data'][0]}")


def report_memory(phase: str, footprints: dict[str, Footprint]) -> None:
    """Each server's PSS before the phase and at its peak during it."""
    print(f"    PSS during {phase}: " + "; ".join(
        f"{name} {f.rest / 2**20:.0f} MiB before, peak {f.peak / 2**20:.0f} MiB"
        for name, f in footprints.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mindsdb", required=True, metavar="URL",
                        help="a running MindsDB's HTTP API, e.g. http://127.0.0.1:47335")
    parser.add_argument("--mindsdb-pid", type=int, metavar="PID",
                        help="its main process: to sample its memory beside Quarry's")
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--file-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    mindsdb = Peer("mindsdb", args.mindsdb)
    status = mindsdb.session.get(f"{mindsdb.url}/api/status", timeout=30).json()
    print(f"MindsDB at {mindsdb.url}: version {status.get('mindsdb_version')}")
    with tempfile.TemporaryDirectory(prefix="quarry-bench-peer-") as tmp, \
            pg_database(DB, *pg_setup(args.orders, args.customers)) as pg_url, \
            maria_database(args.customers) as maria_url:
        work = Path(tmp)
        sources = {"peer_pg": pg_url.replace("postgresql://", "postgresql+psycopg://", 1),
                   "peer_maria": maria_url}
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                         QUARRY_INSTANCE_PATH=str(work), QUARRY_WORKERS="1",
                         QUARRY_DEMO_SOURCE="false", QUARRY_DATA_SOURCES=json.dumps(sources),
                         QUARRY_SQL_TIMEOUT_S="600")
        migrate(env)
        csv = work / "peer.csv"
        make_csv(csv, args.file_rows)
        with serving(env, work) as server:
            quarry = Peer("quarry", server.url)
            peers = [quarry, mindsdb]
            footprints = {"quarry": Footprint(server.pid)}
            if args.mindsdb_pid:
                footprints["mindsdb"] = Footprint(args.mindsdb_pid)
            connect_mindsdb(mindsdb, pg_url, maria_url)
            try:
                print(f"\n{args.orders:,} orders (PostgreSQL) x {args.customers:,} customers "
                      f"(MariaDB), median of {args.repeat}, load average "
                      f"{os.getloadavg()[0]:.1f}")
                print(f"{'statement':<26}{'quarry s':>10}{'mindsdb s':>10}{'M / Q':>10}  "
                      "same answer")
                for footprint in footprints.values():
                    footprint.mark()
                for label, query in JOINS.items():
                    compare(peers, label, query, args.repeat)
                report_memory("the joins", footprints)
                print(f"\nfile of {args.file_rows:,} rows ({csv.stat().st_size / 2**20:.0f} "
                      f"MiB CSV), PUT /api/files/peer once on each, load average "
                      f"{os.getloadavg()[0]:.1f}:")
                for peer in peers:
                    if peer.name in footprints:
                        footprints[peer.name].mark()
                    seconds, error = peer.upload("peer", csv)
                    print(f"    {peer.name} upload {seconds:.2f} s {error}", flush=True)
                report_memory("its upload", footprints)
                compare(peers, "files GROUP BY", FILE_QUERY.format(t="files.peer"),
                        args.repeat)
                print(f"load average at the end: {os.getloadavg()[0]:.1f}")
            finally:
                for footprint in footprints.values():
                    footprint.stop()
                disconnect_mindsdb(mindsdb)


if __name__ == "__main__":
    main()
