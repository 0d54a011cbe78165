"""A small SQLite table read whole by connectorx, into Arrow, without Python rows.

A federated leg that reads every row of one SQLite table (TPC-H's part, 20 000 rows, in
Q14) was read as Python rows by the sqlite3 module, each row stepped and built while
holding the interpreter's lock, then typed by its values into Arrow: about 20 ms alone,
and twice that beside a PostgreSQL leg read at the same time, each waiting for the lock.
connectorx reads the same table in Rust with the lock released.

Only a read that cannot be anything but that takes this path (the caller checks the
leg): the leg's own ``SELECT columns FROM table`` (no condition, no function: nothing
the connection's authorizer would have to refuse), with a LIMIT, of a table its plan
sizes at most ``native_mysql.AT_ONCE_ROWS`` rows, whose columns the table declares
INTEGER or TEXT (SQLite's affinities that hold such values only), from a file whose path
is plain. Whatever else happens (a value of another type in such a column, more rows
than the bound, a file that cannot be read), the answer is None and the caller reads the
leg as before: connectorx refuses a text in an integer column rather than converting it.

connectorx opens the file itself, read-write (its URL takes no flags; a path that does
not exist would be created, and one it cannot open is retried for half a minute): so the
path must name a file that exists and can be read, and the statement is one SELECT.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# The same bound on rows as MariaDB's reads at once (the legs read it here).
from .native_mysql import AT_ONCE_ROWS as AT_ONCE_ROWS

log = logging.getLogger(__name__)

# A path connectorx's URL carries as it is: no '%', '?', '#' or spaces to decode.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_./-]+")
_TYPES = {"int": (pa.int64(),), "text": (pa.string(), pa.large_string())}
# The largest file read this way (TPC-H at scale factor 0.1 in SQLite: 16 MB).
AT_ONCE_FILE_BYTES = 256 * 1024 * 1024


def read_at_once(path: str | None, sql: str, kinds: dict[str, str | None], most: int,
                 max_value_bytes: int | None = None) -> pa.Table | None:
    """The rows of the single-table SELECT ``sql`` on the SQLite file ``path``, with its
    columns' names in lower case, when there are at most ``most`` and each column's values
    are all of its declared kind (``kinds``: "int" or "text" by lower-case column name),
    not all NULL, and no text longer than ``max_value_bytes`` (the row path's connection
    refuses such a value: it says so instead); None otherwise (the caller reads it
    another way)."""
    if not path or not kinds or any(kind not in _TYPES for kind in kinds.values()):
        return None
    real = _readable(path)
    if real is None:
        return None
    import connectorx  # loaded already by MariaDB legs, or here with the first one

    try:
        table = connectorx.read_sql(f"sqlite://{real}", f"{sql} LIMIT {int(most) + 1}",
                                    return_type="arrow")
    except Exception as exc:  # noqa: BLE001 - a value of another type, a locked file …
        log.debug("SQLite read at once declined: %s", exc)
        return None
    table = _checked(table, kinds, most)
    if table is not None and max_value_bytes and any(
            pa.types.is_string(field.type) and table.num_rows and
            (pc.max(pc.binary_length(table.column(field.name))).as_py() or 0) > max_value_bytes
            for field in table.schema):
        return None
    return table


def _readable(path: str) -> str | None:
    """The file's real path, when it is plain (see _PLAIN_PATH), exists, can be read and
    is at most AT_ONCE_FILE_BYTES: a whole table of it then fits in memory whatever its
    values (the bound on rows says nothing of their size)."""
    real = os.path.realpath(path)
    if not _PLAIN_PATH.fullmatch(real) or not os.path.isfile(real) or \
            not os.access(real, os.R_OK) or os.path.getsize(real) > AT_ONCE_FILE_BYTES:
        return None
    return real


def _checked(table: Any, kinds: dict[str, str | None], most: int) -> pa.Table | None:
    if table.num_rows == 0 or table.num_rows > most or table.num_columns != len(kinds):
        return None  # an empty leg's types come from its description, as before
    fields = []
    for column, name in zip(table.columns, table.column_names, strict=True):
        kind = kinds.get(name.lower())
        if kind not in _TYPES or column.type not in _TYPES[kind] or \
                column.null_count == table.num_rows:
            return None  # the row path types an all-NULL column as NULL
        fields.append(pa.field(name.lower(), _TYPES[kind][0]))
    return table.rename_columns([field.name for field in fields]).cast(pa.schema(fields))


def warm(path: str | None) -> None:
    """One read through connectorx of the file ``path``, as a leg would be read: its first
    read sets up connectorx's runtime, which a worker's start pays instead."""
    real = _readable(path) if path else None
    if real is None:
        return
    import connectorx

    try:
        connectorx.read_sql(f"sqlite://{real}", "SELECT 1 AS one", return_type="arrow")
    except Exception as exc:  # noqa: BLE001 - the leg will say what is wrong
        log.debug("SQLite warm read failed: %s", exc)
