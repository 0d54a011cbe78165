"""The indexes of knowledge bases: one SQLite file per deployment, shared by every worker.

Each knowledge base has three tables in it, named by the base's ``uid``, that share rowids:
``kb_<uid>_chunks`` (the chunks' text, document id, position and metadata), ``kb_<uid>_vec``
(a sqlite-vec ``vec0`` table of their embeddings, cosine distance; made at the first insert,
when the dimension is known), ``kb_<uid>_fts`` (an FTS5 table of their words, ranked by
BM25) and ``kb_<uid>_log`` (each chunk written or removed, in order). The file is in WAL
mode, so many processes read and write it, as they share uploaded files. apsw opens it: it
carries its own SQLite with FTS5 and lets the sqlite-vec extension load (the interpreter's
sqlite3 module may be built without extension loading).

A search by meaning without filters reads no vector from the file: each process keeps a
copy of a knowledge base's vectors in faiss indexes (``_Vectors``), brought up to date
from the log before each search (only what changed since is read): exact up to a size,
beyond it one bit per dimension picks candidates that are ranked exactly. A filtered search
stays in SQLite (vec0's exact distance over the chunks the filters keep).

Search is by meaning (the vectors), by words (BM25) or both, fused by rank: a chunk's score
is ``alpha / (60 + vector rank) + (1 - alpha) / (60 + word rank)`` (reciprocal-rank fusion,
weighted by MindsDB's ``hybrid_search_alpha``).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from flask import current_app

from ..lru import LruCache

# Reciprocal-rank fusion's constant (Cormack et al. 2009).
_RRF_K = 60
_BUSY_MS = 30_000
# Address space, not memory: pages are read from the OS cache, shared by processes.
_MMAP_BYTES = 1 << 30
# Operators a filter may use on the id or a metadata value (an allow-list).
OPERATORS = {"=": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
             "like": "LIKE", "not like": "NOT LIKE", "in": "IN", "not in": "NOT IN"}
_WORD = re.compile(r"\w+", re.UNICODE)
_UID = re.compile(r"[0-9a-f]{32}")
# Vectors read from the file and added to a copy at a time.
_BLOCK = 8192


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    number: int                 # 1-based
    total: int
    start: int
    end: int
    content: str
    metadata: dict[str, Any]

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}:{self.number}of{self.total}:{self.start}to{self.end}"


@dataclass(frozen=True)
class Filter:
    field: str                  # "id", or a metadata key
    op: str                     # a key of OPERATORS
    value: Any                  # a list for IN / NOT IN


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    distance: float | None


def split_text(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """(start, end) of the chunks of ``text``: at most ``size`` characters each, cut at a
    space where one is in the chunk's second half, each overlapping the last by about
    ``overlap`` characters."""
    if not text:
        return [(0, 0)]
    spans, start = [], 0
    while True:
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut + 1 if cut > start else end
        spans.append((start, end))
        if end >= len(text):
            return spans
        following = max(end - overlap, start + 1)
        space = text.find(" ", following, end)
        start = space + 1 if overlap and 0 <= space < end - 1 else following


class _Vectors:
    """One process's copy of a knowledge base's vectors, as of log entry ``seq``, in faiss
    indexes keyed by the chunks' rowids: every vector (``IndexFlatIP``: exact inner product,
    which is cosine on unit-length rows) and, once the base has more than ``exact`` chunks,
    one bit per dimension (``IndexLSH`` without rotation: whether the value is above that
    dimension's median, learned from the copy's vectors; a 32nd of the bytes, compared by
    Hamming distance).

    Up to ``exact`` chunks a search compares the question with every vector. Beyond, the
    bits pick ``candidates`` chunks and those are ranked exactly (binary quantisation with
    exact re-ranking), measured against exact search and other indexes in
    bench/kb_index.py and bench/kb.py (recall@10). The medians are learned again whenever
    the copy has doubled since they were: embeddings that are not centred on zero (a common
    direction in every vector) would otherwise share most of their bits."""

    def __init__(self, exact: int, candidates: int) -> None:
        self.lock = threading.Lock()
        self.seq = -1               # none read yet
        self.exact, self.candidates = exact, candidates
        self.dimension = 0
        self.flat: Any = None
        self.bits: Any = None       # made by the first search that needs it
        self.learned = 0            # vectors the bits' medians were learned from

    def load(self, rows: Any, seq: int) -> None:
        self.dimension = 0
        self._add(rows)
        self.seq = seq

    def update(self, gone: Sequence[int], added: Any, seq: int) -> None:
        import faiss
        import numpy as np

        _one_thread()
        if gone and self.dimension:
            removed = faiss.IDSelectorBatch(np.array(gone, np.int64))
            for index in (self.flat, self.bits):
                if index is not None:
                    index.remove_ids(removed)
        self._add(added)
        self.seq = seq

    def _add(self, rows: Any) -> None:
        """Add (rowid, float32 blob) rows, a block at a time (what is read from the file is
        held twice only for one block)."""
        import faiss
        import numpy as np

        _one_thread()
        rows = iter(rows)
        while block := list(islice(rows, _BLOCK)):
            vectors = np.frombuffer(b"".join(b for _, b in block), np.float32) \
                .reshape(len(block), -1)
            if vectors.shape[1] != self.dimension:  # the first vectors, or another model's
                self.dimension = vectors.shape[1]
                self.flat = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dimension))
                self.bits, self.learned = None, 0
            ids = np.fromiter((k for k, _ in block), np.int64, len(block))
            self.flat.add_with_ids(vectors, ids)
            if self.bits is not None:
                self.bits.add_with_ids(vectors, ids)

    def _learn_bits(self) -> None:
        """Make the bits index from every vector of the copy, the medians learned anew."""
        import faiss

        size = self.flat.ntotal
        vectors = self.flat.index.reconstruct_n(0, size)
        bits = faiss.IndexIDMap(faiss.IndexLSH(self.dimension, self.dimension, False, True))
        bits.train(vectors)
        bits.add_with_ids(vectors, faiss.vector_to_array(self.flat.id_map))
        self.bits, self.learned = bits, size

    def nearest(self, vector: Any, depth: int) -> dict[int, float]:
        """The ``depth`` rows nearest ``vector`` (unit length): rowid → cosine distance,
        nearest first."""
        import faiss
        import numpy as np

        _one_thread()
        with self.lock:
            size = self.flat.ntotal if self.dimension else 0
            if not size or self.dimension != len(vector):
                return {}
            depth = min(depth, size)
            query = vector[None, :]
            wanted = max(self.candidates, depth)
            if size <= max(self.exact, wanted):
                scores, keys = self.flat.search(query, depth)
                return {int(k): float(1.0 - s)
                        for s, k in zip(scores[0], keys[0], strict=True)}
            if self.bits is None or size > 2 * self.learned:
                self._learn_bits()
            # The bits and the vectors are stored in the same order (added together,
            # removed together, each index keeping its order): the bits' positions are
            # the vectors' rows, read in place (faiss's reconstruct_batch looks every key
            # up in its map and copies the rows one call at a time: 0.2 ms more CPU per
            # search at 100 000 chunks and load 10, bench/README.md "kbsearch").
            rows = self.bits.index.search(query, wanted)[1][0]
            rows = rows[rows >= 0]
            flat = faiss.downcast_index(self.flat.index)
            stored = faiss.rev_swig_ptr(flat.get_xb(), size * self.dimension)
            scores = stored.reshape(size, self.dimension)[rows] @ vector
            keys = faiss.rev_swig_ptr(self.flat.id_map.data(), size)[rows]
            best = np.argpartition(-scores, depth - 1)[:depth] if depth < len(rows) \
                else np.arange(len(rows))
            best = best[np.argsort(-scores[best], kind="stable")]
            return {int(keys[i]): float(1.0 - scores[i]) for i in best}


def _one_thread() -> None:
    """faiss answers each search on the request's own thread: its OpenMP team, waiting for
    cores on a loaded machine shared by the workers, made a search 100× slower
    (bench/kb_index.py: 140 ms instead of 1.5 ms at load 15 on 2 cores). OpenMP keeps the
    setting per thread, so each thread makes it before its first call into faiss."""
    if not getattr(_LOCAL, "faiss_one_thread", False):
        import faiss

        faiss.omp_set_num_threads(1)
        _LOCAL.faiss_one_thread = True


class KbIndex:
    """The index file at ``path``, through this thread's connection to it; ``copies``: the
    process's copies of vectors (an LruCache), None to search in SQLite only."""

    def __init__(self, path: Path, copies: Any = None,
                 exact: tuple[int, int] = (20_000, 1000)) -> None:
        self.path = path
        self.copies = copies
        self.exact = exact  # (chunks searched exactly, candidates re-ranked beyond)

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        # One connection per thread and file, kept: its page cache and memory map stay warm
        # (a k-nearest search at 100 000 chunks reads every vector). Made on first use, in
        # the worker, never before a fork.
        conns = _LOCAL.__dict__.setdefault("conns", {})
        conn = conns.get(self.path)
        if conn is None:
            conn = conns[self.path] = _open(self.path)
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # an interrupted statement: start afresh next time
                conns.pop(self.path, None)
                conn.close()
            raise

    @staticmethod
    def _names(uid: str) -> tuple[str, str, str]:
        if not _UID.fullmatch(uid):  # the names are built into SQL text: only hex
            raise ValueError(f"not a knowledge base uid: {uid!r}")
        return f"kb_{uid}_chunks", f"kb_{uid}_vec", f"kb_{uid}_fts"

    @classmethod
    def _log(cls, uid: str) -> str:
        cls._names(uid)
        return f"kb_{uid}_log"


    def create(self, uid: str) -> None:
        with self._connect() as conn, conn:
            self._ensure(conn, uid)

    def _ensure(self, conn: Any, uid: str) -> None:
        chunks, _, fts = self._names(uid)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {chunks} (rowid INTEGER PRIMARY KEY, "
                     "doc_id TEXT NOT NULL, number INTEGER NOT NULL, total INTEGER NOT "
                     "NULL, start INTEGER NOT NULL, end_at INTEGER NOT NULL, content TEXT "
                     "NOT NULL, metadata TEXT NOT NULL)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {chunks}_doc ON {chunks} (doc_id)")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(content, "
                     "content='', contentless_delete=1, "
                     "tokenize='porter unicode61 remove_diacritics 2')")
        # Every chunk written (added = 1) or removed (0), in order: what a process's copy of
        # the vectors (_Vectors) reads to catch up. Never reused: AUTOINCREMENT.
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self._log(uid)} (seq INTEGER PRIMARY KEY "
                     "AUTOINCREMENT, chunk INTEGER NOT NULL, added INTEGER NOT NULL)")

    def drop(self, uid: str) -> None:
        chunks, vec, fts = self._names(uid)
        with self._connect() as conn, conn:
            for table in (vec, fts, chunks, self._log(uid)):
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    def upsert(self, uid: str, chunks: Sequence[Chunk], vectors: Any) -> None:
        """Replace the chunks of every document among ``chunks`` by these, in one
        transaction; ``vectors``: a float32 array, one row per chunk."""
        table, vec, fts = self._names(uid)
        with self._connect() as conn, _immediate(conn):
            self._ensure(conn, uid)  # a base whose tables went missing gets them back
            if len(chunks):
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vec} USING vec0("
                             f"embedding float[{int(vectors.shape[1])}] "
                             "distance_metric=cosine)")
            self._delete(conn, uid, sorted({c.doc_id for c in chunks}))
            # The write lock is held (BEGIN IMMEDIATE): the rowids after the last are free.
            first = conn.execute(f"SELECT coalesce(max(rowid), 0) + 1 FROM {table}"
                                 ).fetchone()[0]
            rowids = range(first, first + len(chunks))
            conn.executemany(f"INSERT INTO {table} (rowid, doc_id, number, total, start, "
                             "end_at, content, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             [(r, c.doc_id, c.number, c.total, c.start, c.end, c.content,
                               json.dumps(c.metadata, default=str))
                              for r, c in zip(rowids, chunks, strict=True)])
            conn.executemany(f"INSERT INTO {vec} (rowid, embedding) VALUES (?, ?)",
                             [(r, v.tobytes()) for r, v in zip(rowids, vectors, strict=True)])
            conn.executemany(f"INSERT INTO {fts} (rowid, content) VALUES (?, ?)",
                             [(r, c.content) for r, c in zip(rowids, chunks, strict=True)])
            conn.executemany(f"INSERT INTO {self._log(uid)} (chunk, added) VALUES (?, 1)",
                             [(r,) for r in rowids])

    def delete(self, uid: str, doc_ids: Sequence[str]) -> int:
        """Remove the chunks of these documents; how many documents had any."""
        with self._connect() as conn, conn:
            if not self._exists(conn, self._names(uid)[0]):
                return 0
            self._ensure(conn, uid)  # a base made before the log was kept gets one
            return self._delete(conn, uid, doc_ids)

    def _delete(self, conn: Any, uid: str, doc_ids: Sequence[str]) -> int:
        table, vec, fts = self._names(uid)
        has_vec = self._exists(conn, vec)
        found = 0
        for doc_id in doc_ids:
            rowids = [(r[0],) for r in conn.execute(
                f"SELECT rowid FROM {table} WHERE doc_id = ?", (doc_id,))]
            if not rowids:
                continue
            found += 1
            if has_vec:
                conn.executemany(f"DELETE FROM {vec} WHERE rowid = ?", rowids)
            conn.executemany(f"DELETE FROM {fts} WHERE rowid = ?", rowids)
            conn.executemany(f"INSERT INTO {self._log(uid)} (chunk, added) VALUES (?, 0)",
                             rowids)
            conn.execute(f"DELETE FROM {table} WHERE doc_id = ?", (doc_id,))
        return found

    @staticmethod
    def _exists(conn: Any, table: str) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                            (table,)).fetchone() is not None

    def counts(self, uids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(documents, chunks) of each knowledge base, in one statement."""
        wanted = {uid: self._names(uid)[0] for uid in uids}
        if not wanted:
            return {}
        with self._connect() as conn:
            marks = ",".join("?" * len(wanted))
            present = {r[0] for r in conn.execute(
                f"SELECT name FROM sqlite_master WHERE name IN ({marks})",
                list(wanted.values()))}
            parts = [f"SELECT '{uid}', count(DISTINCT doc_id), count(*) FROM {table}"
                     for uid, table in wanted.items() if table in present]
            found = {r[0]: (r[1], r[2]) for r in conn.execute(" UNION ALL ".join(parts))} \
                if parts else {}
        return {uid: found.get(uid, (0, 0)) for uid in wanted}

    def listing(self, uid: str, filters: Sequence[Filter], limit: int | None) -> list[Hit]:
        table, _, _ = self._names(uid)
        where, params = _where(filters, "c")
        with self._connect() as conn:
            if not self._exists(conn, table):
                return []
            rows = conn.execute(f"SELECT {_COLUMNS} FROM {table} c WHERE {where} "
                                f"ORDER BY c.doc_id, c.number LIMIT ?",
                                (*params, -1 if limit is None else limit)).fetchall()
        return [Hit(_chunk(row), None) for row in rows]

    def search(self, uid: str, vector: Any, text: str, filters: Sequence[Filter], *,
               limit: int, alpha: float | None) -> list[Hit]:
        """The best ``limit`` chunks for ``vector`` (the query's embedding) and ``text``:
        by the vectors alone when ``alpha`` is None, else fused with the BM25 ranking."""
        table, vec, _ = self._names(uid)
        where, params = _where(filters, "c")
        depth = limit if alpha is None else max(4 * limit, 40)
        with self._connect() as conn:
            if not self._exists(conn, vec):
                return []
            copy = None if filters else self._vectors(conn, uid)
            if copy is not None:
                by_vector = copy.nearest(vector, depth)
            else:  # exact, in SQLite, over the chunks the filters keep
                by_vector = {rowid: float(distance) for rowid, distance in conn.execute(
                    f"SELECT c.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM {table} "
                    f"c JOIN {vec} v ON v.rowid = c.rowid WHERE {where} ORDER BY d LIMIT ?",
                    (vector.tobytes(), *params, depth))}
            if alpha is None:
                ranked = list(by_vector)
            else:
                by_words = self._words(conn, uid, text, where, params, depth)
                ranked = fused_ranking(list(by_vector), by_words, alpha)[:limit]
            distances = dict(by_vector)
            for rowid in (r for r in ranked if r not in distances):
                distances[rowid] = conn.execute(
                    f"SELECT vec_distance_cosine(embedding, ?) FROM {vec} WHERE rowid = ?",
                    (vector.tobytes(), rowid)).fetchone()[0]
            rows = {row[0]: row for row in conn.execute(
                f"SELECT {_COLUMNS} FROM {table} c WHERE c.rowid IN "
                f"({','.join('?' * len(ranked))})", ranked)} if ranked else {}
        return [Hit(_chunk(rows[r]), distances[r]) for r in ranked if r in rows]

    def _vectors(self, conn: Any, uid: str) -> _Vectors | None:
        """This process's copy of the vectors of ``uid``, brought up to date from the log;
        None when the base has no log yet (made before it was kept, not written since)."""
        log = self._log(uid)
        if self.copies is None or not self._exists(conn, log):
            return None
        copy = self.copies.get((str(self.path), uid))
        if copy is None:
            copy = _Vectors(*self.exact)
            self.copies.put((str(self.path), uid), copy)
        _, vec, _ = self._names(uid)
        with conn, copy.lock:  # one read transaction: the log and vectors of one moment
            last = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {log}").fetchone()[0]
            if last == copy.seq:
                return copy
            if last < copy.seq or copy.seq < 0:  # first use, or the tables were made anew
                copy.load(conn.execute(f"SELECT rowid, embedding FROM {vec}"), last)
                return copy
            # Every chunk written or removed since: out; those still there: in again.
            gone = [r[0] for r in conn.execute(
                f"SELECT DISTINCT chunk FROM {log} WHERE seq > ?", (copy.seq,))]
            added = conn.execute(
                f"SELECT DISTINCT v.rowid, v.embedding FROM {log} l JOIN {vec} v "
                f"ON v.rowid = l.chunk WHERE l.seq > ? AND l.added = 1", (copy.seq,))
            copy.update(gone, added, last)
        return copy

    def _words(self, conn: Any, uid: str, text: str, where: str, params: list[Any],
               depth: int) -> list[int]:
        table, _, fts = self._names(uid)
        words = words_of(text)
        if not words:
            return []
        # Each word quoted: the text is searched for, never read as FTS5 query syntax.
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = conn.execute(f"SELECT f.rowid FROM {fts} f JOIN {table} c ON c.rowid = f.rowid "
                            f"WHERE {fts} MATCH ? AND {where} ORDER BY bm25({fts}) LIMIT ?",
                            (match, *params, depth))
        return [r[0] for r in rows]


_LOCAL = threading.local()


def _open(path: Path) -> Any:
    import apsw  # on first use only: a worker without knowledge bases never loads it
    import sqlite_vec

    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(_BUSY_MS)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
    return conn


def kb_folder() -> str:
    """This app's folder of knowledge-base files: KB_DIR, or kb in the instance folder."""
    return current_app.config.get("KB_DIR") or os.path.join(current_app.instance_path, "kb")


def current_index() -> KbIndex:
    """The index file of this app: ``knowledge_bases.db`` in KB_DIR."""
    folder = kb_folder()
    copies = current_app.extensions.get(_COPIES)
    if copies is None:  # made in the worker at the first use, never before a fork
        copies = current_app.extensions.setdefault(
            _COPIES, LruCache(current_app.config["KB_VECTOR_CACHE"]))
    config = current_app.config
    return KbIndex(Path(folder) / "knowledge_bases.db", copies,
                   (config["KB_EXACT_CHUNKS"], config["KB_RERANK_CANDIDATES"]))


_COPIES = "quarry.kb_vectors"


@contextmanager
def _immediate(conn: Any) -> Iterator[None]:
    """A write transaction that takes SQLite's write lock at once (BEGIN IMMEDIATE)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


_COLUMNS = "c.rowid, c.doc_id, c.number, c.total, c.start, c.end_at, c.content, c.metadata"


def _chunk(row: Sequence[Any]) -> Chunk:
    return Chunk(row[1], row[2], row[3], row[4], row[5], row[6], json.loads(row[7]))


def fused_ranking(by_vector: list[int], by_words: list[int], alpha: float) -> list[int]:
    """Reciprocal-rank fusion of two rankings of rowids, weighted by ``alpha``."""
    scores: dict[int, float] = {}
    for weight, ranking in ((alpha, by_vector), (1 - alpha, by_words)):
        for rank, rowid in enumerate(ranking, 1):
            scores[rowid] = scores.get(rowid, 0.0) + weight / (_RRF_K + rank)
    return sorted(scores, key=lambda r: -scores[r])


def words_of(text: str) -> list[str]:
    """The words of a question, each once, in order (what a search by words looks for)."""
    return list(dict.fromkeys(_WORD.findall(text)))


def _where(filters: Sequence[Filter], alias: str) -> tuple[str, list[Any]]:
    clauses, params = [], []
    for item in filters:
        op = OPERATORS[item.op]
        if item.field == "id":
            left, path = f"{alias}.doc_id", []
        else:
            left, path = f"json_extract({alias}.metadata, ?)", \
                ['$."' + item.field.replace('"', '""') + '"']
        values = list(item.value) if op in ("IN", "NOT IN") else [item.value]
        if item.field == "id":
            values = [str(v) for v in values]
        if op in ("IN", "NOT IN") and not values:
            clauses.append("0" if op == "IN" else "1")
            continue
        marks = f"({','.join('?' * len(values))})" if op in ("IN", "NOT IN") else "?"
        clauses.append(f"{left} {op} {marks}")
        params.extend(path + values)
    return " AND ".join(clauses) or "1", params
