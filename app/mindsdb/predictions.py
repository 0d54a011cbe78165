"""Predictions in SQL: ``SELECT … FROM p.m WHERE a = 1`` and ``… FROM src.t JOIN p.m``.

The JOIN reads its left side through the read-only data path (``fetch_rows``: the gate,
the read-only connection, the time limit and the row cap of the data source), with the
WHERE conditions on that side and, when nothing else needs the full set, the LIMIT pushed
down; then every row is predicted in one batch by the same ``predict`` as REST.
"""

from __future__ import annotations

import copy
from typing import Any

from flask import current_app
from mindsdb_sql_parser.ast import (
    BinaryOperation,
    Function,
    Identifier,
    Join,
    NativeQuery,
    Select,
    Star,
)
from mindsdb_sql_parser.ast.mindsdb.latest import Latest

from ..errors import ModelNotFound
from ..federation import run as federation
from ..federation.rows import ROWS_TABLE, select_rows
from ..services import access
from ..services import models as model_service
from ..services.sqlviews import expand as expand_views
from ..sql.errors import ErrorCode, SqlError
from ..sql.gate import gate
from ..store import MLModel
from .context import Context, qualified
from .errors import service_errors
from .relation import Column, Relation, conjuncts, run_select
from .statements import Body, equality_row, table_body

# Columns a prediction adds besides the target itself.
_SUFFIXES = ("_confidence", "_explain", "_min", "_max")


def _predict(project: str, model: MLModel, rows: list[dict[str, Any]],
             whole_columns: bool = False) -> list[dict[str, Any]]:
    with service_errors({ModelNotFound: qualified(project, model.name)}):
        return model_service.predict(project, model.name, rows, whole_columns=whole_columns)


def _output_names(model: MLModel) -> set[str]:
    target = model.predict.lower()
    return {target, *(target + s for s in _SUFFIXES)}


def _alias(node: Any, default: str) -> str:
    alias = getattr(node, "alias", None)
    return str(alias.parts[-1]) if alias is not None else default


def predict_from_literals(statement: Select, project: str, model: MLModel,
                          ctx: Context) -> Body:
    """``SELECT … FROM p.m WHERE a = 1 AND b = 'x'``: one prediction from the literals."""
    row = equality_row(statement.where)
    predicted = _predict(project, model, [row])
    names = list(predicted[0]) if predicted else []
    qualifier = _alias(statement.from_table, model.name)
    relation = Relation.of(names, [tuple(p.get(n) for n in names) for p in predicted],
                           qualifier)
    columns, rows = run_select(statement, relation, where=False)
    return table_body(columns, rows, ctx)


# --- JOIN ------------------------------------------------------------------------------------

def _identifiers(node: Any) -> list[Identifier]:
    found: list[Identifier] = []

    def walk(item: Any) -> None:
        if isinstance(item, Identifier):
            found.append(item)
        elif isinstance(item, list | tuple):
            for child in item:
                walk(child)
        elif hasattr(item, "args") and isinstance(item.args, list | tuple):
            walk(item.args)
        if hasattr(item, "items") and isinstance(getattr(item, "items", None), list):
            walk(item.items)
    walk(node)
    return found


def _on_left(condition: Any, left_alias: str, model_alias: str, outputs: set[str]) -> bool:
    """Whether a WHERE condition reads only the data-source side (then it is pushed down)."""
    for identifier in _identifiers(condition):
        parts = [str(p) for p in identifier.parts]
        if len(parts) > 1:
            if parts[-2].lower() == model_alias.lower():
                return False
            if parts[-2].lower() != left_alias.lower():
                return False
        elif parts[0].lower() in outputs:
            return False
    return True


def _and(conditions: list[Any]) -> Any:
    node = None
    for condition in conditions:
        node = condition if node is None else BinaryOperation("and", args=[node, condition])
    return node


