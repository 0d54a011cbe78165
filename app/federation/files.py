"""Legs that read an uploaded file (``files.<name>``) instead of a database.

A file leg sends no SQL anywhere: the statement's engine connection gets a view of the
file's Parquet that DuckDB's own reader scans in place (only the columns and row groups
the statement needs, in parallel). The engine may read the files folder and nothing else
(``allowed_directories``, with external access off and the configuration locked), and the
statement itself can name no path: table functions are refused before the engine, so
``read_csv('/etc/passwd')`` never reaches it.
"""

from __future__ import annotations

import os

from sqlglot import exp

from ..lazy import on_first_use
from ..sql.errors import ErrorCode, SqlError
from ..sql.files import file_columns, stored_path
from ..sql.sources import DataSource
from .engine import Session
from .plan import Leg

# pyarrow loads with the first file read, not with the app (tests/test_idle_imports.py).
pq = on_first_use("pyarrow.parquet")


def is_file_source(source: DataSource) -> bool:
    return source.engine_only  # the one such source: uploaded files


def describe(table: exp.Table) -> list[str]:
    return file_columns(_key(table))


def attach(leg: Leg, session: Session) -> int:
    """Make the engine table ``leg.name`` the file itself; its row count (from the
    Parquet metadata)."""
    path = stored_path(_key(leg.table))
    rows = _metadata_rows(path)
    session.attach(leg.name, os.path.abspath(path), empty=leg.limit == 0)
    leg.rows = 0 if leg.limit == 0 else rows
    return leg.rows


def row_count(leg: Leg) -> int | None:
    """The rows of the leg's file, from its Parquet metadata (nothing else is read); the
    leg's own conditions are applied by the engine, so this is the most it returns."""
    try:
        return _metadata_rows(stored_path(_key(leg.table)))
    except SqlError:
        return None


def _metadata_rows(path: str) -> int:
    try:
        return pq.read_metadata(path).num_rows
    except FileNotFoundError:
        raise SqlError(ErrorCode.UNKNOWN_TABLE, "Table not found: files."
                       + os.path.basename(path).removesuffix(".parquet")) from None


def _key(table: exp.Table) -> str:
    key = table.name.lower()
    try:
        stored_path(key)
    except ValueError:  # no file can have this name: answer as for a missing one
        raise SqlError(ErrorCode.UNKNOWN_TABLE, f"Table not found: files.{table.name}") \
            from None
    return key
