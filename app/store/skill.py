from typing import Any

from sqlalchemy import JSON, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from .types import InProject, Versioned


class Skill(InProject, Versioned, db.Model):
    """A skill. Secrets in its ``params`` are kept as the mask there and encrypted in
    ``secrets``, as an agent's are (``services/credentials.py``)."""

    __tablename__ = "skills"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    type: Mapped[str] = mapped_column(String(255))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secrets: Mapped[str | None] = mapped_column(Text)

    agent_links: Mapped[list["AgentSkill"]] = relationship(  # noqa: F821
        back_populates="skill", cascade="all, delete-orphan", passive_deletes=True)
