"""The console's own records: each user's statement history and the saved queries of projects."""

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, utcnow


class ConsoleHistory(db.Model):
    """One statement a user ran from the console, with its outcome."""

    __tablename__ = "console_history"
    __table_args__ = (Index("ix_console_history_user_ran", "user_key", "ran_at"),
                      {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    # The lower-cased user name ("" when sign-in is off): history outlives a deleted user's
    # row only until the operator clears it, and needs no join to be listed.
    user_key: Mapped[str] = mapped_column(String(63))
    statement: Mapped[str] = mapped_column(Text)
    database: Mapped[str | None] = mapped_column(String(63), nullable=True)
    ran_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    duration_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    row_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    outcome: Mapped[str] = mapped_column(String(16))  # table, ok, error, cancelled
    error_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)


class SavedQuery(db.Model):
    """A named statement kept in a project, shared by the project's users."""

    __tablename__ = "saved_queries"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"),
                                            index=True)
    name: Mapped[str] = mapped_column(String(63))
    name_key: Mapped[str] = mapped_column(String(63))
    statement: Mapped[str] = mapped_column(Text)
    database: Mapped[str | None] = mapped_column(String(63), nullable=True)
    created_by: Mapped[str] = mapped_column(String(63))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
