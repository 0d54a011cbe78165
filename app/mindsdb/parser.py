"""mindsdb_sql_parser, the MindsDB dialect's own parser: loaded here, used by the adapter only.

Services never see its tree: ``plain`` turns the values a statement carries (USING options,
skill and agent parameters) into plain Python values first.
"""

from __future__ import annotations

import warnings
from typing import Any

from mindsdb_sql_parser import parse_sql
from mindsdb_sql_parser.ast import Constant, Identifier

with warnings.catch_warnings():
    # sly, the parser's generator, opens its LR-table file without closing it when the
    # parser class is built (on first import): load it here, where that is not reported.
    warnings.simplefilter("ignore", ResourceWarning)
    import mindsdb_sql_parser.parser  # noqa: F401

__all__ = ["parse_sql", "plain", "try_parse"]


def try_parse(query: str) -> Any | None:
    """The statement's tree, or None when the MindsDB parser cannot read it."""
    try:
        return parse_sql(query)
    except Exception:  # noqa: BLE001 - the parser raises assorted types; the data path reports
        return None


def plain(value: Any) -> Any:
    """A parsed value as plain Python: ``USING engine = sklearn`` (a bare word) → "sklearn"."""
    if isinstance(value, Identifier):
        return ".".join(str(part) for part in value.parts)
    if isinstance(value, Constant):
        return value.value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
