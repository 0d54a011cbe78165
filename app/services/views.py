"""Read models of skills and agents: plain dicts built from a fixed number of Core queries.

Listing a thousand skills as ORM objects with their links spent most of its time building
objects; these views read plain rows instead (1 statement for skills, 3 for agents, whatever
the number of rows), and the output schemas dump them as they are.
"""

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, String, select, type_coerce

from ..extensions import db
from ..store import Agent, AgentSkill, Skill

# Table columns (Core), not ORM attributes: rows come back without the ORM's loading work.
_skills, _agents, _links = Skill.__table__.c, Agent.__table__.c, AgentSkill.__table__.c


def _stamp_column(column: Any) -> Any:
    # Read as the driver gives it (SQLite: the stored text), not through UTCDateTime: a
    # listing's timestamps are only ever printed, and parsing 2 000 of them cost a third of
    # the time of listing 1 000 skills. _iso() prints both forms the same way.
    return type_coerce(column, String).label(column.name)


SKILL_COLUMNS = (_skills.id, _skills.name, _skills.project_id, _skills.type, _skills.params,
                 _stamp_column(_skills.created_at), _stamp_column(_skills.updated_at))
AGENT_COLUMNS = (_agents.id, _agents.name, _agents.project_id, _agents.model_name,
                 _agents.provider, _agents.params, _agents.model, _agents.data,
                 _agents.prompt_template, _stamp_column(_agents.created_at),
                 _stamp_column(_agents.updated_at))


# The agent links of each skill, aliased: the skill query may join agent_skills itself. Built
# once: an alias made per call re-creates its column proxies every time.
_SKILL_USERS = AgentSkill.__table__.alias("skill_users")


def _rows(query: Select, params: dict[str, Any] | None = None) -> list:
    return db.session.connection().execute(query, params).all()


def _iso(value: datetime | str | None) -> str | None:
    """ISO 8601 in UTC, from a timestamp read by ``_stamp_column``."""
    if value is None:
        return None
    if isinstance(value, str):  # SQLite's stored UTC text: 2026-11-21 23:00:00.123456
        return value.replace(" ", "T", 1) + "+00:00"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def skill_query() -> Select:
    return select(*SKILL_COLUMNS)


def agent_query() -> Select:
    return select(*AGENT_COLUMNS)


def skill_statement(query: Select, order: tuple = (_skills.id,)) -> Select:
    """The one statement of a skill view: ``query`` (built on ``skill_query()``) LEFT JOIN
    the skills' agent links, a row per (skill, agent), in ``order``."""
    users = _SKILL_USERS
    return (query.add_columns(users.c.agent_id.label("agent_id"))
            .outerjoin(users, users.c.skill_id == _skills.id)
            .order_by(*order, users.c.agent_id))


def skill_views(query: Select, order: tuple = (_skills.id,)) -> list[dict[str, Any]]:
    """The skills ``query`` (built on ``skill_query()``) selects, in ``order``, with their
    ``agent_ids``."""
    return views_of_skills(skill_statement(query, order))


def views_of_skills(statement: Select, params: dict[str, Any] | None = None
                    ) -> list[dict[str, Any]]:
    """Run a ``skill_statement`` (with its bound ``params``) into skill views."""
    views: dict[int, dict[str, Any]] = {}
    # Tuple unpacking, not Row attributes: this loop runs once per skill of a listing.
    for skill_id, name, project_id, type_, params_, created, updated, agent_id in _rows(
            statement, params):
        view = views.get(skill_id)
        if view is None:
            view = views[skill_id] = {
                "id": skill_id, "name": name, "project_id": project_id, "type": type_,
                "params": params_, "agent_ids": [],
                "created_at": _iso(created), "updated_at": _iso(updated)}
        if agent_id is not None and agent_id not in view["agent_ids"]:
            view["agent_ids"].append(agent_id)
    return list(views.values())


def agent_views(query: Select) -> list[dict[str, Any]]:
    """The agents ``query`` (built on ``agent_query()``) selects, with their skills."""
    rows = _rows(query)
    if not rows:
        return []
    ids = query.with_only_columns(_agents.id).order_by(None)
    links = _rows(select(_links.agent_id, _links.skill_id, _links.parameters)
                  .where(_links.agent_id.in_(ids))
                  .order_by(_links.agent_id, _links.position))
    skills = {s["id"]: s for s in skill_views(skill_query().where(_skills.id.in_(
        select(_links.skill_id).where(_links.agent_id.in_(ids)))))} if links else {}
    by_agent: dict[int, list[tuple[dict, Any]]] = defaultdict(list)
    for agent_id, skill_id, parameters in links:
        by_agent[agent_id].append((skills[skill_id], parameters))
    views = []
    for r in rows:
        used = by_agent.get(r.id, [])
        views.append({
            "id": r.id, "name": r.name, "project_id": r.project_id,
            "model_name": r.model_name, "provider": r.provider, "params": r.params,
            "skills": [skill for skill, _ in used],
            "skills_extra_parameters": {skill["name"]: params or {} for skill, params in used},
            "model": r.model, "data": r.data, "prompt_template": r.prompt_template,
            "created_at": _iso(r.created_at), "updated_at": _iso(r.updated_at)})
    return views
