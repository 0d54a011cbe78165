"""The policy interface: which functions a statement may call on a data source.

The gate (``gate.py``) walks the parsed statement and asks the target source's policy about
every node; a policy answers None (allowed) or the reason for refusing.

INTERIM: these policies still hold the old deny-lists; they are being replaced by
allow-lists (PostgreSQL from the source's own ``pg_proc``, MariaDB and SQLite from lists of
built-ins), so that a function nobody thought of is refused by default.
"""

from __future__ import annotations

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

    def refusal(self, node: exp.Expression) -> str | None:
        if not isinstance(node, exp.Func):
            return None
        name = function_name(node)
        if name in self.denied or name.startswith(self.denied_prefixes):
            return (f"Function {name}() is not allowed: it has effects beyond reading "
                    f"(or reads server files)")
        return None
