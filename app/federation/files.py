"""Legs that read an uploaded file (``files.<name>``) instead of a database.

A file leg sends no SQL anywhere: the file's Parquet is handed to the statement's engine
connection as an Arrow dataset that Quarry opened, so DuckDB scans it in place (only the
columns and row groups the statement needs, in parallel) while its external access stays
off: the statement itself can name no path, and ``read_csv('/etc/passwd')`` is refused.
"""

from __future__ import annotations

import os

from sqlglot import exp

from ..lazy import on_first_use
from ..sql.errors import ErrorCode, SqlError
from ..sql.files import FILES_DIALECT, file_columns, stored_path
from ..sql.sources import DataSource
from .engine import Session
from .plan import Leg

# pyarrow loads with the first file read, not with the app (tests/test_idle_imports.py).
ds = on_first_use("pyarrow.dataset")


def is_file_source(source: DataSource) -> bool:
    return source.dialect == FILES_DIALECT


def describe(table: exp.Table) -> list[str]:
    return file_columns(_key(table))


def attach(leg: Leg, session: Session) -> int:
    """Make the engine table ``leg.name`` the file itself; its row count."""
    path = stored_path(_key(leg.table))
    # Opened now and read through its descriptor: an upload that replaces the file while
    # the statement runs (os.replace) leaves this statement reading the old one whole.
    fd = os.open(path, os.O_RDONLY)
    proc = f"/proc/self/fd/{fd}"
    dataset = ds.dataset(proc if os.path.exists(proc) else path, format="parquet")
    if leg.limit == 0:  # the statement is only described: an empty table of its columns
        os.close(fd)
        session.ensure(leg.name, dataset.schema)
        leg.rows = 0
        return 0
    session.attach(leg.name, dataset, lambda: os.close(fd))
    rows = dataset.count_rows()
    leg.rows = rows
    return rows


def row_count(leg: Leg) -> int | None:
    """The rows of the leg's file, from its Parquet metadata (nothing else is read); the
    leg's own conditions are applied by the engine, so this is the most it returns."""
    try:
        return ds.dataset(stored_path(_key(leg.table)), format="parquet").count_rows()
    except (OSError, SqlError):
        return None


def _key(table: exp.Table) -> str:
    key = table.name.lower()
    try:
        stored_path(key)
    except ValueError:  # no file can have this name: answer as for a missing one
        raise SqlError(ErrorCode.UNKNOWN_TABLE, f"Table not found: files.{table.name}") \
            from None
    return key
