"""A federated statement from start to end: plan, legs, engine, under one time limit.

The time limit is the statement's, not each leg's: every leg gets what is left of it, and
the engine is interrupted when it runs out. ``Statement`` (``sql/running.py``) is the one
handle a cancel reaches (from any worker: the registry's watcher cancels it): while the legs
run, its cancel stops each leg's own statement (same query id, so each database session
carries it), each attached to its leg's connection; then it interrupts DuckDB.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from flask import current_app
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Tokenizer, TokenType

from ..errors import EngineUnavailable
from ..sql import execute
from ..sql.errors import ErrorCode, SqlError
from ..sql.execute import effective_timeout
from ..sql.gate import gate
from ..sql.running import CANCELLED, TIME_LIMIT, Statement
from ..sql.sources import DataSource, SourceRegistry
from ..sql.stream import Cursor, TableStream, open_stream
from ..sql.syntax import parse_sqlglot
from . import dynamic
from . import legs as leg_runner
from .engine import EngineError, current_engine, engine_error, json_values
from .plan import (
    Leg,
    Link,
    Plan,
    Planned,
    fresh,
    leg_sql,
    parse,
    plan_key,
    shown_names,
    split,
    tables_of,
)
from .route import route
from .spark import SparkFailure, SparkSession, current_spark, spark_sql

EXPLAIN_COLUMNS = ["step", "source", "sql"]
# Legs fetched at once per statement: each holds a connection of its source's pool.
MAX_PARALLEL_LEGS = 4
# What a table changed since it was described makes a statement fail with.
_STALE = (ErrorCode.QUERY_FAILED, ErrorCode.UNKNOWN_TABLE)
_EXPLAIN = re.compile(r"\s*explain\s+(?=select\b|with\b|\()", re.IGNORECASE)
_EXPLAIN_WORD = re.compile(r"\s*explain\b", re.IGNORECASE)


@dataclass
class Limits:
    timeout_s: float | None      # asked by the request (None: the sources' own)
    max_rows: int                # rows of the answer (beyond: truncated)
    max_bytes: int | None        # text and bytes of the answer
    max_leg_rows: int            # rows of one leg (beyond: an error)
    params: dict[str, Any] | None = None   # values of the statement's :name parameters
    stream: bool = False         # a streamed answer: the stream's time limit, no row cap here


@dataclass
class Given:
    """Rows Quarry made itself (a knowledge base's search) that stand in a federated
    statement as the table of a bare name, beside the legs read from data sources."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    label: str = ""              # what EXPLAIN and the legs' filters call it
    json: tuple[str, ...] = ()   # columns of JSON values (a dict …): JSON in the engine


@dataclass
class FederatedResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    sources: list[str]
    engine: str = "duckdb"       # the engine that joined the legs (duckdb, spark)
    note: str | None = None      # why it is not the configured one (Spark down: DuckDB)


def engine_context(engine: str, note: str | None) -> dict[str, str]:
    """What an answer's context says of the engine that joined its legs: nothing for the
    default one (DuckDB) as configured; its name otherwise, and the note saying why it
    is not the configured one (Spark down with ``auto``: DuckDB ran it)."""
    context: dict[str, str] = {}
    if engine != "duckdb" or note:
        context["engine"] = engine
    if note:
        context["engine_note"] = note
    return context


def explained(query: str) -> str | None:
    """The statement of ``EXPLAIN <select>``, or None for any other text; READ_ONLY for
    ``EXPLAIN ANALYZE`` (it runs the statement to time it)."""
    _refuse_analyze(query)
    match = _EXPLAIN.match(query)
    if match is None:
        return None
    try:  # a plain prefix test would be fooled by a comment; the tokens must agree
        statements = parse_sqlglot(query[match.end():], None)
    except SqlError:
        return None
    return query[match.end():] if len(statements) == 1 else None


def _refuse_analyze(query: str) -> None:
    head = _EXPLAIN_WORD.match(query)
    if head is None:
        return
    try:  # tokens, not text: a comment between the words hides nothing
        tokens = Tokenizer().tokenize(query[head.end():])
    except SqlglotError:
        return  # not EXPLAIN ANALYZE as far as can be read: the gate refuses it anyway
    for token in tokens:
        if token.token_type in (TokenType.SELECT, TokenType.WITH):
            return
        if token.text.upper() in ("ANALYZE", "ANALYSE"):
            raise SqlError(ErrorCode.READ_ONLY,
                           "EXPLAIN ANALYZE is refused: it runs the statement to time it; "
                           "EXPLAIN SELECT … shows the plan without running it")


def sources_of(plan: Plan) -> list[str]:
    return list(dict.fromkeys(leg.source.name for leg in plan.legs))


def fetch_rows(query: str, registry: SourceRegistry, context: DataSource | None, *,
               max_rows: int, timeout_s: float | None) -> tuple[list[str], list[tuple]]:
    """The whole answer of a SELECT read by the engine, for Quarry's own use (training,
    a model JOIN), as ``sql.execute.fetch_rows`` reads one source's: TOO_MANY_ROWS beyond
    ``max_rows``, never a silently cut input."""
    limits = Limits(timeout_s=timeout_s, max_rows=max_rows, max_bytes=None,
                    max_leg_rows=current_app.config["FEDERATION_MAX_LEG_ROWS"])
    result = federated_select(query, registry, context, limits, None)
    if result.truncated:
        raise SqlError(ErrorCode.TOO_MANY_ROWS, f"The query returns more than {max_rows} "
                                                "rows; narrow it down (WHERE, LIMIT)")
    return result.columns, result.rows


def query_columns(query: str, registry: SourceRegistry, context: str | None, *,
                  timeout_s: float | None) -> list[str]:
    """The names of the columns a SELECT returns, read without reading its rows, on one
    data source or several (uploaded files too); SqlError as running it would raise (a
    write, a missing table or column, a source the registry does not hold …)."""
    source = registry.require(context) if context is not None else None
    engine, target = _reader(query, registry, source)
    if not engine:
        return execute.query_columns(target.name if target else None, query,
                                     registry=registry, timeout_s=timeout_s,
                                     allow_constant=True)
    limits = Limits(timeout_s=timeout_s, max_rows=0, max_bytes=None, max_leg_rows=1)
    run = _Run(query, registry, source, limits, None)
    try:
        run.load(empty=True)
        return shown_names(run.plan, run.start_engine())
    finally:
        run.close()


def read_rows(query: str, registry: SourceRegistry, context: str | None, *, max_rows: int,
              timeout_s: float | None) -> tuple[list[str], list[tuple]]:
    """The whole answer of a SELECT for Quarry's own use (training, a model JOIN), on one
    data source or several: TOO_MANY_ROWS beyond ``max_rows``, never a cut input."""
    source = registry.require(context) if context is not None else None
    engine, target = _reader(query, registry, source)
    if engine:
        return fetch_rows(query, registry, source, max_rows=max_rows, timeout_s=timeout_s)
    if target is None:
        raise SqlError(ErrorCode.UNKNOWN_TABLE, "The query names no data source")
    return execute.fetch_rows(target.name, query, max_rows=max_rows, timeout_s=timeout_s,
                              registry=registry)


def stream_rows(query: str, registry: SourceRegistry, context: str | None, *, max_rows: int,
                timeout_s: float) -> TableStream:
    """The answer of a SELECT for Quarry's own use, read batch by batch (``batches()``),
    on one data source (a server-side cursor) or several (the engine): one batch in memory
    at a time however many rows come. ``max_rows``: the stream stops there and says so
    (``truncated``); ``timeout_s`` covers the whole reading, the caller's work between two
    batches included. The caller closes it."""
    source = registry.require(context) if context is not None else None
    engine, target = _reader(query, registry, source)
    statement = Statement(uuid.uuid4().hex)
    if engine:
        limits = Limits(timeout_s=timeout_s, max_rows=max_rows, max_bytes=None,
                        max_leg_rows=current_app.config["FEDERATION_MAX_LEG_ROWS"],
                        stream=True)
        return open_federated_stream(query, registry, source, limits, statement)
    if target is None:
        raise SqlError(ErrorCode.UNKNOWN_TABLE, "The query names no data source")
    gated = gate(query, registry, target.name)
    return open_stream(gated.source or target, gated.sql, None, gated.param_names,
                       timeout_s=timeout_s, max_rows=max_rows, statement=statement)


def sources_named(query: str, registry: SourceRegistry, context: str | None = None
                  ) -> list[str]:
    """The data sources a read-only SELECT names with its tables, in the order named (bare
    names in ``context``); SqlError for a write, or a qualifier that is no data source."""
    tables = tables_of(parse(query, registry), registry,
                       registry.get(context) if context is not None else None)
    return list(dict.fromkeys(source.name for source, _ in tables))


def _reader(query: str, registry: SourceRegistry, context: DataSource | None
            ) -> tuple[bool, DataSource | None]:
    """(whether the engine reads ``query`` — ``route.py`` says so —, the one data source
    it reads otherwise: None for a statement without a table)."""
    where = route(query, registry, context.name if context else None)
    target = where.source or context
    return where.engine or (target is not None and target.engine_only), target


def federated_select(query: str, registry: SourceRegistry, context: DataSource | None,
                     limits: Limits, statement: Statement | None,
                     given: dict[str, Given] | None = None) -> FederatedResult:
    """Run the SELECT ``query`` over the data sources it names (and the ``given`` tables
    it names by their bare names); the buffered answer."""
    run = _Run(query, registry, context, limits, statement, given)
    try:
        run.load()
        columns, rows, truncated = _engine(run)
    finally:
        run.close()
    return FederatedResult(columns, rows, truncated, sources_of(run.plan), run.engine_name,
                           run.note)


def open_federated_stream(query: str, registry: SourceRegistry, context: DataSource | None,
                          limits: Limits, statement: Statement) -> TableStream:
    """Run the legs, start the engine, and answer its rows as a stream (``sql/stream.py``)
    that reads them batch by batch from DuckDB; closing the stream ends the statement."""
    run = _Run(query, registry, context, limits, statement)
    try:
        run.load()
        names = shown_names(run.plan, run.start_engine())
        batches = run.session.batches()
    except BaseException:
        run.close()
        raise
    pending: list[tuple] = []
    json = run.session.json_columns

    def fetch(size: int) -> list[tuple]:
        try:
            while len(pending) < max(size, 1):
                batch = next(batches, None)
                if batch is None:
                    break
                pending.extend(zip(*_values(batch, json), strict=True))
        except (EngineError, SparkFailure) as exc:
            raise run.engine_failure(exc) from None
        rows = pending[:size]
        del pending[:size]
        return rows

    # Only a JSON column's type is declared (its values go out as an Arrow stream's text,
    # as a one-source json/jsonb column's do); the others' come from their values.
    types = [("JSON", None, None) if i in json else None for i in range(len(names))]
    cursor = Cursor(names, fetch, lambda _complete: run.close(), types)
    stream = TableStream(_ENGINE_SOURCE, _Detached(), cursor, run.statement, run.timeout,
                         limits.max_rows)
    stream.context = engine_context(run.engine_name, run.note)
    try:
        stream.prefetch()
    except BaseException:
        stream.close()
        raise
    return stream


class _Run:
    """One federated statement while it runs: its plan, its engine session, its clock."""

    def __init__(self, query: str, registry: SourceRegistry, context: DataSource | None,
                 limits: Limits, statement: Statement | None,
                 given: dict[str, Given] | None = None) -> None:
        self.query, self.registry, self.context = query, registry, context
        self.given = given or {}
        self.statement = statement or Statement(uuid.uuid4().hex)
        # A write is refused here, before any leg runs (a kept plan's statement was). A
        # statement with given tables is planned each time: their columns are not a
        # source's, which a kept plan is checked against.
        self.key = plan_key(query, context, limits.params) if not self.given else None
        self.planned: Planned | None = current_engine().plans.get(self.key) \
            if self.key is not None else None
        self.parsed = self.planned.parsed if self.planned is not None else \
            parse(query, registry, limits.params)
        named = _named_sources(self.parsed, registry, context)
        self.timeout = float(limits.timeout_s or 30.0) if limits.stream else \
            _timeout(named, limits.timeout_s)
        self.deadline = time.monotonic() + self.timeout
        self.statement.deadline = self.deadline
        self.statement.source = ", ".join(source.name for source in named)
        self.statement.sql = query
        if not limits.stream:  # a source's own row cap holds when it is read with others
            limits = replace(limits, max_rows=min([limits.max_rows] +
                                                  [s.max_rows for s in named]))
        self.limits = limits
        self.session: Any = None  # the engine's session, opened once the plan is known
        self.engine_name, self.note = "duckdb", None
        self.plan: Plan | None = None
        self._timer: threading.Timer | None = None
        self._closed = False

    def load(self, *, empty: bool = False) -> None:
        """Plan the legs (reading each table's columns) and run them into the engine,
        the tables' descriptions and then the legs each in parallel. ``empty``: each leg
        runs with LIMIT 0 (its source checks and describes it, and sends no row), so the
        engine statement only describes its answer.

        A statement planned with descriptions the process kept (``legs.describe_tables``)
        that fails as a changed table would make it fail (a column or table not found)
        is planned and run once more with its tables described anew."""
        kept: set[tuple[str, str]] = set()
        try:
            self._load(empty, kept, current_app.config["FEDERATION_CATALOG_TTL_S"])
        except SqlError as exc:
            if not kept or exc.code not in _STALE or self.statement.stopped is not None:
                raise
            if self.session is not None:
                self.session.close()
                self.session = None
            self.planned = None
            self._load(empty, set(), 0)

    def _load(self, empty: bool, kept: set[tuple[str, str]], ttl_s: float) -> None:
        registry, deadline, engine = self.registry, self.deadline, current_engine()
        tables = tables_of(self.parsed, registry, self.context, self.given)
        columns = leg_runner.describe_tables(
            registry, deadline, tables, lambda jobs: self._parallel(jobs, "json"),
            engine.described, ttl_s, kept)
        read = [(source, columns[leg_runner.describe_key(source, table)])
                for source, table in tables]
        if self.planned is not None and self.planned.fits(read):
            self.plan = fresh(self.planned.plan)
        else:
            plan = split(self.parsed, registry, self.context, lambda source, table:
                         columns[leg_runner.describe_key(source, table)],
                         {name: table.columns for name, table in self.given.items()},
                         {name: table.label or name for name, table in self.given.items()})
            if self.key is not None:
                engine.plans.put(self.key, Planned(self.parsed, read, plan))
            self.plan = fresh(plan)
        self.statement.legs = self.plan.legs
        self.session, self.engine_name, self.note = open_engine(
            self.plan, registry, self.statement, deadline, spark=not empty)
        for name, table in self.given.items():
            names = [column.lower() for column in table.columns]
            json = {names.index(column.lower()) for column in table.json}
            self.session.append(name, leg_runner.record_batch(
                [] if empty else table.rows, names, [None] * len(names), json))
        if isinstance(self.session, SparkSession):
            self.session.cap = self.limits.max_rows + 1
            self._load_spark()
            return
        most = current_app.config["FEDERATION_DYNAMIC_KEYS"]
        if empty:  # no row is read: nothing to learn a size from, no keys to wait for
            for leg in self.plan.legs:
                leg.limit = 0
                leg.sql = leg_sql(leg)
            waits = {}
        else:
            self._estimate()
            waits = dynamic.choose(self.plan.links, engine.sizes, most)
        loaded = {leg.name: threading.Event() for leg in self.plan.legs}
        failed: set[str] = set()
        shapes = None if empty else leg_runner.Shapes(engine.shapes, ttl_s, kept)

        def load_leg(child: Statement, leg: Leg) -> int:
            try:
                sql = None
                links = waits.get(leg.name)
                if links:  # the small legs first: their keys cut this one
                    for link in links:
                        if link.source.name in loaded:  # a held table is there already
                            self._wait(child, loaded[link.source.name])
                    if any(link.source.name in failed for link in links):
                        raise child.error(self.timeout)  # the source's failure answers
                    sql = dynamic.filtered_sql(leg, links, self.session, most)
                leg.state = "running"
                # Legs are read as for an Arrow answer: PostgreSQL then sends record
                # batches through ADBC (sql/native.py) when it can, the fastest way in.
                rows = leg_runner.load(registry, child, deadline, leg, self.session,
                                       self.limits.max_leg_rows, sql,
                                       dynamic.size_of(leg, engine.sizes), shapes)
                if sql is not None:
                    dynamic.judge(leg, links, rows, engine.sizes)
                elif not empty:
                    dynamic.learn(leg, rows, self.plan.links, self.session, engine.sizes,
                                  most)
                leg.state = "done"
                return rows
            except BaseException as exc:
                failed.add(leg.name)
                if isinstance(exc, SqlError) and child.stopped is None:
                    leg_runner.forget_described(engine.described, leg)
                    if shapes is not None:
                        shapes.forget(leg)
                raise
            finally:
                loaded[leg.name].set()

        # Sources are submitted before the legs that wait for them: a waiting leg never
        # holds the last worker a source needs.
        self._parallel([lambda child, leg=leg: load_leg(child, leg)
                        for leg in dynamic.order(self.plan.legs, waits)], "arrow")

    def _load_spark(self) -> None:
        """Quarry reads the legs Spark cannot reach (SQLite, files) into the session as
        Arrow; then Spark gets the others, each a JDBC view of the session (no row read
        yet), a leg that waits for a smaller leg's keys after it, with its dynamic filter
        (``dynamic.choose``, from the sources' estimates as on DuckDB's route), and a
        large one split into parallel reads (``SparkSession.jdbc``)."""
        session, statement, registry = self.session, self.statement, self.registry
        local = [leg for leg in self.plan.legs if not session.reaches(leg.source)]
        most = current_app.config["FEDERATION_DYNAMIC_KEYS"]
        engine = current_engine()
        _estimate_spark(self.plan, session, registry, self.deadline)
        waits = spark_waits(self.plan, session, engine.sizes, most)

        def load_local(child: Statement, leg: Leg) -> int:
            leg.state = "running"
            rows = leg_runner.load(registry, child, self.deadline, leg, session,
                                   self.limits.max_leg_rows)
            leg.state = "done"
            return rows

        if local:
            self._parallel([lambda child, leg=leg: load_local(child, leg) for leg in local],
                           "arrow")
        statement.reattach("", session.interrupt)
        for leg in dynamic.order(self.plan.legs, waits):
            if leg in local:
                continue
            left = self.deadline - time.monotonic()
            if left <= 0 or statement.stopped is not None:
                statement.stopped = statement.stopped or TIME_LIMIT
                raise statement.error(self.timeout)
            try:
                split = session.partitions(leg, left)
                gated = gate(leg.sql, registry, leg.source.name)
                sql = dynamic.filtered_sql(leg, waits[leg.name], session, most) \
                    if leg.name in waits else None
                if sql is not None and not gated.param_names:
                    # As on DuckDB's route (legs._open): the gated query and one more
                    # condition, a column compared with literals written by sqlglot;
                    # parsing thousands of keys again would cost seconds.
                    gated = replace(gated, sql=sql)
                session.jdbc(leg, gated, left, split)
            except SparkFailure as exc:
                raise self.engine_failure(exc) from None
            leg.state = "in spark"

    def _estimate(self) -> None:
        """Each linked leg's rows, as its source estimates them (``dynamic.estimate``)."""
        engine = current_engine()
        dynamic.estimate(self.plan.legs, self.plan.links, self.registry, engine.sizes,
                         self.deadline - time.monotonic(), engine.estimates,
                         current_app.config["FEDERATION_CATALOG_TTL_S"])

    def _wait(self, child: Statement, event: threading.Event) -> None:
        while not event.wait(0.05):
            if child.stopped is None and time.monotonic() > self.deadline:
                child.stopped = TIME_LIMIT
            if child.stopped is not None:
                raise child.error(self.timeout)

    def _parallel(self, jobs: list[Callable[[Statement], Any]], fmt: str) -> list[Any]:
        """Run ``jobs`` at once, each with a statement of its own (same id, so that each
        leg's database session carries it) that the statement's cancel reaches; the first
        failure stops the others and is the answer."""
        parent, app = self.statement, current_app._get_current_object()
        children: list[Statement] = []
        lock = threading.Lock()

        def stop_all() -> None:
            with lock:
                reached = list(children)
            for child in reached:
                child.cancel(parent.stopped or CANCELLED)

        def run(job: Callable[[Statement], Any]) -> Any:
            child = Statement(parent.id, response_format=fmt, user=parent.user)
            child.deadline = parent.deadline
            with lock:
                children.append(child)
            if parent.stopped is not None:
                child.cancel(parent.stopped)
            with app.app_context():
                return _guard(parent, self.timeout, lambda: job(child))

        if not jobs:
            return []
        parent.reattach("", stop_all)
        if len(jobs) == 1:
            return [run(jobs[0])]
        with ThreadPoolExecutor(max_workers=min(len(jobs), MAX_PARALLEL_LEGS),
                                thread_name_prefix="quarry-leg") as pool:
            futures = [pool.submit(run, job) for job in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f in done and f.exception()), None)
            if failed is not None:
                with lock:
                    others = list(children)
                for child in others:
                    child.cancel(CANCELLED)
                wait(futures)
                raise failed.exception()
            return [future.result() for future in futures]

    def start_engine(self) -> list[str]:
        """Start the engine statement (a cancel or the time limit interrupts it); the
        names of its columns."""
        statement = self.statement
        if statement.stopped is not None:
            raise statement.error(self.timeout)
        statement.reattach("", self.session.interrupt)
        self._timer = threading.Timer(max(self.deadline - time.monotonic(), 0.0),
                                      lambda: statement.cancel(TIME_LIMIT))
        self._timer.daemon = True
        self._timer.start()
        try:
            return self.session.run(self.plan.engine_sql)
        except (EngineError, SparkFailure) as exc:
            raise self.engine_failure(exc) from None

    def engine_failure(self, exc: EngineError | SparkFailure) -> SqlError:
        if self.statement.stopped is None and time.monotonic() >= self.deadline:
            # A source's own time limit (the same one) may fire a moment before ours.
            self.statement.stopped = TIME_LIMIT
        if self.statement.stopped is not None:
            return self.statement.error(self.timeout)
        if isinstance(exc, SparkFailure):
            return exc.as_sql_error()
        if exc.interrupted:
            return self.statement.error(self.timeout)
        return engine_error(exc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self.statement.detach(_Detached())
        if self.session is not None:
            self.session.close()


def explain(query: str, registry: SourceRegistry, context: DataSource | None,
            timeout_s: float | None, statement: Statement | None,
            params: dict[str, Any] | None = None, given: dict[str, Given] | None = None
            ) -> list[tuple[str, ...]]:
    """Rows of EXPLAIN: each leg (its source and the SQL sent to it), then the engine.
    ``given``: the tables Quarry makes itself (by their bare names; their columns only)."""
    statement = statement or Statement(uuid.uuid4().hex)
    given = given or {}
    parsed = parse(query, registry, params)
    timeout = _timeout(_named_sources(parsed, registry, context), timeout_s)
    deadline = time.monotonic() + timeout
    engine = current_engine()
    try:
        columns = leg_runner.describe_tables(
            registry, deadline, tables_of(parsed, registry, context, given),
            lambda jobs: [_guard(statement, timeout, lambda job=job: job(statement))
                          for job in jobs], engine.described,
            current_app.config["FEDERATION_CATALOG_TTL_S"])
    finally:
        statement.detach(_Detached())
    plan = split(parsed, registry, context, lambda source, table:
                 columns[leg_runner.describe_key(source, table)],
                 {name: table.columns for name, table in given.items()},
                 {name: table.label or name for name, table in given.items()})
    sizes = engine.sizes
    engine_name, note = "duckdb", None
    if current_app.config["FEDERATION_ENGINE"] != "duckdb":
        session, engine_name, note = open_engine(plan, registry, statement, deadline)
        try:
            if isinstance(session, SparkSession):
                return _explain_spark(plan, registry, statement, deadline, timeout, session)
        finally:
            session.close()
    dynamic.estimate(plan.legs, plan.links, registry, sizes, deadline - time.monotonic(),
                     engine.estimates, current_app.config["FEDERATION_CATALOG_TTL_S"])
    waits = dynamic.choose(plan.links, sizes, current_app.config["FEDERATION_DYNAMIC_KEYS"])
    rows = [("; ".join([f"leg {i}: {leg.name}", dynamic.size_note(leg, sizes)]
                       + [dynamic.describe(link) for link in waits.get(leg.name, ())]),
             leg.source.name, leg.sql)
            for i, leg in enumerate(plan.legs, 1)]
    rows.append(("engine" if note is None else f"engine ({note})", engine_name,
                 plan.engine_sql))
    return rows


def _explain_spark(plan: Plan, registry: SourceRegistry, statement: Statement,
                   deadline: float, timeout: float, session: SparkSession
                   ) -> list[tuple[str, ...]]:
    """EXPLAIN on Spark: each leg (a JDBC relation, or rows Quarry hands over), the
    statement in Spark's dialect, and Spark's plan of it, which shows what each JDBC scan
    pushes to its source. The legs' views are made (Spark asks each source for columns,
    Quarry reads no row of its own legs); nothing runs: a dynamic filter is named, its
    keys are not read."""
    rows = []
    engine = current_engine()
    _estimate_spark(plan, session, registry, deadline)
    waits = spark_waits(plan, session, engine.sizes,
                        current_app.config["FEDERATION_DYNAMIC_KEYS"])
    try:
        for i, leg in enumerate(plan.legs, 1):
            if session.reaches(leg.source):
                left = max(deadline - time.monotonic(), 1.0)
                parts = session.partitions(leg, left)  # may add its key to leg.sql
                split = session.jdbc(leg, gate(leg.sql, registry, leg.source.name), left,
                                     parts)
                how = "; ".join(["read by Spark over JDBC (read-only session)",
                                 dynamic.size_note(leg, engine.sizes)]
                                + ([split] if split else [])
                                + [dynamic.describe(link) for link in waits.get(leg.name, ())])
            else:
                empty = replace(leg, limit=0)
                empty.sql = leg_sql(empty)
                _guard(statement, timeout, lambda one=empty: leg_runner.load(
                    registry, statement, deadline, one, session, 1))
                how = "read by Quarry, handed to Spark as Arrow"
            rows.append((f"leg {i}: {leg.name}; {how}", leg.source.name, leg.sql))
        rows.append(("engine", "spark", spark_sql(plan.engine_sql)))
        rows.append(("spark plan", "spark", session.explain(plan.engine_sql)))
    except SparkFailure as exc:
        raise exc.as_sql_error() from None
    return rows


def _estimate_spark(plan: Plan, session: SparkSession, registry: SourceRegistry,
                    deadline: float) -> None:
    """The sources' estimates of the legs Spark reads (a large one is read in parallel)
    and of the legs a dynamic filter may join."""
    linked = {id(leg) for link in plan.links for leg in (link.source, link.target)}
    engine = current_engine()
    dynamic.estimate_legs([leg for leg in plan.legs if session.reaches(leg.source)
                           or id(leg) in linked], registry, engine.sizes,
                          max(deadline - time.monotonic(), 0.1), engine.estimates,
                          current_app.config["FEDERATION_CATALOG_TTL_S"])


def spark_waits(plan: Plan, session: SparkSession, sizes: Any, most: int
                ) -> dict[str, list[Link]]:
    """The dynamic filters of a statement on Spark: ``dynamic.choose``'s, for the legs
    Spark reads over JDBC (a leg Quarry reads itself is read whole)."""
    return {name: links for name, links in dynamic.choose(plan.links, sizes, most).items()
            if session.reaches(links[0].target.source)}


def open_engine(plan: Plan, registry: SourceRegistry, statement: Statement, deadline: float,
                *, spark: bool = True) -> tuple[Any, str, str | None]:
    """The engine session a statement's legs go to (FEDERATION_ENGINE): (the session, the
    engine's name, why it is not the one configured: None when it is).

    ``auto`` sends it to Spark when its legs' estimated rows (the sources' statistics,
    or the rows they sent when last run) reach SPARK_MIN_ROWS; when Spark cannot be
    reached then, DuckDB runs it if its legs fit DuckDB's memory, and the note says so.
    ``spark``: Spark or a 503 naming the remote."""
    config = current_app.config
    mode = config["FEDERATION_ENGINE"]
    if not spark or mode == "duckdb":
        return current_engine().session(), "duckdb", None
    if mode == "auto":
        sizes = current_engine().sizes
        dynamic.estimate_legs(plan.legs, registry, sizes,
                              max(deadline - time.monotonic(), 0.1), current_engine().estimates,
                              config["FEDERATION_CATALOG_TTL_S"])
        rows = [sizes.get(leg.shape) or leg.estimate or 0 for leg in plan.legs]
        if sum(rows) < config["SPARK_MIN_ROWS"]:
            return current_engine().session(), "duckdb", None
    try:
        return current_spark().session(statement.id), "spark", None
    except EngineUnavailable as exc:
        if mode != "auto":
            raise
        # About 16 bytes a value once in the engine: a coarse bound, on the safe side for
        # numbers and short text.
        needed = sum(row * max(len(leg.columns), 1) * 16 for row, leg in
                     zip(rows, plan.legs, strict=True))
        if needed > config["FEDERATION_MEMORY"]:
            raise
        return current_engine().session(), "duckdb", (
            f"{exc.detail}; DuckDB ran it instead (its legs' estimated {sum(rows)} rows fit "
            "FEDERATION_MEMORY)")


def _named_sources(parsed: Any, registry: SourceRegistry, context: DataSource | None
                   ) -> list[DataSource]:
    """The data sources the statement's tables name (the legs' sources, known before the
    legs are planned)."""
    found: dict[str, DataSource] = {}
    for table in parsed.find_all(exp.Table):
        name = table.catalog or table.db
        source = (registry.get(name) if name else None) or context
        if source is not None:
            found.setdefault(source.name, source)
    return list(found.values())


def _timeout(sources: list[DataSource], requested: float | None) -> float:
    """The strictest time limit of the sources the statement names (a request may lower
    it, never raise it)."""
    limits = [effective_timeout(source, requested) for source in sources]
    return min(limits) if limits else float(requested or 30.0)


def _guard(statement: Statement, timeout: float, work: Any) -> Any:
    """Run one step; say who stopped it when it was stopped (a cancel, the time limit)."""
    try:
        return work()
    except EngineError as exc:  # a leg's rows going into the engine (out of memory …)
        if statement.stopped is not None:
            raise statement.error(timeout) from None
        raise engine_error(exc) from None
    except SqlError as exc:
        if statement.stopped is not None and exc.code in (ErrorCode.TIME_LIMIT,
                                                          ErrorCode.QUERY_FAILED,
                                                          ErrorCode.CANCELLED):
            raise statement.error(timeout) from None
        raise


def _engine(run: _Run) -> tuple[list[str], list[tuple], bool]:
    columns = run.start_engine()
    try:
        rows = _fetch(run.session.batches(), run.limits, run.session.json_columns)
    except (EngineError, SparkFailure) as exc:
        raise run.engine_failure(exc) from None
    truncated = len(rows) > run.limits.max_rows
    return shown_names(run.plan, columns), rows[:run.limits.max_rows], truncated


def _values(batch: Any, json: list[int]) -> list[list]:
    """The columns of one batch of the engine's answer as Python values; a JSON column's
    as the values its text holds (``engine.json_values``)."""
    return _parsed([column.to_pylist() for column in batch.columns], json)


def _parsed(columns: list[list], json: list[int]) -> list[list]:
    for i in json:
        columns[i] = json_values(columns[i])
    return columns


def _fetch(reader: Any, limits: Limits, json: list[int]) -> list[tuple]:
    rows: list[tuple] = []
    spent = 0
    for batch in reader:
        columns = [column.to_pylist() for column in batch.columns]
        if limits.max_bytes is not None:  # a JSON column counts as its text
            spent += sum([len(v) for values in columns for v in values
                          if v.__class__ is str or v.__class__ is bytes])
            if spent > limits.max_bytes:
                raise SqlError(ErrorCode.RESPONSE_TOO_LARGE,
                               f"The result is larger than the limit of {limits.max_bytes} "
                               "bytes; select fewer rows or columns")
        rows.extend(zip(*_parsed(columns, json), strict=True))
        if len(rows) > limits.max_rows:
            break
    return rows


class _Detached:
    """Stands for a pooled connection where the data path expects one (the engine has
    none): ``Statement.detach`` forgets its info, a stream closes it."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = {}

    def close(self) -> None:
        pass


@dataclass
class _EngineSource:
    """What a stream needs of its data source: a name (none: the answer's context is the
    request's) and a dialect (no driver type codes: Arrow types come from the values)."""

    name: str = ""
    dialect: str = "duckdb"


_ENGINE_SOURCE = _EngineSource()
