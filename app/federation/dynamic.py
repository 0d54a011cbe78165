"""Dynamic filters: a large leg reads only the rows whose join key a small leg has.

``plan.find_links`` finds the equalities between two legs' columns that allow it (inner
joins, WHERE conjuncts, the NULL side of an outer join). Which leg waits for which is
decided by their sizes: the rows each leg sent the last time the same query (literals
aside) ran in this process (``Sizes``). A leg smaller than the other, and of at most
FEDERATION_DYNAMIC_KEYS rows (or distinct keys) or a tenth of the other's rows, is read
first; once its rows are in the engine, the other leg's query gets one more condition:

- ``column IN (v1, v2, …)`` with the small leg's distinct non-NULL keys, when there are at
  most FEDERATION_DYNAMIC_KEYS of them (each value a literal written by sqlglot in the
  source's dialect, never pasted text);
- ``column BETWEEN min AND max`` for integer keys beyond that;
- ``FALSE`` when the small leg has no key at all.

Sizes come first from the sources themselves: before any leg runs, each source estimates
the rows of its leg from its own statistics (``estimate``: PostgreSQL's planner, MariaDB's
EXPLAIN, a bounded count on SQLite, a file's Parquet metadata), so a statement is planned
well the first time it runs, on whichever worker gets it. The rows a leg of the same shape
(literals aside) sent when it last ran in this process, when known, replace the estimate:
they refine a plan, they never gate it.

A leg that reads a whole table (no condition) gives as keys every value its column holds.
When the sources' statistics count at least almost as many of them (``USELESS``) as the
other leg's column holds values (``sql/estimate.distinct_values``: a table's key and a column
referring to it), the filter would keep nearly every row: the other leg does not wait for
it (``Link.covered``), from the first run on. Statistics cannot tell whether two sets of
values overlap; equally many values on both sides are taken to be the same ones.

Keys are compared only with a column of the same kind (integers, exact decimals, dates or
timestamps with their own kind; text with text) of a source that declares its types
(PostgreSQL, MariaDB/MySQL, and SQLite's declared INTEGER and TEXT columns); a source that
compares more loosely (MariaDB ignores case and trailing spaces) only sends a few more rows,
and the engine joins them as before. Text keys go only as an IN list, never as a range: the
sources' collations order text differently from the engine. A filter that kept most of its
leg's rows is not waited for again.

Text keys meet an integer column as the engine compares them: DuckDB casts the text to an
integer, so the keys are the text cast by DuckDB itself (``TRY_CAST`` to BIGINT; text that is no
integer matches no row). A knowledge base's ids are text in MindsDB's shape and a table's
ids are often integers: its hits (a table the engine holds before any leg runs, ``Held``)
cut the legs joined to them on the id, whatever their size.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from flask import current_app
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from ..lru import LruCache
from ..sql.estimate import distinct_values, estimate_rows, table_rows
from ..sql.gate import gate
from ..sql.sources import DataSource, SourceRegistry
from . import files
from .engine import Estimates, Session, Sizes
from .plan import Held, Leg, Link, component, leg_sql, source_column

# A leg with more rows than FEDERATION_DYNAMIC_KEYS still gives its keys (as a range) to a
# leg this many times its size.
SMALLER = 10
# A leg waits for another's keys only when it is at least this many times that leg's size:
# the wait delays it by the whole of the other leg's read, which the rows it then leaves
# behind repay only when they are many. (TPC-H Q14 at SF 0.1: 20 000 parts in SQLite waited
# for the 7 630 line items of a month in PostgreSQL, 45-55 ms; read at once beside them,
# 33 ms, against 16-22 ms on one database.)
WAIT_RATIO = 4
# Filters that keep this share of a leg's rows or more are not worth waiting for.
USELESS = 0.8
# Sources whose statistics count a column's values (``sql/estimate.distinct_values``).
_COUNTED = ("postgresql", "mysql", "sqlite")
# From this many keys on, a PostgreSQL leg gets them as a VALUES list (``_as_rows``).
ROWS_FROM = 300
_ROW_KINDS = ("int", "decimal", "date", "timestamp")


def choose(links: list[Link], sizes: Sizes, max_keys: int) -> dict[str, list[Link]]:
    """Per target leg (its name), the links whose source leg it waits for: a source known
    to be at most a WAIT_RATIO-th of the target (or smaller, where its size is only a
    bound: ``_measured``) whose keys fit an IN list
    (at most ``max_keys`` rows, or distinct keys when they were counted) or that has a
    tenth of the target's rows or less (waiting for it costs little beside the target).
    Sizes order the legs strictly (ties by leg number), so no two legs wait for each
    other. A table the engine holds before the legs run (``Held``: a knowledge base's
    hits) gives its keys to every leg it is linked to."""
    if max_keys <= 0:
        return {}
    chosen: dict[str, list[Link]] = {}
    for link in links:
        if isinstance(link.source, Held):  # in the engine already: nothing to wait for
            chosen.setdefault(link.target.name, []).append(link)
            continue
        small, large = size_of(link.source, sizes), size_of(link.target, sizes)
        if small is None or large is None or link.covered:  # not estimated, or useless
            continue
        if (small, link.source.index) >= (large, link.target.index) or \
                sizes.get(_useless_shape(link)):
            continue
        keys = sizes.get(_keys_shape(link))
        if small > max_keys and (keys is None or keys > max_keys) and small * SMALLER > large:
            continue
        if small * WAIT_RATIO > whole_size(link.target, sizes, large) and \
                _measured(link.source, sizes):
            continue
        chosen.setdefault(link.target.name, []).append(link)
    return chosen


def size_of(leg: Leg, sizes: Sizes) -> int | None:
    """The leg's rows: as last read whole in this process, else its source's estimate, or
    the rows it sent when last read with dynamic filters if fewer (a source's estimate can
    be far off: MariaDB, without histograms, takes every condition to keep every row)."""
    known = sizes.get(leg.shape)
    if known is not None:
        return known
    sent = sizes.get(_sent_shape(leg))
    if sent is not None and (leg.estimate is None or sent < leg.estimate):
        return sent
    return leg.estimate


def _measured(leg: Leg, sizes: Sizes) -> bool:
    """Whether the leg's size is a measure, not only a bound: rows it sent in this process,
    PostgreSQL's estimate (its statistics weigh each condition), or the rows of a whole
    table. MariaDB/MySQL, without histograms, takes a condition or a join to keep every
    row, and SQLite's estimate is its table's rows: their estimate of a narrower leg only
    bounds it (TPC-H Q5's 3 014 customers of Asia at scale 0.1, joined with nation and
    region in MariaDB: estimated 36 875), and a leg that small is worth waiting for."""
    if sizes.get(leg.shape) is not None or sizes.get(_sent_shape(leg)) is not None:
        return True
    return leg.source.dialect == "postgresql" or (not leg.joined and not leg.filters)


def whole_size(leg: Leg, sizes: Sizes, default: int) -> int:
    """The leg's rows without dynamic filters: as last read whole in this process, else
    its source's estimate (``size_of`` may give the fewer rows a filter left, which says
    what the filter is worth, not what a read without it would cost)."""
    known = sizes.get(leg.shape)
    if known is not None:
        return known
    return leg.estimate if leg.estimate is not None else default


def size_note(leg: Leg, sizes: Sizes) -> str:
    """How EXPLAIN shows what the plan knows of a leg's size."""
    known = sizes.get(leg.shape)
    if known is not None:
        return f"{known} rows when last run"
    sent = sizes.get(_sent_shape(leg))
    if sent is not None and (leg.estimate is None or sent < leg.estimate):
        return f"{sent} rows when last run with dynamic filters"
    if leg.estimate is not None:
        return f"estimated {leg.estimate} rows by {leg.source.name}"
    return "size not estimated"


