from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, Versioned, utcnow


class DataSourceRecord(Versioned, db.Model):
    """A data source created at run time (CREATE DATABASE, POST /api/databases).

    Secret parameters (the password) are not in ``parameters``: they are in ``secrets``,
    a Fernet token of their JSON, so a copy of the store holds no credential in clear.
    """

    __tablename__ = "data_sources"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    # Lower-cased name: unique, so two racing CREATE DATABASE of one name cannot both win.
    name_key: Mapped[str] = mapped_column(String(63), unique=True)
    engine: Mapped[str] = mapped_column(String(32))
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secrets: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
