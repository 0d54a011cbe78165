"""A small in-memory relation and an evaluator of MindsDB-dialect expressions over it.

The service's own tables (``p.models``, ``p.skills``, ``information_schema.databases``, a
model's predictions) are short lists built from the store, not rows of a database: WHERE,
ORDER BY, LIMIT and the column list are applied here, on the tree ``mindsdb_sql_parser``
built. Comparisons follow MySQL, whose dialect MindsDB speaks: strings compare without
regard to case, and a boolean equals 1 / '1' / 'true' (``mindsdb_sdk`` filters
``ACTIVE = '1'``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from mindsdb_sql_parser.ast import (
    BetweenOperation,
    BinaryOperation,
    Constant,
    Identifier,
    NullConstant,
    Select,
    Star,
    Tuple,
    TypeCast,
    UnaryOperation,
)

from ..sql.errors import ErrorCode, SqlError

Row = tuple[Any, ...]
Getter = Callable[[Row], Any]


@dataclass
class Column:
    name: str
    qualifier: str | None = None   # the table or alias the column belongs to
    in_star: bool = True           # listed by a bare ``*``


@dataclass
class Relation:
    columns: list[Column]
    rows: list[Row]
    prefer: str | None = None      # qualifier that wins when a bare name is ambiguous
    qualifiers: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, names: list[str], rows: list[Row], qualifier: str | None = None) -> Relation:
        return cls([Column(n, qualifier) for n in names], rows,
                   qualifiers={qualifier.lower()} if qualifier else set())

    def find(self, parts: list[Any]) -> int | None:
        """Index of the column ``parts`` names (``name`` or ``qualifier.name``), or None."""
        name = str(parts[-1]).lower()
        qualifier = str(parts[-2]).lower() if len(parts) > 1 else None
        matches = [i for i, c in enumerate(self.columns) if c.name.lower() == name
                   and (qualifier is None or (c.qualifier or "").lower() == qualifier)]
        if not matches:
            return None
        if len(matches) > 1 and self.prefer:
            preferred = [i for i in matches if (self.columns[i].qualifier or "") == self.prefer]
            if preferred:
                return preferred[0]
        return matches[0]

    def require(self, parts: list[Any]) -> int:
        index = self.find(parts)
        if index is None:
            known = ", ".join(dict.fromkeys(c.name for c in self.columns))
            raise SqlError(ErrorCode.QUERY_FAILED,
                           f"Column not found: {'.'.join(str(p) for p in parts)} "
                           f"(columns: {known})")
        return index


# --- values --------------------------------------------------------------------------------

_TRUE = {"1", "true", "t", "yes"}
_FALSE = {"0", "false", "f", "no"}


def _comparable(a: Any, b: Any) -> tuple[Any, Any]:
    """Bring two values to one type the MySQL way, so that ``<``/``=`` mean something."""
    if isinstance(a, bool) or isinstance(b, bool):
        return _as_bool(a), _as_bool(b)
    if isinstance(a, int | float) and isinstance(b, str):
        return a, _as_number(b)
    if isinstance(a, str) and isinstance(b, int | float):
        return _as_number(a), b
    if isinstance(a, datetime | date) or isinstance(b, datetime | date):
        return _as_text(a), _as_text(b)
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return _as_text(a).lower(), _as_text(b).lower()
    if isinstance(a, str) and isinstance(b, str):
        return a.lower(), b.lower()
    return a, b


def _as_bool(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip().lower()
        return True if text in _TRUE else False if text in _FALSE else value
    if isinstance(value, int | float):
        return bool(value)
    return value


def _as_number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _as_text(value: Any) -> str:
    if isinstance(value, datetime):
        # Stored UTC; compared in the form the answer shows it.
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    a, b = _comparable(a, b)
    try:
        if op == "=":
            return a == b
        if op in ("!=", "<>"):
            return a != b
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        if op == ">=":
            return a >= b
    except TypeError:
        return _compare(op, _as_text(a), _as_text(b))
    raise AssertionError(op)


def like_regex(pattern: str) -> re.Pattern[str]:
    """A SQL LIKE pattern as a case-insensitive regular expression."""
    out = []
    escaped = False
    for char in pattern:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def _arith(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    try:
        a, b = (_as_number(a) if isinstance(a, str) else a,
                _as_number(b) if isinstance(b, str) else b)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return None if b == 0 else a / b
        if op == "%":
            return None if b == 0 else a % b
    except TypeError:
        raise SqlError(ErrorCode.QUERY_FAILED,
                       f"Cannot compute {a!r} {op} {b!r}") from None
    raise AssertionError(op)


# --- expressions ---------------------------------------------------------------------------

_COMPARISONS = {"=", "!=", "<>", "<", "<=", ">", ">="}
_ARITHMETIC = {"+", "-", "*", "/", "%"}


def compile_expr(node: Any, relation: Relation) -> Getter:
    """A function row -> value for the expression ``node`` over ``relation``."""
    if isinstance(node, NullConstant):
        return lambda row: None
    if isinstance(node, Constant):
        value = node.value
        return lambda row: value
    if isinstance(node, Identifier):
        index = relation.require(node.parts)
        return lambda row: row[index]
    if isinstance(node, TypeCast):
        return compile_expr(node.arg, relation)
    if isinstance(node, UnaryOperation):
        inner = compile_expr(node.args[0], relation)
        op = node.op.lower()
        if op == "not":
            return lambda row: None if (v := inner(row)) is None else not _truth(v)
        if op == "-":
            return lambda row: None if (v := inner(row)) is None else -v
        if op == "+":
            return inner
    if isinstance(node, BetweenOperation):
        value, low, high = (compile_expr(a, relation) for a in node.args)
        return lambda row: _all3(_compare(">=", value(row), low(row)),
                                 _compare("<=", value(row), high(row)))
    if isinstance(node, BinaryOperation):
        return _binary(node, relation)
    raise SqlError(ErrorCode.UNSUPPORTED,
                   f"Expression not supported on the service's own tables: {_text(node)}")


def _binary(node: BinaryOperation, relation: Relation) -> Getter:
    op = node.op.lower()
    left_node, right_node = node.args
    left = compile_expr(left_node, relation)
    if op in ("in", "not in"):
        if not isinstance(right_node, Tuple):
            raise SqlError(ErrorCode.UNSUPPORTED, f"IN needs a list of values: {_text(node)}")
        items = [compile_expr(item, relation) for item in right_node.items]
        negate = op == "not in"

        def member(row: Row) -> bool | None:
            value = left(row)
            if value is None:
                return None
            found = any(_compare("=", value, item(row)) for item in items)
            return found != negate
        return member
    right = compile_expr(right_node, relation)
    if op == "and":
        return lambda row: _all3(left(row), right(row))
    if op == "or":
        return lambda row: _any3(left(row), right(row))
    if op in _COMPARISONS:
        return lambda row: _compare(op, left(row), right(row))
    if op in ("like", "not like"):
        negate = op == "not like"

        def like(row: Row) -> bool | None:
            value, pattern = left(row), right(row)
            if value is None or pattern is None:
                return None
            return bool(like_regex(str(pattern)).fullmatch(_as_text(value))) != negate
        return like
    if op in ("is", "is not"):
        negate = op == "is not"
        return lambda row: (left(row) is right(row) if right(row) is None
                            else _compare("=", left(row), right(row)) or False) != negate
    if op in _ARITHMETIC:
        return lambda row: _arith(op, left(row), right(row))
    if op == "||":
        return lambda row: None if left(row) is None or right(row) is None \
            else _as_text(left(row)) + _as_text(right(row))
    raise SqlError(ErrorCode.UNSUPPORTED,
                   f"Operator {node.op.upper()} is not supported on the service's own tables")


def _truth(value: Any) -> bool:
    value = _as_bool(value)
    return bool(value) and value is not None


def _all3(a: Any, b: Any) -> bool | None:
    if a is not None and not _truth(a) or b is not None and not _truth(b):
        return False
    return None if a is None or b is None else True


def _any3(a: Any, b: Any) -> bool | None:
    if a is not None and _truth(a) or b is not None and _truth(b):
        return True
    return None if a is None or b is None else False


def _text(node: Any) -> str:
    try:
        return node.to_string()
    except Exception:  # noqa: BLE001 - only for a message
        return type(node).__name__


# --- SELECT over a relation ------------------------------------------------------------------

def constant_int(node: Any, clause: str) -> int | None:
    if node is None:
        return None
    if isinstance(node, Constant) and isinstance(node.value, int) and node.value >= 0:
        return node.value
    raise SqlError(ErrorCode.QUERY_FAILED, f"{clause} must be a non-negative integer")


def conjuncts(node: Any) -> list[Any]:
    """The conditions ``a AND b AND …`` is made of (none for no WHERE)."""
    if node is None:
        return []
    if isinstance(node, BinaryOperation) and node.op.lower() == "and":
        return conjuncts(node.args[0]) + conjuncts(node.args[1])
    return [node]


def filter_rows(relation: Relation, where: Any) -> Relation:
    if where is None:
        return relation
    test = compile_expr(where, relation)
    return Relation(relation.columns, [r for r in relation.rows if _truth(test(r))],
                    relation.prefer, relation.qualifiers)


def run_select(select: Select, relation: Relation, *, where: bool = True
               ) -> tuple[list[str], list[Row]]:
    """Column names and rows of ``select`` evaluated over ``relation``."""
    if select.group_by or select.having:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       "GROUP BY and HAVING are not supported on the service's own tables")
    if where:
        relation = filter_rows(relation, select.where)
    names, getters = _targets(select.targets, relation)
    rows = relation.rows
    if select.order_by:
        rows = _order(rows, select.order_by, relation, select.targets, getters)
    offset = constant_int(select.offset, "OFFSET") or 0
    limit = constant_int(select.limit, "LIMIT")
    if offset or limit is not None:
        rows = rows[offset:None if limit is None else offset + limit]
    out = [tuple(get(row) for get in getters) for row in rows]
    if select.distinct:
        out = list(dict.fromkeys(out))
    return names, out


def _targets(targets: list[Any], relation: Relation) -> tuple[list[str], list[Getter]]:
    names: list[str] = []
    getters: list[Getter] = []
    for target in targets:
        parts = target.parts if isinstance(target, Identifier) else None
        if isinstance(target, Star) or (parts and isinstance(parts[-1], Star)):
            qualifier = str(parts[-2]).lower() if parts and len(parts) > 1 else None
            if qualifier and qualifier not in relation.qualifiers:
                raise SqlError(ErrorCode.QUERY_FAILED, f"Unknown table in {qualifier}.*")
            for index, column in enumerate(relation.columns):
                if qualifier is None and not column.in_star:
                    continue
                if qualifier is not None and (column.qualifier or "").lower() != qualifier:
                    continue
                names.append(column.name)
                getters.append(lambda row, i=index: row[i])
            continue
        alias = target.alias.parts[-1] if getattr(target, "alias", None) is not None else None
        if isinstance(target, Identifier):
            index = relation.require(target.parts)
            names.append(alias or relation.columns[index].name)
            getters.append(lambda row, i=index: row[i])
            continue
        names.append(alias or _text(target))
        getters.append(compile_expr(target, relation))
    return names, getters


def _order(rows: list[Row], order_by: list[Any], relation: Relation, targets: list[Any],
           getters: list[Getter]) -> list[Row]:
    aliases = {t.alias.parts[-1].lower(): i for i, t in enumerate(targets)
               if getattr(t, "alias", None) is not None}
    # Python's sort is stable: sorting by the last key first gives the SQL order.
    for item in reversed(order_by):
        node = item.field
        if isinstance(node, Constant) and isinstance(node.value, int):
            if not 1 <= node.value <= len(getters):
                raise SqlError(ErrorCode.QUERY_FAILED,
                               f"ORDER BY position {node.value} is not in the column list")
            key = getters[node.value - 1]
        elif (isinstance(node, Identifier) and len(node.parts) == 1
              and relation.find(node.parts) is None and str(node.parts[0]).lower() in aliases):
            key = getters[aliases[str(node.parts[0]).lower()]]
        else:
            key = compile_expr(node, relation)
        descending = (item.direction or "").upper() == "DESC"
        rows = sorted(rows, key=lambda row, k=key: _sort_key(k(row)), reverse=descending)
    return rows


def _sort_key(value: Any) -> tuple[int, Any]:
    # NULLs first in ascending order (as MySQL); numbers before text; text without case.
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float):
        return (1, float(value))
    return (2, _as_text(value).lower())
