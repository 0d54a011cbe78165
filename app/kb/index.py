"""The indexes of knowledge bases: one SQLite file per deployment, shared by every worker.

Each knowledge base has three tables in it, named by the base's ``uid``, that share rowids:
``kb_<uid>_chunks`` (the chunks' text, document id, position and metadata), ``kb_<uid>_vec``
(a sqlite-vec ``vec0`` table of their embeddings, cosine distance; made at the first insert,
when the dimension is known) and ``kb_<uid>_fts`` (an FTS5 table of their words, ranked by
BM25). The file is in WAL mode, so many processes read and write it, as they share uploaded
files. apsw opens it: it carries its own SQLite with FTS5 and lets the sqlite-vec extension
load (the interpreter's sqlite3 module may be built without extension loading).

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
from pathlib import Path
from typing import Any

from flask import current_app

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


class KbIndex:
    """The index file at ``path``, through this thread's connection to it."""

    def __init__(self, path: Path) -> None:
        self.path = path

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

    def drop(self, uid: str) -> None:
        chunks, vec, fts = self._names(uid)
        with self._connect() as conn, conn:
            for table in (vec, fts, chunks):
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    def upsert(self, uid: str, chunks: Sequence[Chunk], vectors: Any) -> None:
        """Replace the chunks of every document among ``chunks`` by these, in one
        transaction; ``vectors``: a float32 array, one row per chunk."""
        table, vec, fts = self._names(uid)
        with self._connect() as conn, conn:
            self._ensure(conn, uid)  # a base whose tables went missing gets them back
            if len(chunks):
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vec} USING vec0("
                             f"embedding float[{int(vectors.shape[1])}] "
                             "distance_metric=cosine)")
            self._delete(conn, uid, sorted({c.doc_id for c in chunks}))
            for chunk, vector in zip(chunks, vectors, strict=True):
                conn.execute(f"INSERT INTO {table} (doc_id, number, total, start, end_at, "
                             "content, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (chunk.doc_id, chunk.number, chunk.total, chunk.start, chunk.end,
                              chunk.content, json.dumps(chunk.metadata, default=str)))
                rowid = conn.last_insert_rowid()
                conn.execute(f"INSERT INTO {vec} (rowid, embedding) VALUES (?, ?)",
                             (rowid, vector.tobytes()))
                conn.execute(f"INSERT INTO {fts} (rowid, content) VALUES (?, ?)",
                             (rowid, chunk.content))

    def delete(self, uid: str, doc_ids: Sequence[str]) -> int:
        """Remove the chunks of these documents; how many documents had any."""
        with self._connect() as conn, conn:
            if not self._exists(conn, self._names(uid)[0]):
                return 0
            return self._delete(conn, uid, doc_ids)

    def _delete(self, conn: Any, uid: str, doc_ids: Sequence[str]) -> int:
        table, vec, fts = self._names(uid)
        has_vec = self._exists(conn, vec)
        found = 0
        for doc_id in doc_ids:
            rowids = [r[0] for r in conn.execute(f"SELECT rowid FROM {table} WHERE doc_id = ?",
                                                 (doc_id,))]
            found += bool(rowids)
            for rowid in rowids:
                if has_vec:
                    conn.execute(f"DELETE FROM {vec} WHERE rowid = ?", (rowid,))
                conn.execute(f"DELETE FROM {fts} WHERE rowid = ?", (rowid,))
            conn.execute(f"DELETE FROM {table} WHERE doc_id = ?", (doc_id,))
        return found

    @staticmethod
    def _exists(conn: Any, table: str) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                            (table,)).fetchone() is not None

    def counts(self, uid: str) -> tuple[int, int]:
        """(documents, chunks) in the knowledge base."""
        table, _, _ = self._names(uid)
        with self._connect() as conn:
            if not self._exists(conn, table):
                return 0, 0
            return tuple(conn.execute(f"SELECT count(DISTINCT doc_id), count(*) "
                                      f"FROM {table}").fetchone())

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
        table, vec, fts = self._names(uid)
        where, params = _where(filters, "c")
        depth = limit if alpha is None else max(4 * limit, 40)
        with self._connect() as conn:
            if not self._exists(conn, vec):
                return []
            by_vector = self._nearest(conn, uid, vector, where, params, depth, bool(filters))
            if alpha is None:
                ranked = list(by_vector)
            else:
                by_words = self._words(conn, uid, text, where, params, depth)
                ranked = _fused(list(by_vector), by_words, alpha)[:limit]
            distances = dict(by_vector)
            missing = [r for r in ranked if r not in distances]
            for rowid in missing:
                distances[rowid] = conn.execute(
                    f"SELECT vec_distance_cosine(embedding, ?) FROM {vec} WHERE rowid = ?",
                    (vector.tobytes(), rowid)).fetchone()[0]
            rows = {row[0]: row for row in conn.execute(
                f"SELECT {_COLUMNS} FROM {table} c WHERE c.rowid IN "
                f"({','.join('?' * len(ranked))})", ranked)} if ranked else {}
        return [Hit(_chunk(rows[r]), distances[r]) for r in ranked if r in rows]

    def _nearest(self, conn: Any, uid: str, vector: Any, where: str, params: list[Any],
                 depth: int, filtered: bool) -> dict[int, float]:
        table, vec, _ = self._names(uid)
        if not filtered:  # the vec0 index's own k-nearest search
            rows = conn.execute(f"SELECT rowid, distance FROM {vec} WHERE embedding MATCH ? "
                                "AND k = ? ORDER BY distance", (vector.tobytes(), depth))
        else:  # exact, over the chunks the filters keep
            rows = conn.execute(
                f"SELECT c.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM {table} c "
                f"JOIN {vec} v ON v.rowid = c.rowid WHERE {where} ORDER BY d LIMIT ?",
                (vector.tobytes(), *params, depth))
        return {rowid: float(distance) for rowid, distance in rows}

    def _words(self, conn: Any, uid: str, text: str, where: str, params: list[Any],
               depth: int) -> list[int]:
        table, _, fts = self._names(uid)
        words = _WORD.findall(text)
        if not words:
            return []
        # Each word quoted: the text is searched for, never read as FTS5 query syntax.
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))
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


def current_index() -> KbIndex:
    """The index file of this app: ``knowledge_bases.db`` in KB_DIR."""
    folder = current_app.config.get("KB_DIR") or os.path.join(current_app.instance_path, "kb")
    return KbIndex(Path(folder) / "knowledge_bases.db")


_COLUMNS = "c.rowid, c.doc_id, c.number, c.total, c.start, c.end_at, c.content, c.metadata"


def _chunk(row: Sequence[Any]) -> Chunk:
    return Chunk(row[1], row[2], row[3], row[4], row[5], row[6], json.loads(row[7]))


def _fused(by_vector: list[int], by_words: list[int], alpha: float) -> list[int]:
    scores: dict[int, float] = {}
    for weight, ranking in ((alpha, by_vector), (1 - alpha, by_words)):
        for rank, rowid in enumerate(ranking, 1):
            scores[rowid] = scores.get(rowid, 0.0) + weight / (_RRF_K + rank)
    return sorted(scores, key=lambda r: -scores[r])


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
