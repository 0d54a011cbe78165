"""Statements running right now, in any worker of any instance (GET /api/sql/queries).

A row lives while its statement runs. It holds what another process needs to stop the
statement: the data source, the database's own id of the session running it (PostgreSQL
backend pid, MariaDB connection id) and the Quarry process that owns it (host, pid), which
watches ``cancel_requested`` for what only it can do (SQLite's interrupt, a stream between
two batches). ``seen_at`` is refreshed by the owner while it runs, so the row of a process
that died is recognised as stale and ignored. ``legs`` (JSON) lists the legs of a statement
over several data sources: source, SQL, state and rows delivered so far.
"""

from datetime import datetime

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, utcnow


class RunningQuery(db.Model):
    __tablename__ = "running_queries"
    __table_args__ = (Index("ix_running_queries_owner", "host", "pid"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_name: Mapped[str | None] = mapped_column(String(63))
    source: Mapped[str] = mapped_column(String(63))
    statement: Mapped[str] = mapped_column(Text)
    response_format: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    rows_sent: Mapped[int] = mapped_column(BigInteger, default=0)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    backend_id: Mapped[str | None] = mapped_column(String(32))
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    legs: Mapped[str | None] = mapped_column(Text)
