from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from .types import InProject, Versioned


class Agent(InProject, Versioned, db.Model):
    """An agent. Its secrets (an API key in ``params``, ``model`` or ``data``) are not in
    those columns, which hold the mask in their place: they are in ``secrets``, a Fernet
    token (``services/credentials.py``) of their paths and values."""

    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    model_name: Mapped[str | None] = mapped_column(String(255))
    provider: Mapped[str | None] = mapped_column(String(255))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    model: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    prompt_template: Mapped[str | None] = mapped_column(Text)
    secrets: Mapped[str | None] = mapped_column(Text)

    skill_links: Mapped[list["AgentSkill"]] = relationship(
        back_populates="agent", cascade="all, delete-orphan", passive_deletes=True,
        order_by="AgentSkill.position")


class AgentSkill(db.Model):
    """An agent's use of a skill, with the extra parameters the agent gives it."""

    __tablename__ = "agent_skills"

    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"),
                                          primary_key=True)
    skill_id: Mapped[int] = mapped_column(ForeignKey("skills.id", ondelete="CASCADE"),
                                          primary_key=True, index=True)
    position: Mapped[int] = mapped_column(default=0)
    parameters: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    secrets: Mapped[str | None] = mapped_column(Text)  # as the agent's (the mask in parameters)

    agent: Mapped[Agent] = relationship(back_populates="skill_links")
    skill: Mapped["Skill"] = relationship(back_populates="agent_links")  # noqa: F821
