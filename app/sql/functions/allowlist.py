"""A function policy that allows a fixed list of built-ins and refuses everything else.

Used by the MariaDB/MySQL and SQLite sources, whose built-ins are known by name (PostgreSQL
asks its own catalog instead). The name checked is the one the data source will be sent:
sqlglot turns many calls into its own node classes (``IFNULL`` becomes ``Coalesce``,
``LCASE`` becomes ``Lower``) and writes them back under a name of its choosing, so the
policy renders each call in the source's dialect and reads the name off that text. A call
sqlglot does not know (``exp.Anonymous``) keeps the caller's name.
"""

from __future__ import annotations

import re

from sqlglot import exp

from .base import FunctionPolicy

# The name at the start of a rendered call: CONCAT(…), `concat`(…), "json"(…).
_CALL_HEAD = re.compile(r'\s*[`"\[]?([A-Za-z_][A-Za-z0-9_$]*)[`"\]]?\s*\(')


class AllowListPolicy(FunctionPolicy):
    """Allows the functions in ``allowed`` (lower-case names as the source spells them)."""

    dialect: str = ""                     # the sqlglot dialect the statement is sent in
    engine: str = ""                      # for messages: "MariaDB/MySQL", "SQLite"
    allowed: frozenset[str] = frozenset()
    reasons: dict[str, str] = {}          # why a well-known function is refused
    docs: str = "docs/sql.md"             # where the list is described

    @property
    def scope(self) -> str:
        """Where the functions run, for messages."""
        return f"{self.engine} data sources"

    def refusal(self, node: exp.Expression) -> str | None:
        # db.fn(), also as a table: a function stored in a database (MariaDB), never a
        # built-in — built-ins are never written with a database name.
        qualified = ((isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func))
                     or (isinstance(node, exp.Table) and isinstance(node.this, exp.Func)
                         and bool(node.args.get("db") or node.args.get("catalog"))))
        if qualified:
            call = node.sql(dialect=self.dialect, comments=False)
            return (f"Function {call} is not allowed: a function named with a database is "
                    f"stored there and may change data; only built-in functions run on "
                    f"{self.scope}")
        if not isinstance(node, exp.Func):
            return None
        name = self.called_name(node)
        if name is None or name in self.allowed:
            return None
        why = self.reasons.get(name) or (f"it is not one of the built-in functions allowed "
                                         f"on {self.scope} ({self.docs})")
        return f"Function {name.upper()}() is not allowed: {why}"

    def called_name(self, node: exp.Func) -> str | None:
        """The lower-case name the source will see for this call; None when the call is
        written as an operator or a keyword (``a ->> '$.x'``, ``CURRENT_DATE``)."""
        if isinstance(node, exp.Anonymous):
            return str(node.name).lower()
        try:
            text = node.sql(dialect=self.dialect, comments=False)
        except Exception:  # noqa: BLE001 - cannot be written alone: judge it by its class
            return node.sql_name().lower()
        match = _CALL_HEAD.match(text)
        return match.group(1).lower() if match else None
