"""Knowledge bases in a PostgreSQL with the pgvector extension: one table per knowledge base.

The table holds what the index file's three tables hold (app/kb/index.py), in one row per
chunk: the text, the document id, its position, the metadata (jsonb: filters become SQL on
it), the embedding (``vector(n)``, n fixed by the first insert, with an HNSW index of cosine
distance) and the words (a ``tsvector`` generated from the text, with a GIN index).

Search answers what the index file answers, with the same distances (cosine) and the same
fusion: the vector ranking comes from the HNSW index (``hnsw.ef_search``: KB_HNSW_EF_SEARCH,
or the depth asked for when it is more; with filters, when PostgreSQL's planner expects
at most twice KB_STORE_EXACT_CHUNKS rows to pass them and at most KB_STORE_EXACT_CHUNKS do,
those rows ranked exactly, without the index; when more, pgvector's iterative scan, in
relaxed order, goes on until four times the rows asked for pass them, and the nearest of
those are answered), the word ranking from ``ts_rank_cd`` over the rows whose
words match any of the question's (PostgreSQL's full-text ranking: cover density, not
BM25), fused by rank as in index.py.

Writers of one knowledge base take turns (a table lock that readers do not wait for): an
upsert deletes a document's chunks and writes the new ones in one transaction, so two
inserts of one id cannot leave both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import Conflict, Unprocessable, VectorStoreUnavailable
from .index import OPERATORS, Chunk, Filter, Hit, fused_ranking, words_of

# psycopg is imported by the methods, on first use: a deployment whose knowledge bases stay
# in the index file never loads it for them (a worker's memory, tests/test_idle_imports.py).

# A table name given by ``storage = <store>.<table>``: a plain identifier, kept lower-case.
TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_COLUMNS = "rowid, doc_id, number, total, start, end_at, content, metadata"
# HNSW's candidate list is at most this long (pgvector's limit on hnsw.ef_search).
_EF_MAX = 1000
# The HNSW graph's links per node, and its candidate list while it is built: pgvector's
# default m; twice its default ef_construction, which at 100 000 chunks took recall@10 from
# 0.93 to 1.00 at ef_search 200 for twice the build time (bench/kb_pgvector.py).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# The function, made in the store at a process's first filtered search, that answers the
# rows PostgreSQL's planner expects a query to give (its EXPLAIN: nothing is read), and the
# mark in the shared set of opened tables that says the store has it.
ESTIMATED_ROWS = "quarry_estimated_rows"
ESTIMATE_MARK = "(estimated rows)"
# After an upsert that wrote at least this share of the rows the table had at its last
# ANALYZE (autovacuum's own analyze_scale_factor), or into a table never analysed, the
# metadata's statistics are gathered at once: autovacuum would do it within its round
# (autovacuum_naptime, a minute), and until then the planner's estimate of a filter on
# them is a default (a hundredth of the table, whatever the filter).
ANALYZE_SHARE = 0.1


class PgVectorIndex:
    """The knowledge bases kept in one configured store, ``name``, through ``engine`` (a
    SQLAlchemy engine on psycopg: its pool). Each method takes the knowledge base's table
    name, as KbIndex takes a uid."""

    def __init__(self, name: str, engine: Any, ef_search: int = 200,
                 exact_chunks: int = 20_000, opened: set[str] | None = None) -> None:
        self.name = name
        self.engine = engine
        self.ef_search = ef_search  # HNSW's candidate list at least this long
        # A filtered search that at most this many rows pass ranks them all exactly,
        # without the index: an iterative HNSW scan misses some of the nearest rows of a
        # filter that keeps few (recall@10 0.89 for a hundredth of 100 000 chunks), and
        # the passing rows are found through indexes (bench/kb_pgvector.py).
        self.exact_chunks = exact_chunks
        # The tables this process has seen with their filter index (made at first use for
        # tables written before there was one); the caller's set, shared across requests.
        self.opened = opened if opened is not None else set()
        # How the index scan goes on when filters leave fewer rows than asked for
        # (pgvector's hnsw.iterative_scan): relaxed_order keeps every row it meets, where
        # strict_order drops those nearer than a row already answered, which cost a
        # filtered search a fifth of its recall (bench/kb_pgvector.py).
        self.iterative = "relaxed_order"
        # With filters, the scan gathers this many passing rows per row asked for, and the
        # nearest of them are answered: the graph's walk is only approximately nearest
        # first, most of all at the edge of its candidate list (bench/kb_pgvector.py).
        self.gathered = 4
        # The planner's estimate of the rows a filter passes may be this many times the
        # exact bound before they are collected (its statistics are a sample): beyond, the
        # index is walked at once, with nothing collected first.
        self.estimate_margin = 2

    @contextmanager
    def _transaction(self, read: bool = False) -> Iterator[Any]:
        """A psycopg connection in a transaction, committed when the block ends; with
        ``read``, in autocommit (a search is one statement, or two pipelined: no BEGIN and
        COMMIT round trips). A store that cannot be reached is a 503 naming it; a value it
        refuses, a 422."""
        import psycopg
        from sqlalchemy.exc import DBAPIError

        try:
            if read:
                with self.engine.connect() as conn:
                    conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                    yield conn.connection.driver_connection
            else:
                with self.engine.begin() as conn:
                    yield conn.connection.driver_connection
        except (psycopg.Error, DBAPIError) as exc:
            original = getattr(exc, "orig", None) or exc
            if isinstance(original, psycopg.DataError):
                raise Unprocessable(f"Vector store '{self.name}' refused a value: "
                                    f"{_first_line(original)}", title="Invalid value") from None
            state = getattr(original, "sqlstate", None) or ""
            # No SQLSTATE: the connection itself failed (refused, reset, timed out); 08:
            # a connection exception; 57: the server is shutting down or was restarted.
            if isinstance(original, psycopg.OperationalError) and \
                    (not state or state[:2] in ("08", "57")):
                raise VectorStoreUnavailable(
                    f"Vector store '{self.name}' cannot be reached; the knowledge bases kept "
                    "there cannot be used until it is back") from None
            raise

    @staticmethod
    def _table(table: str) -> Any:
        from psycopg import sql

        if not TABLE_NAME.fullmatch(table):
            raise ValueError(f"not a knowledge base table: {table!r}")
        return sql.Identifier(table)

    def check(self) -> None:
        """Make sure the store has pgvector (creating the extension where it is available
        and the store's user may); Unprocessable naming what is missing otherwise."""
        import psycopg

        with self._transaction(read=True) as conn:
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
                return
            available = conn.execute("SELECT 1 FROM pg_available_extensions "
                                     "WHERE name = 'vector'").fetchone()
        if not available:
            raise Unprocessable(f"storage: vector store '{self.name}' is a PostgreSQL "
                                "without the pgvector extension (no 'vector' among "
                                "pg_available_extensions); install pgvector there or name "
                                "another store", title="Invalid knowledge base",
                                errors={"storage": ["no pgvector"]})
        try:
            with self._transaction() as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            raise Unprocessable(f"storage: vector store '{self.name}' has pgvector "
                                "available but not created, and its user may not create "
                                "it: an administrator runs CREATE EXTENSION vector there",
                                title="Invalid knowledge base",
                                errors={"storage": ["pgvector not created"]}) from None

    def create(self, table: str, *, exclusive: bool = True) -> None:
        """Make the table of a knowledge base; with ``exclusive``, a table of that name
        already in the store is a Conflict (it is never taken over)."""
        import psycopg

        try:
            with self._transaction() as conn:
                self._make(conn, table, exclusive)
        except psycopg.errors.DuplicateTable:
            raise Conflict(f"storage: vector store '{self.name}' already has a table "
                           f"{table}; name another table (storage = {self.name}.<table>)",
                           title="Storage taken") from None

    def _make(self, conn: Any, table: str, exclusive: bool) -> None:
        from psycopg import sql

        name = self._table(table)
        guard = sql.SQL("") if exclusive else sql.SQL("IF NOT EXISTS ")
        statements = [
            sql.SQL("CREATE TABLE {}{} (rowid bigint GENERATED ALWAYS AS IDENTITY PRIMARY "
                    "KEY, doc_id text NOT NULL, number integer NOT NULL, total integer NOT "
                    "NULL, start integer NOT NULL, end_at integer NOT NULL, content text NOT "
                    "NULL, metadata jsonb NOT NULL, words tsvector GENERATED ALWAYS AS "
                    "(to_tsvector('english', content)) STORED, embedding vector NOT NULL)"
                    ).format(guard, name),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (doc_id)").format(
                sql.Identifier(f"{table}_doc"), name),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (words)").format(
                sql.Identifier(f"{table}_words"), name),
            metadata_index(table)]
        for statement in statements:
            conn.execute(statement)

    def _open(self, table: str) -> None:
        """At this process's first search of a table, make its metadata index if it has
        none (a table written before Quarry made one): a filter's equalities find their
        rows through it. Checked in the catalogue first: CREATE INDEX takes a lock that
        waits for writers, even when the index is there."""
        import psycopg

        if table in self.opened:
            return
        with self._transaction(read=True) as conn:
            present = conn.execute(
                f"SELECT to_regclass(%s), to_regclass(%s), to_regprocedure(%s), "
                f"{_ANALYSED}", (f'"{table}"', f'"{table}_meta"', f"{ESTIMATED_ROWS}(text)",
                                 f'"{table}"')).fetchone()
        if present[0] is None:
            return  # no table (yet): the search answers nothing
        if present[1] is None:
            try:
                with self._transaction() as conn:
                    conn.execute(metadata_index(table))
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                pass  # another worker made it at the same moment (IF NOT EXISTS races)
        estimating = present[2] is not None
        if not estimating:
            try:
                with self._transaction() as conn:
                    conn.execute(_ESTIMATING_FUNCTION)
                estimating = True
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateFunction):
                estimating = True  # another worker made it at the same moment
            except psycopg.errors.InsufficientPrivilege:
                pass  # no estimates: the passing rows are collected first, as before
        if estimating:
            self.opened.add(ESTIMATE_MARK)
        if not present[3]:  # a table written before Quarry analysed after large upserts
            self._analyse(table)
        self.opened.add(table)

    def _analyse(self, table: str) -> None:
        """Gather the statistics of a table's id and metadata (the columns filters are on;
        the vectors' and words' would take most of the time), for the planner's estimates."""
        import psycopg
        from psycopg import sql

        try:
            with self._transaction(read=True) as conn:
                conn.execute(sql.SQL("ANALYZE {} (doc_id, metadata)").format(
                    self._table(table)))
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedTable):
            pass  # not the table's owner (autovacuum still analyses it), or dropped since

    def drop(self, table: str) -> None:
        from psycopg import sql

        with self._transaction() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._table(table)))

    def upsert(self, table: str, chunks: Sequence[Chunk], vectors: Any) -> None:
        """Replace the chunks of every document among ``chunks`` by these, in one
        transaction; ``vectors``: a float32 array, one row per chunk."""
        from psycopg import sql

        if not len(chunks):
            return
        name = self._table(table)
        with self._transaction() as conn:
            if conn.execute("SELECT to_regclass(%s)", (f'"{table}"',)).fetchone()[0] is None:
                self._make(conn, table, exclusive=False)  # a table gone missing comes back
            self._lock(conn, name)
            # After the lock (the rows another writer added count): the rows the table had
            # at its last ANALYZE, whether it had one, and the rows it has now, as the
            # planner estimates them (from its pages, without counting).
            analysed_rows, analysed = conn.execute(
                f"SELECT reltuples, {_ANALYSED} FROM pg_class WHERE oid = to_regclass(%s)",
                (f'"{table}"', f'"{table}"')).fetchone()
            rows = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM {}").format(
                name)).fetchone()[0][0]["Plan"]["Plan Rows"]
            self._fix_dimension(conn, table, int(vectors.shape[1]))
            conn.execute(sql.SQL("DELETE FROM {} WHERE doc_id = ANY(%s)").format(name),
                         (sorted({c.doc_id for c in chunks}),))
            with conn.cursor().copy(sql.SQL(
                    "COPY {} (doc_id, number, total, start, end_at, content, metadata, "
                    "embedding) FROM STDIN").format(name)) as copy:
                for chunk, vector in zip(chunks, vectors, strict=True):
                    copy.write_row((chunk.doc_id, chunk.number, chunk.total, chunk.start,
                                    chunk.end, chunk.content,
                                    json.dumps(chunk.metadata, default=str),
                                    vector_text(vector)))
        # Only where estimates are asked: a table of at most that many rows may be
        # collected whole anyway.
        if 0 < self.exact_chunks * self.estimate_margin < rows + len(chunks) and (
                not analysed or len(chunks) >= ANALYZE_SHARE * analysed_rows):
            self._analyse(table)

    @staticmethod
    def _lock(conn: Any, name: Any) -> None:
        """Writers of one table take turns (SHARE ROW EXCLUSIVE conflicts with itself, not
        with the readers' ACCESS SHARE)."""
        from psycopg import sql

        conn.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(name))

    def _fix_dimension(self, conn: Any, table: str, dimension: int) -> None:
        """At the first insert: the embedding column becomes ``vector(dimension)`` and gets
        its HNSW index (pgvector indexes only a column of one dimension)."""
        from psycopg import sql

        current = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = 'embedding'", (f'"{table}"',)).fetchone()[0]
        if current == dimension:
            return
        if current > 0:
            raise Unprocessable(f"The embeddings have {dimension} dimensions, the knowledge "
                                f"base's table in vector store '{self.name}' holds "
                                f"{current}: was the embedding model changed?",
                                title="Invalid insert")
        name = self._table(table)
        conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE vector({})").format(
            name, sql.Literal(dimension)))
        conn.execute(hnsw_index(table))

    def delete(self, table: str, doc_ids: Sequence[str]) -> int:
        """Remove the chunks of these documents; how many documents had any."""
        import psycopg
        from psycopg import sql

        name = self._table(table)
        try:
            with self._transaction() as conn:
                self._lock(conn, name)
                return conn.execute(sql.SQL(
                    "WITH gone AS (DELETE FROM {} WHERE doc_id = ANY(%s) RETURNING doc_id) "
                    "SELECT count(DISTINCT doc_id) FROM gone").format(name),
                    (list(doc_ids),)).fetchone()[0]
        except psycopg.errors.UndefinedTable:
            return 0

    def counts(self, tables: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(documents, chunks) of each knowledge base, in one statement."""
        from psycopg import sql

        if not tables:
            return {}
        with self._transaction(read=True) as conn:
            present = {r[0] for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND relname = "
                "ANY(%s) AND pg_table_is_visible(oid)", (list(tables),))}
            parts = [sql.SQL("SELECT {}, count(DISTINCT doc_id), count(*) FROM {}").format(
                sql.Literal(t), self._table(t)) for t in tables if t in present]
            found = {r[0]: (r[1], r[2]) for r in conn.execute(
                sql.SQL(" UNION ALL ").join(parts))} if parts else {}
        return {t: found.get(t, (0, 0)) for t in tables}

    def listing(self, table: str, filters: Sequence[Filter], limit: int | None) -> list[Hit]:
        import psycopg
        from psycopg import sql

        where, params = _where(filters)
        try:
            with self._transaction(read=True) as conn:
                rows = conn.execute(sql.SQL(f"SELECT {_COLUMNS} FROM {{}} WHERE {where} "
                                            "ORDER BY doc_id, number LIMIT %s").format(
                    self._table(table)), (*params, limit)).fetchall()
        except psycopg.errors.UndefinedTable:
            return []
        return [Hit(_chunk(row), None) for row in rows]

    def search(self, table: str, vector: Any, text: str, filters: Sequence[Filter], *,
               limit: int, alpha: float | None) -> list[Hit]:
        """The best ``limit`` chunks for ``vector`` (the query's embedding) and ``text``:
        by the vectors alone when ``alpha`` is None, else fused with the word ranking.

        Each ranking's statement answers its chunks whole with their distances, and the
        two are sent together (psycopg's pipeline): one round trip to the store."""
        import psycopg
        from psycopg import sql

        name = self._table(table)
        where, params = _where(filters)
        depth = limit if alpha is None else max(4 * limit, 40)
        question = vector_text(vector)
        words = words_of(text) if alpha is not None else []
        ef = min(max(depth, self.ef_search), _EF_MAX)
        if filters:
            self._open(table)
        try:
            with self._transaction(read=True) as conn, conn.pipeline():
                # Set on the connection by each search before it runs (autocommit: no
                # SET LOCAL). With filters, the index scan goes on until enough rows pass.
                conn.execute("SELECT set_config('hnsw.ef_search', %s, false), "
                             "set_config('hnsw.iterative_scan', %s, false)",
                             (str(ef), self.iterative))
                statement, values = self.ranking_statement(name, filters, question, depth)
                # Planned for its values each time, never as a prepared statement (psycopg
                # prepares a text run five times, and PostgreSQL may then keep one plan for
                # any values): which side runs, and how, depends on them.
                by_vector = conn.execute(statement, values, prepare=False)
                # Each word quoted as one term (\w characters only: no tsquery syntax).
                by_words = conn.execute(sql.SQL(
                    f"SELECT {_COLUMNS}, embedding <=> %s::vector FROM {{}}, "
                    "to_tsquery('english', %s) q WHERE words @@ q AND "
                    f"{where} ORDER BY ts_rank_cd(words, q) DESC, rowid LIMIT %s").format(
                    name), (question, " | ".join(f"'{w}'" for w in words), *params, depth)
                ) if words else None
                found = {row[0]: row for row in by_vector.fetchall()}
                ranked = list(found)
                if alpha is not None:
                    worded = by_words.fetchall() if by_words is not None else []
                    found.update({row[0]: row for row in worded if row[0] not in found})
                    ranked = fused_ranking(ranked, [row[0] for row in worded],
                                           alpha)[:limit]
        except psycopg.errors.UndefinedTable:
            return []
        return [Hit(_chunk(found[r]), found[r][8]) for r in ranked]

    def ranking_statement(self, name: Any, filters: Sequence[Filter], question: str,
                          depth: int) -> tuple[Any, tuple[Any, ...]]:
        """The statement of the vector ranking and its values: its rows are a chunk's
        columns and its distance, nearest first.

        Without filters, the HNSW index's nearest. With filters, in the same statement,
        PostgreSQL's planner first estimates how many rows pass them (ESTIMATED_ROWS, an
        EXPLAIN: no row is read). Estimated at most twice KB_STORE_EXACT_CHUNKS, up to
        KB_STORE_EXACT_CHUNKS + 1 rows that pass are found (through the metadata index,
        the id's or the table) with their distances; when that is all of them, the
        nearest of those are answered: exact, and the index is not walked. Estimated more,
        or more found, the iterative HNSW scan's (relaxed_order answers the rows in the
        order the scan met them, nearly by distance: they are sorted again, by their exact
        distances). When an estimate of many was wrong, the scan gives up before it has
        found the rows asked for (pgvector's hnsw.max_scan_tuples): the passing rows
        are then found as above, and ranked exactly when they are few. PostgreSQL runs
        only the sides whose conditions hold (one-time filters on the estimate and the
        counts)."""
        from psycopg import sql

        # The walk's filters leave the metadata index out: with it, PostgreSQL may prefer
        # sorting every row that passes to walking the graph, which is what the exact
        # side is for, and only when few pass.
        filtered = bool(filters)
        where, params = _where(filters, indexed=False)
        walked = sql.SQL(
            f"SELECT {_COLUMNS}, embedding <=> %s::vector AS distance FROM {{name}} WHERE "
            f"{where}{{gate}} ORDER BY embedding <=> %s::vector LIMIT %s")
        gathered = depth * self.gathered if filtered else depth
        bound = self.exact_chunks
        if not filtered or bound <= 0:
            return sql.SQL("WITH walked AS MATERIALIZED ({}) SELECT * FROM walked ORDER BY "
                           "distance, rowid LIMIT %s").format(walked.format(
                               name=name, gate=sql.SQL(""))), (
                question, *params, question, gathered, depth)
        found, found_params = _where(filters)
        # Without the estimating function (a store whose user may not make it), an
        # estimate of 0: the rows are collected first, as before there was one.
        estimate, estimate_params = (sql.SQL("0"), ()) if ESTIMATE_MARK not in self.opened \
            else (sql.SQL(f"{ESTIMATED_ROWS}(%s)"), (estimate_query(name, filters),))
        collect = sql.SQL(f"SELECT rowid, embedding <=> %s::vector AS distance FROM {{name}} "
                          f"WHERE {found}{{gate}} LIMIT %s")
        near = self.estimate_margin * bound
        return sql.SQL(
            "WITH estimated AS (SELECT {estimate}::float8 AS n), "
            "first AS MATERIALIZED ({first}), "
            "walked AS MATERIALIZED ({walked}), "
            "second AS MATERIALIZED ({second}), "
            "passing AS (SELECT * FROM first UNION ALL SELECT * FROM second), "
            "counted AS (SELECT count(*) AS n FROM passing), "
            "nearest AS (SELECT rowid, distance FROM passing WHERE (SELECT n FROM counted) "
            "<= %s ORDER BY distance, rowid LIMIT %s) "
            f"SELECT {', '.join(f't.{c}' for c in _COLUMNS.split(', '))}, "
            "nearest.distance FROM nearest JOIN {name} t USING (rowid) "
            "UNION ALL (SELECT * FROM walked WHERE (SELECT n FROM counted) NOT BETWEEN 1 "
            "AND %s ORDER BY distance, rowid LIMIT %s) ORDER BY distance, rowid LIMIT %s").format(
            estimate=estimate, name=name,
            first=collect.format(name=name, gate=sql.SQL(
                " AND (SELECT n FROM estimated) <= %s")),
            walked=walked.format(name=name, gate=sql.SQL(
                " AND ((SELECT n FROM estimated) > %s OR (SELECT count(*) FROM first) > %s)")),
            # (counting at most the rows asked for, and the walk's rows sorted on their
            # own: PostgreSQL then reads the walk's CTE only as far as the sort needs, as
            # it comes out by distance; reading all it gathers makes the walk go on, a
            # filter keeping a twentieth of 100 000 chunks 53 ms instead of 36 at recall
            # 1.000 instead of 0.963, bench/kb_pgvector.py)
            second=collect.format(name=name, gate=sql.SQL(
                " AND (SELECT n FROM estimated) > %s AND (SELECT count(*) FROM (SELECT "
                "FROM walked LIMIT %s) w) < %s"))
        ), (*estimate_params,
            question, *found_params, near, bound + 1,
            question, *params, near, bound, question, gathered,
            question, *found_params, near, depth, depth, bound + 1,
            bound, depth, bound, depth, depth)


def hnsw_index(table: str, m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION
               ) -> Any:
    """The statement that makes a table's HNSW index (cosine distance)."""
    from psycopg import sql

    return sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding "
                   "vector_cosine_ops) WITH (m = {}, ef_construction = {})").format(
        sql.Identifier(f"{table}_vec"), PgVectorIndex._table(table), sql.Literal(m),
        sql.Literal(ef_construction))


def metadata_index(table: str) -> Any:
    """The statement that makes a table's index of its metadata (GIN, jsonb_path_ops): a
    filter's equality on a metadata value also asks for containment, which this index
    answers."""
    from psycopg import sql

    return sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (metadata "
                   "jsonb_path_ops)").format(sql.Identifier(f"{table}_meta"),
                                             PgVectorIndex._table(table))


def estimate_query(name: Any, filters: Sequence[Filter]) -> str:
    """The text of a query that the filters' rows pass, its values written in it, for
    ESTIMATED_ROWS to explain."""
    from psycopg import sql

    where, params = _where(filters, indexed=False, estimated=True)
    pieces = where.split("%s")
    parts = [sql.SQL("SELECT 1 FROM {} WHERE ").format(name), sql.SQL(pieces[0])]
    for value, piece in zip(params, pieces[1:], strict=True):
        parts += [sql.Literal(value), sql.SQL(piece)]
    return sql.Composed(parts).as_string(None)


# Its rows as PostgreSQL's planner estimates them (an EXPLAIN: nothing is run), so that a
# search's statement decides by it without a round trip of its own.
_ESTIMATING_FUNCTION = (
    f"CREATE FUNCTION {ESTIMATED_ROWS}(query text) RETURNS float8 LANGUAGE plpgsql AS $$ "
    "DECLARE plan json; BEGIN EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan; "
    "RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8; END $$")
# Whether the table (%s, quoted) has statistics of its metadata.
_ANALYSED = ("EXISTS (SELECT 1 FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename "
             "JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname "
             "WHERE c.oid = to_regclass(%s) AND s.attname = 'metadata')")


def vector_text(vector: Any) -> str:
    """A vector as pgvector reads it from text: ``[x,y,…]``."""
    return "[" + ",".join(map(repr, vector.tolist())) + "]"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _chunk(row: Sequence[Any]) -> Chunk:
    return Chunk(row[1], row[2], row[3], row[4], row[5], row[6], row[7])


def _where(filters: Sequence[Filter], indexed: bool = True,
           estimated: bool = False) -> tuple[str, list[Any]]:
    """The filters as SQL on the table's columns: the id is text, a metadata value is
    compared as jsonb (numbers as numbers, strings as strings, numbers before strings: the
    order SQLite gives json_extract's values in the index file); with ``indexed``, an
    equality on metadata also as the containment the metadata index answers; with
    ``estimated``, as that containment alone (for the planner's estimate: the metadata's
    statistics answer it, where the equality on an expression gets a default selectivity,
    a two-hundredth, and the two together an estimate far too small)."""
    clauses, params = [], []
    for item in filters:
        op = OPERATORS[item.op]
        many = op in ("IN", "NOT IN")
        values = list(item.value) if many else [item.value]
        if many and not values:
            clauses.append("false" if op == "IN" else "true")
            continue
        if item.field == "id":
            left, mark, values = "doc_id", "%s", [str(v) for v in values]
        elif "LIKE" in op:
            left, mark = "(metadata ->> %s::text)", "%s"
            params.append(item.field)
            values = [str(v) for v in values]
        else:
            left, mark = "(metadata -> %s::text)", "%s::jsonb"
            params.append(item.field)
            values = [json.dumps(v, default=str) for v in values]
        right = f"({', '.join([mark] * len(values))})" if many else mark
        contained = op in ("=", "IN") and mark == "%s::jsonb"
        if estimated and contained:
            params.pop()  # the field's name
        else:
            clauses.append(f"{left} {op} {right}")
            params.extend(values)
        if (indexed or estimated) and contained:
            # What that equality implies, in a form the metadata index answers (the
            # equality itself stays: containment is looser, e.g. for arrays).
            clauses.append("(" + " OR ".join(["metadata @> %s::jsonb"] * len(values)) + ")")
            params.extend(json.dumps({item.field: json.loads(v)}) for v in values)
    # Percent signs stay out of the text (psycopg reads % as a placeholder); the SQL is
    # composed from fixed pieces and the operator allow-list only.
    return " AND ".join(clauses) or "true", params
