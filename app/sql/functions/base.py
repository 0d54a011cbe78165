"""The policy interface: which functions a statement may call on a data source.

The gate (``gate.py``) asks the target source's policy about the whole statement once
(``statement_refusal``) and then about every node (``refusal``); a policy answers None
(allowed) or the reason for refusing. PostgreSQL's policy is an allow-list read from the
source's own catalog (``postgresql.py``); the others still hold name lists.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp


def function_name(node: exp.Func) -> str:
    """The lower-case bare name of a function call (schema qualifiers dropped)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


class FunctionPolicy:
    """Decides, node by node, whether a statement's function calls may run on a source."""

    denied: frozenset[str] = frozenset()
    denied_prefixes: tuple[str, ...] = ()

    def bind(self, source: Any) -> None:
        """Called once by the DataSource that owns this policy (a policy that reads the
        source's catalog keeps it; the name-list policies need nothing)."""

    def warm(self, dbapi_connection: Any) -> None:
        """Read now, over an open connection of the source (at start), what the policy
        would otherwise read on first use; the name-list policies need nothing."""

    def statement_refusal(self, statement: exp.Expression) -> str | None:
        """Checks that need the whole statement (e.g. its generated SQL); None: allowed."""
        return None

    def refusal(self, node: exp.Expression) -> str | None:
        if not isinstance(node, exp.Func):
            return None
        name = function_name(node)
        if name in self.denied or name.startswith(self.denied_prefixes):
            return (f"Function {name}() is not allowed: it has effects beyond reading "
                    f"(or reads server files)")
        return None
