"""Quarry against a running MindsDB (issues 21, 22 and 31): the same 2-source join and the
same GROUP BY over an uploaded file, sent to both in one run, alternately; with ``--kb``,
the same knowledge-base insert and search instead.

    python bench/mindsdb_peer.py --mindsdb http://127.0.0.1:47335 [--mindsdb-pid PID] \
        [--orders 1000000] [--customers 10000] [--file-rows 1000000] [--repeat 5]
    python bench/mindsdb_peer.py --mindsdb http://127.0.0.1:47335 --kb [--documents 200] \
        [--searches 30]

``--kb``: both servers embed through the same OpenAI-compatible ``/v1/embeddings`` endpoint,
served by this bench (Quarry's embedded all-MiniLM-L6-v2 behind a small HTTP server, floats
or base64 as the client asks), so that the model costs the same on both sides and the
ratio is what each server adds. Both get ``CREATE KNOWLEDGE_BASE`` with that
``embedding_model`` and the same chunking (1 000 characters, overlap 200), then the same
``INSERT … VALUES`` statements of 50 documents (numpy's docstrings, as bench/kb.py: the
body of each, up to 1 000 characters), timed whole; then ``--searches`` questions (each
function's summary line), ``SELECT id FROM kb WHERE content = '…' LIMIT 10``, alternating,
whose median times and MRR@10 (the right document's rank) are compared.

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
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

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


class EmbeddingServer:
    """``POST /v1/embeddings`` (OpenAI's API) answered with Quarry's embedded model, in a
    thread of this process; ``url`` is its base URL."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from app.kb.embeddings import local_model

        model = local_model()
        self.calls = 0
        bench = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                import base64


                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = model.embed([str(t) for t in texts])
                bench.calls += 1
                as_base64 = body.get("encoding_format") == "base64"
                data = [{"object": "embedding", "index": i, "embedding":
                         base64.b64encode(v.astype("<f4").tobytes()).decode() if as_base64
                         else [float(x) for x in v]} for i, v in enumerate(vectors)]
                answer = json.dumps({"object": "list", "model": body.get("model"),
                                     "data": data, "usage": {"prompt_tokens": 0,
                                                             "total_tokens": 0}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def kb_compare(peers: list[Peer], embeddings: str, documents: int, searches: int) -> None:
    from kb import _quote, corpus

    pairs = corpus(documents)
    model = json.dumps({"provider": "openai", "model_name": "all-minilm-l6-v2",
                        "base_url": embeddings, "api_key": "bench"})
    create = ("CREATE KNOWLEDGE_BASE mindsdb.kb_peer USING embedding_model = " + model +
              ", content_columns = ['content'], id_column = 'id', preprocessing = "
              "{\"text_chunking_config\": {\"chunk_size\": 1000, \"chunk_overlap\": 200}}")
    inserts = ["INSERT INTO mindsdb.kb_peer (id, content) VALUES " + ", ".join(
        f"({i}, {_quote(doc)})" for i, (_, doc) in enumerate(pairs[start:start + 50], start))
        for start in range(0, len(pairs), 50)]
    print(f"\n{len(pairs)} documents ({sum(len(d) for _, d in pairs) / len(pairs):.0f} "
          f"characters on average), embeddings from {embeddings}, load average "
          f"{os.getloadavg()[0]:.1f}")
    inserted: dict[str, float] = {}
    for peer in peers:
        peer.sql("DROP KNOWLEDGE_BASE IF EXISTS mindsdb.kb_peer")
        body = peer.sql(create)
        if body.get("type") == "error":
            print(f"    {peer.name} refused the CREATE: {_error(body)}")
            continue
        started = time.perf_counter()
        failed = next((b for b in (peer.sql(q) for q in inserts) if b.get("type") == "error"),
                      None)
        if failed is not None:
            print(f"    {peer.name} insert failed: {_error(failed)}")
            continue
        inserted[peer.name] = time.perf_counter() - started
        print(f"    {peer.name} insert {inserted[peer.name]:.2f} s "
              f"({len(pairs) / inserted[peer.name]:.1f} documents/s)", flush=True)
    if len(inserted) == 2:
        print(f"    insert MindsDB / Quarry: {inserted['mindsdb'] / inserted['quarry']:.2f}")
    times: dict[str, list[float]] = {p.name: [] for p in peers}
    ranks: dict[str, list[float]] = {p.name: [] for p in peers}
    for turn, (summary, _) in enumerate(pairs[:searches]):
        query = (f"SELECT id FROM mindsdb.kb_peer WHERE content = {_quote(summary)} "
                 "LIMIT 10")
        for peer in peers if turn % 2 == 0 else reversed(peers):
            if peer.name not in inserted:
                continue
            seconds, body = peer.timed(query)
            if body.get("type") != "table":
                print(f"    {peer.name} search failed: {_error(body)}")
                inserted.pop(peer.name)
                continue
            times[peer.name].append(seconds)
            ids = [str(row[0]) for row in body["data"]]
            ranks[peer.name].append(1 / (ids.index(str(turn)) + 1) if str(turn) in ids
                                    else 0.0)
    for peer in peers:
        if times[peer.name]:
            print(f"    {peer.name} search p50 {statistics.median(times[peer.name]) * 1000:.1f}"
                  f" ms, MRR@10 {statistics.fmean(ranks[peer.name]):.3f} "
                  f"({len(times[peer.name])} searches)")
    if all(times.values()):
        ratio = statistics.median(times["mindsdb"]) / statistics.median(times["quarry"])
        print(f"    search MindsDB / Quarry: {ratio:.2f}")
    for peer in peers:
        peer.sql("DROP KNOWLEDGE_BASE IF EXISTS mindsdb.kb_peer")


def kb_main(args: argparse.Namespace, mindsdb: Peer) -> None:
    from cryptography.fernet import Fernet

    embeddings = EmbeddingServer()
    try:
        with tempfile.TemporaryDirectory(prefix="quarry-bench-peer-kb-") as tmp:
            work = Path(tmp)
            env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                             QUARRY_INSTANCE_PATH=str(work), QUARRY_WORKERS="1",
                             QUARRY_DEMO_SOURCE="false",
                             QUARRY_EMBEDDING_ENDPOINTS=embeddings.url,
                             QUARRY_ENCRYPTION_KEY=Fernet.generate_key().decode())
            migrate(env)
            with serving(env, work) as server:
                kb_compare([Peer("quarry", server.url), mindsdb], embeddings.url,
                           args.documents, args.searches)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}; "
              f"{embeddings.calls} embedding requests")
    finally:
        embeddings.close()


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
    parser.add_argument("--kb", action="store_true",
                        help="compare knowledge bases (insert, search) instead")
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument("--searches", type=int, default=30)
    args = parser.parse_args()
    mindsdb = Peer("mindsdb", args.mindsdb)
    status = mindsdb.session.get(f"{mindsdb.url}/api/status", timeout=30).json()
    print(f"MindsDB at {mindsdb.url}: version {status.get('mindsdb_version')}")
    if args.kb:
        kb_main(args, mindsdb)
        return
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
