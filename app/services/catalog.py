"""Catalog versions: how every process learns, at its next request, that a kind of object it
keeps built in memory changed in the store (``store.CatalogVersion``).

A change writes a new random stamp in its own transaction (``bump``), so the stamp and the
change are seen together or not at all; a process compares the stamp it read last with the
store's (``read_version``: one row by its primary key) and rebuilds only when it moved. A
random stamp rather than a counter: a store emptied or restored from a backup can never
hand back a value a process already holds for other contents.
"""

from __future__ import annotations

import uuid

from flask import has_app_context
from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite

from ..extensions import db
from ..store import CatalogVersion
from .common import server_autocommit

DATA_SOURCES = "data_sources"  # the data sources created at run time (sql/runtime.py)

_TABLE = CatalogVersion.__table__
_VERSION_SQL = f"SELECT version FROM {_TABLE.name} WHERE name = {{}}"
_INSERTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def bump(name: str) -> None:
    """Move ``name``'s version, in the session's transaction (the caller commits)."""
    stamp = uuid.uuid4().hex
    insert = _INSERTS[db.session.get_bind().dialect.name]
    # One statement, also when the row does not exist yet: two first changes at once
    # cannot fail each other on the primary key. Without a flush: the change's own rows
    # are flushed by the caller's commit, which answers their conflicts.
    with db.session.no_autoflush:
        db.session.execute(insert(_TABLE).values(name=name, version=stamp)
                           .on_conflict_do_update(index_elements=[_TABLE.c.name],
                                                  set_={"version": stamp}))


def read_version(engine: Engine, name: str) -> str | None:
    """``name``'s version in the store now (None: never changed).

    Straight through the driver, as every request that uses a stored data source pays for
    it: on PostgreSQL in autocommit (one round trip, no BEGIN and ROLLBACK; see
    ``common.server_autocommit``), on SQLite on the pooled connection as it is (its driver
    opens no transaction for a read). Through SQLAlchemy's Connection and a select() this
    cost several times as much CPU as the query itself.
    """
    if engine.dialect.name == "postgresql" and has_app_context():
        with server_autocommit() as conn, conn.cursor() as cursor:
            row = cursor.execute(_VERSION_SQL.format("%s"), (name,)).fetchone()
    else:
        fairy = engine.raw_connection()
        try:
            cursor = fairy.cursor()
            try:
                cursor.execute(_VERSION_SQL.format("%s" if engine.dialect.paramstyle
                                                   in ("format", "pyformat") else "?"),
                               (name,))
                row = cursor.fetchone()
            finally:
                cursor.close()
        finally:
            fairy.close()
    return row[0] if row is not None else None
