"""Which functions a statement may call on a data source, one module per dialect.

The gate (``gate.py``) walks the parsed statement and asks the target source's policy about
every node; a policy answers None (allowed) or the reason for refusing.
"""

from __future__ import annotations

from .base import FunctionPolicy, function_name
from .mysql import MysqlPolicy
from .postgresql import PostgresPolicy
from .sqlite import SqlitePolicy

__all__ = ["FunctionPolicy", "function_name", "policy_for"]


def policy_for(dialect: str) -> FunctionPolicy:
    """A new policy for a source of ``dialect`` (sqlite | postgresql | mysql)."""
    return {"postgresql": PostgresPolicy, "mysql": MysqlPolicy,
            "sqlite": SqlitePolicy}[dialect]()
