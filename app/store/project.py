from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, utcnow


class Project(db.Model):
    __tablename__ = "projects"
    # IDs are never reused (SQLite would reuse a deleted row's): a stale ID must not
    # address a newer object.
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    # Lower-cased name: the unique key, so "P1" and "p1" cannot both exist, even in a race.
    name_key: Mapped[str] = mapped_column(String(63), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
