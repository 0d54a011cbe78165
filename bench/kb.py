"""Knowledge bases (issue 31): retrieval quality, the vector index at 100 000 chunks, the
insert rate of the embedded model — side by side in one run.

    .venv/bin/python bench/kb.py [--chunks 100000] [--corpus 200] [--samples 30]

- **quality**: a public corpus that ships in a package: the docstrings of numpy's public
  functions. The query is a function's summary line, the document the rest of its docstring
  (first 1 000 characters); MRR@10 of search by meaning (the embedded model), by words
  (BM25, hybrid_search_alpha = 0) and hybrid (alpha 0.5), all through POST /api/sql/query;
- **index**: ``--chunks`` vectors of 384 dimensions (clustered, unit length) written into
  one knowledge base's index; recall@10 of its search vs exact search (numpy) on the same
  vectors, and the p50 of a search through POST /api/sql/query vs ``SELECT 1`` there, in
  wall time and in the process's CPU time (which the machine's other work sways less);
- **insert rate**: chunks of ~1 000 characters embedded and written per second;
- **memory of a large insert**: ``--stream-rows`` rows of a SQLite data source inserted by
  ``INSERT … SELECT`` (embedded by a toy OpenAI-compatible endpoint in this process, so
  that the model's own memory is not what is measured): the growth of this process's
  resident anonymous memory during the insert (the index file's pages are mapped, shared
  and the kernel's to drop), beside reading the same rows whole (as the insert did
  before it streamed), at two sizes.

Everything runs in this process through the Flask test client, on a migrated SQLite store
in a temporary folder.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import migrate, quarry_env  # noqa: E402


def _sql(client, query: str) -> dict:
    body = client.post("/api/sql/query", json={"query": query}).get_json()
    if body["type"] == "error":
        raise SystemExit(f"{query[:80]}: {body['error_message']}")
    return body


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def corpus(size: int) -> list[tuple[str, str]]:
    """(summary line, rest of the docstring) of numpy's public functions."""
    import numpy as np

    pairs = []
    for name in sorted(dir(np)):
        obj = getattr(np, name)
        doc = inspect.getdoc(obj) if callable(obj) and not name.startswith("_") else None
        if not doc:
            continue
        lines = doc.strip().splitlines()
        summary, rest = lines[0].strip(), "\n".join(lines[1:]).strip()
        if len(summary) > 15 and len(rest) > 100 and summary not in {p[0] for p in pairs}:
            pairs.append((summary, rest[:1000]))
    return pairs[:size]


def quality(client, size: int) -> dict[str, float]:
    pairs = corpus(size)
    _sql(client, "CREATE KNOWLEDGE_BASE mindsdb.docs USING preprocessing = "
                 "{'text_chunking_config': {'chunk_size': 2000, 'chunk_overlap': 0}}")
    for start in range(0, len(pairs), 50):
        values = ", ".join(f"({i}, {_quote(doc)})"
                           for i, (_, doc) in enumerate(pairs[start:start + 50], start))
        _sql(client, f"INSERT INTO mindsdb.docs (id, content) VALUES {values}")
    scores = {}
    for label, clause in (("semantic", ""), ("bm25", " AND hybrid_search_alpha = 0"),
                          ("hybrid", " AND hybrid_search_alpha = 0.5")):
        reciprocal = []
        for i, (summary, _) in enumerate(pairs):
            found = _sql(client, f"SELECT id FROM mindsdb.docs WHERE content = "
                                 f"{_quote(summary)}{clause} LIMIT 10")["data"]
            ids = [row[0] for row in found]
            reciprocal.append(1 / (ids.index(str(i)) + 1) if str(i) in ids else 0.0)
        scores[label] = statistics.fmean(reciprocal)
    return scores


