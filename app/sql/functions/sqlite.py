"""The function policy of SQLite data sources (see ``__init__.py``)."""

from __future__ import annotations

from .base import FunctionPolicy

_SQLITE_DENIED = frozenset({"load_extension", "readfile", "writefile", "fts3_tokenizer"})


class SqlitePolicy(FunctionPolicy):
    denied = _SQLITE_DENIED
