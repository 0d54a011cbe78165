from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String, Text, false
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
    # Any signed-in user may query it (an admin's choice, as "public" of QUARRY_DATA_SOURCES).
    public: Mapped[bool] = mapped_column(server_default=false(), default=False)
    # "warn" or "refuse": what a privileged account means (sql/roles.py).
    privileged_role: Mapped[str] = mapped_column(String(16), server_default="warn",
                                                 default="warn")
    # What the account check found beyond reading; None when it could not be checked.
    role_warnings: Mapped[list[str] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class DatabaseName(db.Model):
    """One name of SQL's one name space of databases: a project's or a stored data source's.

    Written in the same transaction as the project or the data source: the primary key
    refuses the second of two racing creates of one name, whichever kinds they are.
    """

    __tablename__ = "database_names"

    name_key: Mapped[str] = mapped_column(String(63), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # "project" or "data"