def predict_join(statement: Select, left: Any, right: Identifier, project: str,
                 model: MLModel, ctx: Context) -> Body:
    """``SELECT … FROM src.t AS t JOIN p.m AS m [WHERE …] [ORDER BY …] [LIMIT …]``."""
    if statement.from_table.condition is not None:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       "A JOIN with a model takes no ON condition: every row of the table "
                       "is predicted")
    model_alias = _alias(right, model.name)
    source, left_sql, left_alias = _left_side(left, ctx)
    forecasting = bool((model.training_options or {}).get("timeseries"))
    pushed, kept = [], []
    for condition in conjuncts(statement.where):
        if _is_latest(condition):
            if not forecasting:
                raise SqlError(ErrorCode.UNSUPPORTED,
                               f"LATEST compares with the end of a series: model "
                               f"'{model.name}' is no forecasting model (CREATE MODEL … "
                               "ORDER BY … HORIZON …)")
            continue  # the forecast starts after each series' latest row: nothing to filter
        (pushed if _on_left(condition, left_alias, model_alias, _output_names(model))
         else kept).append(condition)
    outer = Select(targets=[Star()], from_table=left_sql, where=_and(pushed))
    # A forecast reads each series' whole history: a LIMIT applies to its answer.
    if not kept and not statement.order_by and statement.limit is not None \
            and not forecasting:
        outer.limit = statement.limit
        outer.offset = statement.offset
        statement.offset = None  # applied by the data source
    registry = ctx.registry
    if source is None:
        # A view, or a subquery over several data sources: read through the caller's view
        # of the data sources, on one or several (app/federation/).
        columns, rows = federation.read_rows(
            outer.to_string(), registry, None, max_rows=current_app.config["SQL_MAX_ROWS"],
            timeout_s=None)
    else:
        data_source = registry.require(source)
        with service_errors():
            access.require_source(data_source.name)  # the JOIN reads it as its caller
        # On the data source, or by the engine for uploaded files.
        columns, rows = federation.read_rows(outer.to_string(), registry, data_source.name,
                                             max_rows=data_source.max_rows, timeout_s=None)
    inputs = [dict(zip(columns, row, strict=True)) for row in rows]
    if forecasting:
        if not inputs:
            # No history for the series asked: the groups the WHERE names by equality are
            # forecast from the training rows (an unknown one is an error naming it).
            inputs = [_named_group(pushed)]
        return _forecast_join(statement, project, model, inputs, left_alias, model_alias,
                              kept, ctx)
    # A table lacking an input column is a wrong shape (422); a value the model cannot read
    # only makes its own row's prediction flag it as unknown.
    predicted = _predict(project, model, inputs, whole_columns=True)
    out_names = list(predicted[0]) if predicted else [*columns, model.predict,
                                                       model.predict + "_confidence",
                                                       model.predict + "_explain"]
    left_keys = {c.lower() for c in columns}
    target = model.predict.lower()
    relation = Relation(
        [Column(c, left_alias) for c in columns]
        + [Column(n, model_alias, in_star=n.lower() not in left_keys or n.lower() == target)
           for n in out_names],
        [tuple(row) + tuple(p.get(n) for n in out_names)
         for row, p in zip(rows, predicted, strict=True)],
        prefer=model_alias, qualifiers={left_alias.lower(), model_alias.lower()})
    statement.where = _and(kept)
    if _needs_engine(statement):
        names, out = _engine_select(statement, relation, ctx)
    else:
        names, out = run_select(statement, relation)
    return table_body(names, out, ctx)


def _needs_engine(statement: Select) -> bool:
    """GROUP BY, HAVING or a function call (an aggregate, ``round``, …): what the service's
    own evaluator leaves to the engine."""
    if statement.group_by or statement.having:
        return True
    parts = [statement.targets, statement.where, statement.order_by]
    return any(isinstance(node, Function) for node in _nodes(parts))


def _nodes(item: Any) -> list[Any]:
    found: list[Any] = []
    stack = [item]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(node)
            continue
        if node is None:
            continue
        found.append(node)
        for name in ("args", "field", "arg"):
            child = getattr(node, name, None)
            if child is not None and not isinstance(child, str):
                stack.append(child)
    return found


def _engine_select(statement: Select, relation: Relation, ctx: Context
                   ) -> tuple[list[str], list[tuple]]:
    """The SELECT over the JOIN's rows, run by the engine (``federation/rows.py``)."""
    query = copy.deepcopy(statement)
    query.from_table = Identifier(parts=[ROWS_TABLE])
    columns = [(c.qualifier or "", c.name, c.in_star) for c in relation.columns]
    shown = [None if isinstance(t, Identifier | Star) or getattr(t, "alias", None)
             else t.to_string() for t in statement.targets]
    return select_rows(query.to_string(), columns, relation.rows, relation.prefer,
                       ctx.registry, max_rows=current_app.config["SQL_MAX_ROWS"],
                       timeout_s=float(current_app.config["SQL_TIMEOUT_S"]), shown=shown)


def _named_group(conditions: list[Any]) -> dict[str, Any]:
    """``t.g = 'x'`` conditions as the row {g: 'x'}; others (a time range) are left out."""
    row: dict[str, Any] = {}
    for condition in conditions:
        if isinstance(condition, BinaryOperation) and condition.op == "=":
            try:
                row.update(equality_row(condition))
            except SqlError:
                continue
    if not row:
        raise SqlError(ErrorCode.QUERY_FAILED,
                       "The table joined with the forecasting model has no rows for the "
                       "series asked and the WHERE names no group: nothing to forecast from")
    return row


def _is_latest(condition: Any) -> bool:
    """``t.t > LATEST`` (MindsDB's: forecast after the latest row of each series)."""
    return isinstance(condition, BinaryOperation) and \
        any(isinstance(arg, Latest) for arg in condition.args)