def estimate(legs: list[Leg], links: list[Link], registry: SourceRegistry, sizes: Sizes,
             timeout_s: float, kept: Estimates, ttl_s: float) -> None:
    """Ask each source the rows of its legs that a dynamic filter may join (see
    ``estimate_legs``), and, for a link whose source leg reads a whole table, how many
    values its column and the target's column hold (``covered``), all at once. A link from
    a held table (a knowledge base's hits) needs neither: its keys are known already."""
    links = [link for link in links if not isinstance(link.source, Held)]
    linked = {id(leg): leg for link in links for leg in (link.source, link.target)}
    columns: dict[tuple[str, str], tuple[DataSource, exp.Table, str]] = {}
    for link in links:
        if whole(link.source) and link.target.source.dialect in _COUNTED:
            for leg, name in ((link.source, link.source_column),
                              (link.target, link.target_column)):
                table, column = _table_column(leg, name)
                columns.setdefault(_distinct_key(leg.source, table, column),
                                   (leg.source, table, column))
    counted: dict[tuple[str, str], int | None] = {}
    app = current_app._get_current_object()

    def count(key: tuple[str, str], source: DataSource, table: exp.Table,
              column: str) -> None:
        known = kept.get(key) if ttl_s > 0 else None
        now = time.monotonic()
        if known is not None and known[0] is source and now - known[1] < ttl_s:
            counted[key] = known[2] or None
            return
        with app.app_context():
            found = distinct_values(source, *_stored_names(source, table), column,
                                    timeout_s)
        counted[key] = found
        if ttl_s > 0:
            kept.put(key, (source, now, found or 0))  # 0: the source keeps no figure

    estimate_legs(list(linked.values()), registry, sizes, timeout_s, kept, ttl_s,
                  [(args[0].name, lambda key=key, args=args: count(key, *args))
                   for key, args in columns.items()])
    for link in links:
        if not whole(link.source) or link.target.source.dialect not in _COUNTED:
            continue
        keys = counted.get(_distinct_key(link.source.source,
                                         *_table_column(link.source, link.source_column)))
        values = counted.get(_distinct_key(link.target.source,
                                           *_table_column(link.target, link.target_column)))
        link.covered = keys is not None and values is not None and keys >= values * USELESS
    for link in links:  # after every link's own count: a covered one covers its equals
        link.covered = link.covered or any(
            other.covered and other.source is link.source
            and other.source_column == link.source_column and other.target is link.target
            and _equal_in_leg(link.target, link.target_column, other.target_column)
            for other in links)


