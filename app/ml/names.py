"""Finding a column by the name a statement gives it (no heavy imports: services use it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def find_column(columns: Iterable[Any], name: str) -> Any | None:
    """``name`` as the data spells it: the exact name, or else the one column whose name
    differs only in case (databases fold unquoted names: PostgreSQL to lower case); None
    when there is no such column, or several."""
    columns = list(columns)
    if name in columns:
        return name
    matches = [c for c in columns if str(c).lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None