def clustered_vectors(chunks: int):
    """``chunks`` unit vectors of 384 dimensions around 500 centres (seeded), and the
    random generator, for the questions."""
    import numpy as np

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(500, 384)).astype(np.float32)
    vectors = centers[rng.integers(0, 500, chunks)] + \
        0.6 * rng.normal(size=(chunks, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, rng


def index(client, app, chunks: int, samples: int) -> dict[str, float]:
    import numpy as np

    from app.kb.index import Chunk, current_index
    from app.store import KnowledgeBase

    _sql(client, "CREATE KNOWLEDGE_BASE mindsdb.big")
    with app.app_context():
        uid = app.extensions["sqlalchemy"].session.query(KnowledgeBase.uid).filter_by(
            name="big").scalar()
        store = current_index()
        vectors, rng = clustered_vectors(chunks)
        for start in range(0, chunks, 5000):
            block = [Chunk(str(i), 1, 1, 0, 5, f"chunk {i}", {})
                     for i in range(start, min(start + 5000, chunks))]
            store.upsert(uid, block, vectors[start:start + len(block)])
        # The first search of a worker reads its copy of the vectors from the file.
        started = time.perf_counter()
        store.search(uid, vectors[0], "", [], limit=10, alpha=None)
        first = time.perf_counter() - started
        # recall@10 of the index's own k-nearest search vs exact, on the same vectors
        queries = rng.integers(0, chunks, samples)
        recall = []
        for q in queries:
            vector = vectors[q] + 0.1 * rng.normal(size=384).astype(np.float32)
            vector = (vector / np.linalg.norm(vector)).astype(np.float32)
            got = {h.chunk.doc_id for h in store.search(uid, vector, "", [], limit=10,
                                                        alpha=None)}
            exact = {str(i) for i in np.argsort(-(vectors @ vector))[:10]}
            recall.append(len(got & exact) / 10)
    # Wall time, and the process's CPU time (its threads' too: the model's), which the
    # machine's other work changes less than the wall time.
    search, select1, search_cpu, select1_cpu = [], [], [], []
    _sql(client, "SELECT id FROM mindsdb.big WHERE content = 'warm up' LIMIT 10")
    statements = _store_statements(app, lambda: _sql(
        client, "SELECT id FROM mindsdb.big WHERE content = 'counted' LIMIT 10"))
    for n in range(samples):
        started, cpu = time.perf_counter(), time.process_time()
        _sql(client, f"SELECT id FROM mindsdb.big WHERE content = 'question {n}' LIMIT 10")
        search.append(time.perf_counter() - started)
        search_cpu.append(time.process_time() - cpu)
        started, cpu = time.perf_counter(), time.process_time()
        _sql(client, "SELECT 1")
        select1.append(time.perf_counter() - started)
        select1_cpu.append(time.process_time() - cpu)
    wall = statistics.median(search) / statistics.median(select1)
    cpu = statistics.median(search_cpu) / statistics.median(select1_cpu)
    return {"recall@10": statistics.fmean(recall), "first search s": first,
            "store statements a search": statements,
            "store statements a SELECT 1": _store_statements(app, lambda: _sql(
                client, "SELECT 1")),
            "search p50 ms": statistics.median(search) * 1000,
            "SELECT 1 p50 ms": statistics.median(select1) * 1000,
            "search / SELECT 1 (wall)": wall,
            "search CPU p50 ms": statistics.median(search_cpu) * 1000,
            "SELECT 1 CPU p50 ms": statistics.median(select1_cpu) * 1000,
            "search / SELECT 1 (CPU)": cpu}


@contextmanager
def kb_app():
    """(app, its test client, the folder) on a migrated SQLite store in a temporary
    folder, knowledge bases in it too."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/store.db"
        migrate(quarry_env(QUARRY_DATABASE_URL=url, QUARRY_INSTANCE_PATH=tmp))
        from app import create_app

        app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": tmp, "DEMO_SOURCE": False,
                          "KB_DIR": os.path.join(tmp, "kb")})
        yield app, app.test_client(), tmp


def _store_statements(app, work) -> int:
    """How many statements ``work`` sends to the store (SQLAlchemy's engine)."""
    from sqlalchemy import event

    with app.app_context():
        engine = app.extensions["sqlalchemy"].engine
    sent = []

    def count(*_args) -> None:
        sent.append(1)

    event.listen(engine, "before_cursor_execute", count)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(sent)


def insert_rate(client, rows: int) -> tuple[float, float]:
    """Chunks per second of wall time, and per second of this process's CPU time (the
    rate on an idle core: the machine is shared)."""
    words = ("the invoice arrives before the report when the printer and the network agree "
             "on a schedule that nobody wrote down").split()
    text = " ".join(words[(i * 7) % len(words)] for i in range(170))[:1000]
    _sql(client, "CREATE KNOWLEDGE_BASE mindsdb.rate")
    _sql(client, "INSERT INTO mindsdb.rate (id, content) VALUES (0, 'warm up')")
    values = ", ".join(f"({i}, {_quote(f'{i} {text}')})" for i in range(1, rows + 1))
    started, cpu = time.perf_counter(), time.process_time()
    _sql(client, f"INSERT INTO mindsdb.rate (id, content) VALUES {values}")
    return rows / (time.perf_counter() - started), rows / (time.process_time() - cpu)


class _Letters(BaseHTTPRequestHandler):
    """A toy /v1/embeddings: how often each letter occurs (26 dimensions)."""

    def do_POST(self):  # noqa: N802 - the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = json.dumps({"data": [
            {"index": i, "embedding": [text.count(chr(97 + c)) + 0.01 for c in range(26)]}
            for i, text in enumerate(body["input"])]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def _rss() -> int:
    """Resident anonymous memory (the index file's mapped pages, shared, left out)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status
                    if line.startswith("RssAnon:"))


def _peak_growth(work) -> float:
    """MiB of resident anonymous memory above the start, at its highest while ``work()`` runs."""
    import gc

    gc.collect()
    start, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], _rss())
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
    return (max(peak[0], _rss()) - start) / 2**20


def streamed_memory(client, app, tmp: str, sizes: list[int]) -> list[tuple[int, float, float]]:
    """(rows, MiB growth reading them whole, MiB growth of the streamed insert) per size."""
    from app.federation import run as federation
    from app.services import access

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Letters)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    app.config["EMBEDDING_ENDPOINTS"] = url
    app.config["KB_INSERT_MAX_ROWS"] = max(sizes)
    path = os.path.join(tmp, "notes.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO notes VALUES (?, ?)",
                         ((i, f"note {i}: " + "the quarterly report is late again " * 6)
                          for i in range(max(sizes))))
    _sql(client, f"CREATE DATABASE notes WITH ENGINE = 'sqlite', PARAMETERS = "
                 f"{{\"db_file\": \"{path}\"}}")
    figures = []
    try:
        for size in sizes:
            query = f"SELECT id, body AS content FROM notes.notes WHERE id < {size}"
            with app.test_request_context():
                whole = _peak_growth(lambda q=query, n=size: federation.read_rows(
                    q, access.queryable_sources(), None, max_rows=n + 1, timeout_s=600))
            _sql(client, f"CREATE KNOWLEDGE_BASE mindsdb.notes{size} USING embedding_model"
                         f" = {{'provider': 'openai', 'model_name': 'letters', "
                         f"'base_url': '{url}'}}")
            streamed = _peak_growth(lambda q=query, n=size: _sql(
                client, f"INSERT INTO mindsdb.notes{n} {q}"))
            figures.append((size, whole, streamed))
    finally:
        server.shutdown()
        server.server_close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--corpus", type=int, default=200, help="0: no quality run")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--insert-rows", type=int, default=64)
    parser.add_argument("--stream-rows", type=int, default=100_000,
                        help="rows of the large insert (and a quarter of them); 0: none")
    args = parser.parse_args()
    with kb_app() as (app, client, tmp):
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        wall, cpu = insert_rate(client, args.insert_rows)
        print(f"insert rate (embedded model, ~1 000-character chunks): {wall:.1f} chunks/s, "
              f"{cpu:.1f} chunks per CPU-second")
        if args.stream_rows:
            for rows, whole, streamed in streamed_memory(
                    client, app, tmp, [args.stream_rows // 4, args.stream_rows]):
                print(f"{rows} rows, ~230 characters each: anonymous memory +{whole:.1f} MiB "
                      f"reading them whole, +{streamed:.1f} MiB for the streamed INSERT … "
                      f"SELECT (load {os.getloadavg()[0]:.1f})")
        scores = quality(client, args.corpus) if args.corpus else {}
        print("MRR@10 on numpy's docstrings (summary line → docstring body), "
              f"{args.corpus} functions: " + ", ".join(f"{k} {v:.3f}"
                                                       for k, v in scores.items()))
        figures = index(client, app, args.chunks, args.samples)
        print(f"{args.chunks} chunks × 384: " + ", ".join(f"{k} {v:.3f}"
                                                          for k, v in figures.items()))
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