def _equal_in_leg(leg: Leg, first: str, second: str) -> bool:
    """Whether the leg's own join makes its columns ``first`` and ``second`` equal in every
    row it sends (``customer.c_nationkey = nation.n_nationkey`` in one MariaDB leg of TPC-H
    Q5): keys that keep about every row by one keep about every row by the other. MariaDB
    counts 50 values in c_nationkey's index, 25 in n_nationkey's key; the 25 nations of
    the suppliers cut neither."""
    if not leg.joined:
        return False
    pairs = [{(c.table or "").lower() + "." + c.name.lower()
              for c in (condition.this, condition.expression)}
             for condition in leg.filters if isinstance(condition, exp.EQ)
             and isinstance(condition.this, exp.Column)
             and isinstance(condition.expression, exp.Column)]
    return _origin_key(leg, second) in component(_origin_key(leg, first), pairs)


def _origin_key(leg: Leg, name: str) -> str:
    column = source_column(leg, name)
    return f"{column.table.lower()}.{column.name.lower()}"


def whole(leg: Leg) -> bool:
    """Whether the leg reads every row of one table (no condition, no limit): its keys
    are then every value its column holds, which the source's statistics count."""
    return not leg.joined and not leg.filters and leg.limit is None and \
        leg.source.dialect in _COUNTED


def _table_column(leg: Leg, name: str) -> tuple[exp.Table, str]:
    """The table (as its source names it) and column that the leg's column ``name`` reads."""
    column = source_column(leg, name)
    table = next((t for t, alias in leg.joined if alias.lower() == column.table.lower()),
                 leg.table)
    return table, column.name