def _forecast_join(statement: Select, project: str, model: MLModel,
                   history: list[dict[str, Any]], left_alias: str, model_alias: str,
                   kept: list[Any], ctx: Context) -> Body:
    """The next HORIZON rows of each series the history rows hold. Their columns answer to
    both aliases (``t.store`` and ``m.store`` are the same value), listed once by ``*``."""
    forecast = _predict(project, model, history)
    names = list(forecast[0]) if forecast else []
    relation = Relation(
        [Column(n, model_alias) for n in names]
        + [Column(n, left_alias, in_star=False) for n in names],
        [tuple(p.get(n) for n in names) * 2 for p in forecast],
        prefer=model_alias, qualifiers={left_alias.lower(), model_alias.lower()})
    statement.where = _and(kept)
    out_names, out = run_select(statement, relation)
    return table_body(out_names, out, ctx)


def _left_side(left: Any, ctx: Context) -> tuple[str | None, Any, str]:
    """(data source — None for a subquery over several —, the FROM item to read on it, the
    alias its columns go by)."""
    if isinstance(left, NativeQuery):
        # MindsDB's ``src (native SQL) AS t`` (what mindsdb_sdk's model.predict(query) sends).
        source = _native_source(left, ctx)
        alias = _alias(left, "t")
        return source, _NativeFrom(left.query, alias), alias
    if isinstance(left, Select) and isinstance(left.from_table, NativeQuery):
        # mindsdb_sdk wraps its native query once more: (SELECT * FROM src (native)) AS t.
        native = left.from_table
        left.from_table = _NativeFrom(native.query, _alias(native, "native_rows"))
        return _native_source(native, ctx), left, _alias(left, "t")
    view = _view_side(left, ctx)
    if view is not None:
        return view
    if isinstance(left, Select):
        inner = left.from_table
        if isinstance(inner, Join):
            return None, left, _alias(left, "t")
        if not isinstance(inner, Identifier) or not ctx.is_source(str(inner.parts[0])):
            raise SqlError(ErrorCode.UNSUPPORTED,
                           "The subquery joined with a model must read one data source "
                           "table: (SELECT … FROM source.table) AS t")
        alias = _alias(left, "t")
        return str(inner.parts[0]), left, alias
    if isinstance(left, Identifier):
        parts = [str(p) for p in left.parts]
        if len(parts) > 1 and ctx.is_source(parts[0]):
            source, rest = parts[0], parts[1:]
        elif ctx.is_source(ctx.db):
            source, rest = ctx.db, parts
        else:
            raise SqlError(ErrorCode.UNKNOWN_SOURCE,
                           f"'{'.'.join(parts)}' names no data source: write "
                           f"<source>.<table> (data sources: "
                           f"{', '.join(ctx.registry.names()) or 'none'})")
        table = Identifier(parts=rest)
        alias = _alias(left, rest[-1])
        table.alias = Identifier(alias)
        return source, table, alias
    raise SqlError(ErrorCode.UNSUPPORTED,
                   "A model is joined with a data source table, a subquery on one, or "
                   "source (native query) AS t")


def _view_side(left: Any, ctx: Context) -> tuple[None, Any, str] | None:
    """A view (``p.v AS t``), or a subquery that reads views, as the JOIN's FROM item:
    the views replaced by their statements, read with the caller's rights on every data
    source they name; None when ``left`` names no view."""
    if isinstance(left, Identifier):
        parts = [str(p) for p in left.parts]
        if ctx.is_source(parts[0]) if len(parts) > 1 else ctx.is_source(ctx.db):
            return None
        alias = _alias(left, parts[-1])
        text = Select(targets=[Star()], from_table=Identifier(parts=parts)).to_string()
    elif isinstance(left, Select) and not isinstance(left.from_table, NativeQuery):
        alias = _alias(left, "t")
        inner = copy.deepcopy(left)
        inner.alias = None
        inner.parentheses = False
        text = inner.to_string()
    else:
        return None
    expanded = expand_views(text, ctx.db, ctx.registry)
    if expanded is None:
        return None
    return None, _NativeFrom(expanded, alias), alias


def _native_source(native: NativeQuery, ctx: Context) -> str:
    """The data source a ``name (native SQL)`` reads: ``name``, or when ``name`` is a project
    (``server.query(sql)`` of mindsdb_sdk is sent as ``mindsdb (sql)``), the one data source
    that the SQL itself names (``SELECT … FROM demo.iris``)."""
    name = str(native.integration.parts[-1])
    if ctx.is_source(name):
        return name
    gated = gate(native.query, ctx.registry, None)
    if gated.source is None:
        raise SqlError(ErrorCode.UNKNOWN_SOURCE,
                       f"'{name}' is not a data source and the query joined with the model "
                       f"names none: write <source>.<table> in it (data sources: "
                       f"{', '.join(ctx.registry.names()) or 'none'})")
    return gated.source.name


class _NativeFrom(Identifier):
    """``(native SQL) AS alias`` inside the SELECT sent to the data source, verbatim."""

    def __init__(self, query: str, alias: str) -> None:
        super().__init__(parts=[alias])
        self._query = query.strip().rstrip(";")
        self._alias_name = alias

    def get_string(self, *args: Any, **kwargs: Any) -> str:
        return f"({self._query}) AS {self._alias_name}"

    def to_string(self, *args: Any, **kwargs: Any) -> str:
        return self.get_string()
