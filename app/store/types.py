"""Column types shared by the mapped classes."""

from datetime import UTC, datetime

from sqlalchemy import DateTime, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator):
    """A timestamp stored in UTC and always read back timezone-aware.

    SQLite keeps no zone, so without this a value would come back naive there and aware
    on PostgreSQL, and the API would print two formats.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class InProject:
    """Columns of an object named within a project (skills, agents, models).

    ``name_key`` is the lower-cased name: with the project it forms each table's unique key,
    so names are unique per project case-insensitively, also when two requests race.
    """

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"),
                                            index=True)
    name: Mapped[str] = mapped_column(String(63))
    name_key: Mapped[str] = mapped_column(String(63))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class Versioned:
    """A row version, checked by every ORM update (``UPDATE … WHERE row_version = n``).

    Updates merge into what they read (params key by key): two requests merging at once
    would otherwise each write their own merge and one set of keys would be lost. The
    second writer's update matches no row instead, and the service runs it again on the
    fresh row.
    """

    row_version: Mapped[int] = mapped_column(server_default="1")
    __mapper_args__ = {"version_id_col": row_version}
