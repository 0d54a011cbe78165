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

from ..sql import execute
from ..sql.errors import ErrorCode, SqlError
from ..sql.execute import effective_timeout
from ..sql.running import CANCELLED, TIME_LIMIT, Statement
from ..sql.sources import DataSource, SourceRegistry
from ..sql.stream import Cursor, TableStream
from ..sql.syntax import parse_sqlglot
from . import dynamic
from . import legs as leg_runner
from .engine import EngineError, current_engine, engine_error
from .plan import Leg, Plan, leg_sql, parse, shown_names, split, tables_of
from .route import route

EXPLAIN_COLUMNS = ["step", "source", "sql"]
# Legs fetched at once per statement: each holds a connection of its source's pool.
MAX_PARALLEL_LEGS = 4
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


@dataclass
class FederatedResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    sources: list[str]


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
    return FederatedResult(columns, rows, truncated, sources_of(run.plan))


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

    def fetch(size: int) -> list[tuple]:
        try:
            while len(pending) < max(size, 1):
                batch = next(batches, None)
                if batch is None:
                    break
                pending.extend(zip(*[c.to_pylist() for c in batch.columns], strict=True))
        except EngineError as exc:
            raise run.engine_failure(exc) from None
        rows = pending[:size]
        del pending[:size]
        return rows

    cursor = Cursor(names, fetch, lambda _complete: run.close())
    stream = TableStream(_ENGINE_SOURCE, _Detached(), cursor, run.statement, run.timeout,
                         limits.max_rows)
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
        # A write is refused here, before any leg runs.
        self.parsed = parse(query, registry, limits.params)
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
        self.session = current_engine().session()
        self.plan: Plan | None = None
        self._timer: threading.Timer | None = None
        self._closed = False

    def load(self, *, empty: bool = False) -> None:
        """Plan the legs (reading each table's columns) and run them into the engine,
        the tables' descriptions and then the legs each in parallel. ``empty``: each leg
        runs with LIMIT 0 (its source checks and describes it, and sends no row), so the
        engine statement only describes its answer."""
        registry, deadline = self.registry, self.deadline
        tables = tables_of(self.parsed, registry, self.context, self.given)
        columns = dict(zip(
            [(source.name, table.sql()) for source, table in tables],
            self._parallel([lambda child, s=source, t=table: leg_runner.describe(
                registry, child, deadline, s, t) for source, table in tables], "json"),
            strict=True))
        self.plan = split(self.parsed, registry, self.context,
                          lambda source, table: columns[(source.name, table.sql())],
                          {name: table.columns for name, table in self.given.items()})
        for name, table in self.given.items():
            names = [column.lower() for column in table.columns]
            self.session.append(name, leg_runner.record_batch(
                [] if empty else table.rows, names, [None] * len(names)))
        self.statement.legs = self.plan.legs
        engine, most = current_engine(), current_app.config["FEDERATION_DYNAMIC_KEYS"]
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

        def load_leg(child: Statement, leg: Leg) -> int:
            try:
                sql = None
                links = waits.get(leg.name)
                if links:  # the small legs first: their keys cut this one
                    for link in links:
                        self._wait(child, loaded[link.source.name])
                    if any(link.source.name in failed for link in links):
                        raise child.error(self.timeout)  # the source's failure answers
                    sql = dynamic.filtered_sql(leg, links, self.session, most)
                leg.state = "running"
                # Legs are read as for an Arrow answer: PostgreSQL then sends record
                # batches through ADBC (sql/native.py) when it can, the fastest way in.
                rows = leg_runner.load(registry, child, deadline, leg, self.session,
                                       self.limits.max_leg_rows, sql)
                if sql is not None:
                    dynamic.judge(leg, links, rows, engine.sizes)
                elif not empty:
                    dynamic.learn(leg, rows, self.plan.links, self.session, engine.sizes,
                                  most)
                leg.state = "done"
                return rows
            except BaseException:
                failed.add(leg.name)
                raise
            finally:
                loaded[leg.name].set()

        # Sources are submitted before the legs that wait for them: a waiting leg never
        # holds the last worker a source needs.
        self._parallel([lambda child, leg=leg: load_leg(child, leg)
                        for leg in dynamic.order(self.plan.legs, waits)], "arrow")

    def _estimate(self) -> None:
        """Each linked leg's rows, as its source estimates them (``dynamic.estimate``)."""
        dynamic.estimate(self.plan.legs, self.plan.links, self.registry,
                         current_engine().sizes, self.deadline - time.monotonic())

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

        parent.reattach("", stop_all)
        if not jobs:  # a statement over given tables only
            return []
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
        except EngineError as exc:
            raise self.engine_failure(exc) from None

    def engine_failure(self, exc: EngineError) -> SqlError:
        if exc.interrupted or self.statement.stopped is not None:
            return self.statement.error(self.timeout)
        return engine_error(exc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self.statement.detach(_Detached())
        self.session.close()


def explain(query: str, registry: SourceRegistry, context: DataSource | None,
            timeout_s: float | None, statement: Statement | None,
            params: dict[str, Any] | None = None) -> list[tuple[str, ...]]:
    """Rows of EXPLAIN: each leg (its source and the SQL sent to it), then the engine."""
    statement = statement or Statement(uuid.uuid4().hex)
    parsed = parse(query, registry, params)
    timeout = _timeout(_named_sources(parsed, registry, context), timeout_s)
    deadline = time.monotonic() + timeout
    try:
        plan = split(parsed, registry, context, lambda source, table: _guard(
            statement, timeout, lambda: leg_runner.describe(registry, statement, deadline,
                                                            source, table)))
    finally:
        statement.detach(_Detached())
    sizes = current_engine().sizes
    dynamic.estimate(plan.legs, plan.links, registry, sizes, deadline - time.monotonic())
    waits = dynamic.choose(plan.links, sizes, current_app.config["FEDERATION_DYNAMIC_KEYS"])
    rows = [("; ".join([f"leg {i}: {leg.name}", dynamic.size_note(leg, sizes)]
                       + [dynamic.describe(link) for link in waits.get(leg.name, ())]),
             leg.source.name, leg.sql)
            for i, leg in enumerate(plan.legs, 1)]
    rows.append(("engine", "duckdb", plan.engine_sql))
    return rows


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
        rows = _fetch(run.session.batches(), run.limits)
    except EngineError as exc:
        raise run.engine_failure(exc) from None
    truncated = len(rows) > run.limits.max_rows
    return shown_names(run.plan, columns), rows[:run.limits.max_rows], truncated


def _fetch(reader: Any, limits: Limits) -> list[tuple]:
    rows: list[tuple] = []
    spent = 0
    for batch in reader:
        columns = [column.to_pylist() for column in batch.columns]
        chunk = list(zip(*columns, strict=True))
        rows.extend(chunk)
        if limits.max_bytes is not None:
            spent += sum([len(v) for row in chunk for v in row
                          if v.__class__ is str or v.__class__ is bytes])
            if spent > limits.max_bytes:
                raise SqlError(ErrorCode.RESPONSE_TOO_LARGE,
                               f"The result is larger than the limit of {limits.max_bytes} "
                               "bytes; select fewer rows or columns")
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
