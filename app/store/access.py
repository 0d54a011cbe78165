"""Who may do what (project members, data-source grants) and the audit log."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, utcnow


class ProjectMember(db.Model):
    """A user's role in one project: owner, editor or viewer."""

    __tablename__ = "project_members"
    __table_args__ = (UniqueConstraint("project_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"),
                                            index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SourceGrant(db.Model):
    """The right to query one data source. Sources are named, not keyed: a configured source
    has no row, and a grant outlives a stored source dropped and created again by name."""

    __tablename__ = "source_grants"
    __table_args__ = (UniqueConstraint("source_key", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    source_key: Mapped[str] = mapped_column(String(63))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    privilege: Mapped[str] = mapped_column(String(16), default="query")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditRecord(db.Model):
    """One change (kind project/model/…, with before and after) or one SQL statement
    (kind sql, with its text, rows, duration and outcome). Never updated; pruned by age."""

    __tablename__ = "audit"
    __table_args__ = (Index("ix_audit_at", "at"), Index("ix_audit_user_id", "user_name", "id"),
                      {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    user_name: Mapped[str | None] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(16))
    target: Mapped[str | None] = mapped_column(String(255))
    before: Mapped[Any | None] = mapped_column(JSON)
    after: Mapped[Any | None] = mapped_column(JSON)
    source: Mapped[str | None] = mapped_column(String(63))
    statement: Mapped[str | None] = mapped_column(Text)
    row_count: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[float | None] = mapped_column(Float)
    outcome: Mapped[str | None] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64))