def _stored_names(source: DataSource, table: exp.Table) -> tuple[str | None, str]:
    """The table's schema (None: the connection's own) and name as the source's catalog
    holds them: PostgreSQL folds a name written without quotes to lower case."""

    def stored(part: exp.Expression | None) -> str | None:
        if not isinstance(part, exp.Identifier) or not part.name:
            return None
        folded = source.dialect == "postgresql" and not part.args.get("quoted")
        return part.name.lower() if folded else part.name

    return stored(table.args.get("db")), stored(table.this) or table.name


def _distinct_key(source: DataSource, table: exp.Table, column: str) -> tuple[str, str]:
    """How ``kept`` holds a column's count of values beside the legs' estimates."""
    return source.name.lower(), f"distinct values of {table.sql()}.{column}"


def estimate_legs(legs: list[Leg], registry: SourceRegistry, sizes: Sizes,
                  timeout_s: float, kept: Estimates, ttl_s: float,
                  more: list[tuple[str, Callable[[], None]]] = ()) -> None:
    """Ask each source the rows of ``legs``, the sources at once (legs whose size this
    process knows already are not asked, nor a leg of the same SQL on the same source
    asked less than ``ttl_s`` ago: ``kept``); sets ``leg.estimate``. ``more``: other
    questions to the sources (by source name), asked with them. One source's questions
    are asked one after another, on one connection of its pool (a worker opened it at its
    start) rather than on as many new ones."""
    now = time.monotonic()
    wanted = []
    for leg in legs:
        if sizes.get(leg.shape) is not None:
            continue
        known = kept.get((leg.source.name.lower(), leg.sql)) if ttl_s > 0 else None
        if known is not None and known[0] is leg.source and now - known[1] < ttl_s:
            leg.estimate = known[2]
        else:
            wanted.append(leg)
    app = current_app._get_current_object()

    def one(leg: Leg) -> None:
        with app.app_context():
            if files.is_file_source(leg.source):
                leg.estimate = files.row_count(leg)
                return
            gated = gate(leg.sql, registry, leg.source.name)
            source = gated.source or leg.source
            if whole(leg) and source.dialect == "sqlite":  # its statistics, if analysed
                leg.estimate = table_rows(source, *_stored_names(source, leg.table),
                                          timeout_s)
            if leg.estimate is None and not gated.param_names:
                leg.estimate = estimate_rows(source, gated.sql, timeout_s)
        if leg.estimate is not None and ttl_s > 0:
            kept.put((leg.source.name.lower(), leg.sql), (leg.source, now, leg.estimate))

    by_source: dict[str, list[Callable[[], None]]] = {}
    for name, job in [(leg.source.name, lambda leg=leg: one(leg)) for leg in wanted] + \
            list(more):
        by_source.setdefault(name, []).append(job)

    def ask(jobs: list[Callable[[], None]]) -> None:
        for job in jobs:
            job()

    if len(by_source) <= 1:
        for jobs in by_source.values():
            ask(jobs)
        return
    with ThreadPoolExecutor(max_workers=min(len(by_source), 4),
                            thread_name_prefix="quarry-estimate") as pool:
        for future in [pool.submit(ask, jobs) for jobs in by_source.values()]:
            future.result()


def learn(leg: Leg, rows: int, links: list[Link], session: Session, sizes: Sizes,
          max_keys: int) -> None:
    """Remember the rows of a leg read whole, and, when it might give its keys to a larger
    leg, how many distinct keys it has (a leg of many rows may have few: orders of one
    quarter, a few of each customer)."""
    sizes.put(leg.shape, rows)
    if rows > max_keys * SMALLER:  # counting them would cost more than it may save
        return
    for link in links:
        if link.source is leg and rows > max_keys:
            sizes.put(_keys_shape(link), session.distinct(leg.name, link.source_column))


