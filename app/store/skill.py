from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from .types import UTCDateTime, utcnow


class Skill(db.Model):
    __tablename__ = "skills"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"),
                                            index=True)
    name: Mapped[str] = mapped_column(String(63))
    name_key: Mapped[str] = mapped_column(String(63))
    type: Mapped[str] = mapped_column(String(255))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    agent_links: Mapped[list["AgentSkill"]] = relationship(  # noqa: F821
        back_populates="skill", cascade="all, delete-orphan", passive_deletes=True)
