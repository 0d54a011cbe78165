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

from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from ..extensions import db
from ..store import CatalogVersion

DATA_SOURCES = "data_sources"  # the data sources created at run time (sql/runtime.py)

_TABLE = CatalogVersion.__table__
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
    """``name``'s version in the store now (None: never changed)."""
    with engine.connect() as conn:
        return conn.execute(select(_TABLE.c.version).where(_TABLE.c.name == name)).scalar()