def judge(leg: Leg, links: list[Link], rows: int, sizes: Sizes) -> None:
    """After a leg was read with the filters of ``links``: its rows are kept (a size for
    the next plans where the source's estimate says more); when they kept most of its rows
    (TPC-H Q5's customers of Asia cut to the nations of all suppliers), the leg need not
    wait for those legs again; it is read at once, beside them."""
    sizes.put(_sent_shape(leg), rows)
    whole = sizes.get(leg.shape)
    if whole and rows >= whole * USELESS:
        for link in links:
            sizes.put(_useless_shape(link), 1)


def _sent_shape(leg: Leg) -> str:
    return f"{leg.shape}#sent"


def _keys_shape(link: Link) -> str:
    return f"{link.source.shape}#{link.source_column}"


def _useless_shape(link: Link) -> str:
    return f"{link.target.shape}#{link.target_column}<{_keys_shape(link)}"


def order(legs: list[Leg], waits: dict[str, list[Link]]) -> list[Leg]:
    """The legs with every source before the legs that wait for it."""
    done: list[Leg] = []
    seen: set[str] = set()

    def visit(leg: Leg | Held) -> None:
        if leg.name in seen or isinstance(leg, Held):  # a held table is no leg to run
            return
        seen.add(leg.name)
        for link in waits.get(leg.name, ()):
            visit(link.source)
        done.append(leg)

    for leg in legs:
        visit(leg)
    return done


def describe(link: Link) -> str:
    """How EXPLAIN shows a dynamic filter."""
    column = source_column(link.target, link.target_column)
    if isinstance(link.source, Held):
        return (f"filtered by the {link.source_column} values of {link.source.label}: "
                f"{column.sql(dialect=link.target.source.sqlglot_dialect)} IN (…)")
    return (f"filtered by keys of {link.source.name} at run time: "
            f"{column.sql(dialect=link.target.source.sqlglot_dialect)} IN "
            f"(the values of {link.source_column})")


def filtered_sql(leg: Leg, links: list[Link], session: Session, max_keys: int
                 ) -> str | None:
    """The leg's query with the conditions its links allow now that their source legs
    are in the engine (None: no condition applies); notes each one in ``leg.dynamic``."""
    glot = leg.source.sqlglot_dialect
    forms: list[tuple[str, str]] = []  # per condition: its column, and its kind of values
    targets: list[exp.Column] = []     # per condition: that column
    texts: list[tuple[str, ...]] = []  # per condition: the values, written in the dialect
    for link in links:
        wanted = link.target.kinds.get(link.target_column)
        found = session.keys(link.source.name, link.source_column, max_keys,
                             as_int=wanted == "int")
        if found is None:
            continue
        kind, values, low, high = found
        if kind != wanted:
            continue
        target = source_column(leg, link.target_column)
        column = target.sql(dialect=glot)
        label = link.source.label if isinstance(link.source, Held) else link.source.name
        if values is not None and not values:
            forms.append((column, "none"))
            targets.append(target)
            texts.append(())
            leg.dynamic.append(f"no rows: {label} has no key")
        elif values is not None:
            if kind == "text" and any("\x00" in v for v in values):
                continue  # no database text holds NUL; the filter is left out
            rows = _as_rows(leg, kind, values)
            forms.append((column, "rows" if rows else "in"))
            targets.append(target)
            texts.append((_literals(values, kind, glot, rows=rows),))
            leg.dynamic.append(f"{column} IN {'(VALUES …) ' if rows else ''}"
                               f"{len(values)} keys of {label}")
        elif kind != "text" and low is not None:  # collations order text apart
            bounds = (_literal(low, kind).sql(dialect=glot),
                      _literal(high, kind).sql(dialect=glot))
            forms.append((column, "range"))
            targets.append(target)
            texts.append(bounds)
            leg.dynamic.append(f"{column} BETWEEN {bounds[0]} AND {bounds[1]} "
                               f"(the key range of {label})")
    if not forms:
        return None
    token, template = _template(leg, forms, targets)
    return re.sub(token + r"(\d+)_(\d+)x",
                  lambda m: texts[int(m.group(1))][int(m.group(2))], template)


# The queries of filtered legs, each with a marker where its conditions' values go, by
# the leg's query and its conditions' columns and kinds (``filtered_sql``): a leg's text
# is written by sqlglot once (3-4 ms for TPC-H Q5's orders and lineitem), not at each run.
_TEMPLATES: LruCache[tuple, tuple[str, str]] = LruCache(512)


def _template(leg: Leg, forms: list[tuple[str, str]], targets: list[exp.Column]
              ) -> tuple[str, str]:
    """(marker, the leg's query with condition ``i``'s ``j``-th text written as
    ``{marker}{i}_{j}x``): a marker of random letters, which no query can hold by chance.
    ``targets``: the column of each condition (``forms`` holds its text)."""
    key = (leg.source.name.lower(), leg.source.sqlglot_dialect, leg.sql, tuple(forms))
    kept = _TEMPLATES.get(key)
    if kept is not None:
        return kept
    token = f"quarrykeys{secrets.token_hex(8)}"
    conditions: list[exp.Expression] = []
    for i, ((_, form), target) in enumerate(zip(forms, targets, strict=True)):
        if form == "none":
            conditions.append(exp.false())
        elif form == "range":
            conditions.append(exp.Between(this=target, low=exp.var(f"{token}{i}_0x"),
                                          high=exp.var(f"{token}{i}_1x")))
        else:
            conditions.append(exp.In(this=target, expressions=[exp.var(f"{token}{i}_0x")]))
    made = (token, leg_sql(leg, conditions))
    _TEMPLATES.put(key, made)
    return made


def _as_rows(leg: Leg, kind: str, values: list) -> bool:
    """Whether the keys go to the leg as a list of rows, ``IN (VALUES (v1), (v2), …)``,
    rather than ``IN (v1, v2, …)``: for PostgreSQL, from ROWS_FROM keys of a kind that
    compares the same both ways. PostgreSQL plans a semi-join with a VALUES list as a join
    with a table of that many rows, where a list of constants is a filter on the table
    (docs/decisions.md has the measures). In TPC-H Q3 and Q5 the orders of 3 000 customers,
    joined with lineitem in the same leg, were read with a hash join over all of lineitem
    by one process; with the VALUES list, Q5's leg looks each order's lines up by key, as
    the single database does, and Q3's runs its hash join in parallel (the legs at SF 0.1:
    0.45 → 0.36 s and 0.76 → 0.47 s). Below about 300 keys the constants do better: the
    table's own index on the column finds their rows. Text keys stay constants: a VALUES
    list is of type text, compared with a ``char(n)`` column otherwise than they are."""
    return leg.source.dialect == "postgresql" and kind in _ROW_KINDS and \
        len(values) >= ROWS_FROM


def _literals(values: list, kind: str, glot: str, *, rows: bool = False) -> str:
    """``v1, v2, …`` in the dialect (``VALUES (v1), (v2), …`` with ``rows``): integers as
    Python writes them (digits and a sign, the same in every dialect: 3 000 keys in 0.3 ms
    where sqlglot takes 8-17 ms), any other value a literal written by sqlglot (quoted and
    escaped as the dialect needs)."""
    if kind == "int":
        written = [str(int(value)) for value in values]
    else:
        generator = Dialect.get_or_raise(glot).generator()
        written = [generator.sql(_literal(value, kind)) for value in values]
    if rows:
        return "VALUES " + ", ".join([f"({value})" for value in written])
    return ", ".join(written)


def _literal(value: object, kind: str) -> exp.Expression:
    """A key as a literal of its kind: numbers as numbers, dates and timestamps as typed
    strings (ISO text, which every source reads the same way), text as a string."""
    if kind in ("int", "decimal"):
        return exp.Literal.number(str(value))
    if kind == "date":
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.Type.DATE)
    if kind == "timestamp":
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")),
                        exp.DataType.Type.TIMESTAMP)
    return exp.Literal.string(value)
