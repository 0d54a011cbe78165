"""Skills: named tools (SQL, retrieval, …) that agents of a project use."""

from collections.abc import Callable
from typing import Any

from flask import current_app
from sqlalchemy import Select, Text, bindparam, cast, select

from ..errors import (
    AgentNotFound,
    NameTaken,
    SkillNotFound,
    UnknownSkill,
    Unprocessable,
    shown,
)
from ..extensions import db
from ..rules.names import is_id, lookup_key, name_key, ref_value, validate_name
from ..rules.params import require_params_within
from ..rules.secrets import mask_json_text, merge
from ..store import Agent, AgentSkill, Project, Skill
from . import access, audit
from .common import Raced, commit, delete_or_gone, retried_on_race
from .credentials import seal_fields
from .lookup import find_in_project, taken_or_gone
from .projects import get_project
from .views import skill_query, skill_statement, skill_views, views_of_skills


def _taken(name: str, project_name: str) -> Callable[[], NameTaken]:
    # Names read before the commit: a rollback expires the loaded objects.
    return lambda: NameTaken("Skill", name, project_name)


def list_skills(project_name: str, *, agent_id: int | None = None,
                agent: str | None = None) -> list[dict[str, Any]]:
    """The project's skills; only those of one agent when ``agent_id`` or ``agent`` is given."""
    project = get_project(project_name)
    query = skill_query().where(Skill.project_id == project.id)
    if agent_id is None and agent is None:
        return skill_views(query)
    owner = _agent_id(project, str(agent_id) if agent_id is not None else agent)
    return skill_views(query.join(AgentSkill, AgentSkill.skill_id == Skill.id)
                       .where(AgentSkill.agent_id == owner), order=(AgentSkill.position,))


def skill_summaries(project_name: str) -> list[tuple[str, str, str]]:
    """(name, type, params as JSON text with secrets masked) of the project's skills.

    For the SQL tables p.skills / SHOW SKILLS: the params text is read as stored, and only
    decoded when it may hold a secret (a thousand skills in a few milliseconds).
    """
    project = get_project(project_name)
    rows = db.session.connection().execute(
        select(Skill.name, Skill.type, cast(Skill.__table__.c.params, Text))
        .where(Skill.project_id == project.id).order_by(Skill.id))
    return [(name, kind, mask_json_text(params)) for name, kind, params in rows]


def _agent_id(project: Project, ref: str) -> int:
    return find_in_project(select(Agent.id), Agent, AgentNotFound, project, ref)


def find_skill(project: Project, ref: str) -> Skill:
    return find_in_project(select(Skill), Skill, SkillNotFound, project, ref)


def get_skill(project_name: str, ref: str) -> dict[str, Any]:
    """One skill by name or ID, as a view: one statement, built once (the hottest read)."""
    if access.current_actor() is not None:
        get_project(project_name)  # a project the caller may not see: 404 before anything
    statement, params = _skill_by_ref(project_name, ref)
    views = views_of_skills(statement, params)
    if not views:
        raise SkillNotFound(ref, get_project(project_name).name)
    return views[0]


def _skill_in_project(where: Any) -> Select:
    return skill_statement(skill_query().join(Project, Project.id == Skill.project_id)
                           .where(Project.name_key == bindparam("project"), where))


_SKILL_BY_NAME = _skill_in_project(Skill.name_key == bindparam("ref"))
_SKILL_BY_ID = _skill_in_project(Skill.id == bindparam("ref"))


def _skill_by_ref(project_name: str, ref: str) -> tuple[Select, dict[str, Any]]:
    statement = _SKILL_BY_ID if is_id(ref) else _SKILL_BY_NAME
    return statement, {"project": lookup_key(project_name), "ref": ref_value(ref)}


def _view(project: Project, skill: Skill) -> dict[str, Any]:
    """The view of a skill just written (gone if another request deleted it since: 404)."""
    views = skill_views(skill_query().where(Skill.id == skill.id))
    if not views:
        raise SkillNotFound(skill.name, project.name)
    return views[0]


def _check_params(skill_type: str, params: dict[str, Any]) -> None:
    if skill_type != "sql":
        return
    sources = access.queryable_sources().names()  # a source it may not query: missing
    database = params.get("database")
    errors = {}
    if not isinstance(database, str) or not database:
        errors["database"] = ["A sql skill needs params.database, the name of a data source."]
    elif database.lower() not in {s.lower() for s in sources}:
        errors["database"] = [f"No data source named {database!r}; "
                              f"known: {', '.join(sorted(sources)) or 'none'}."]
    tables = params.get("tables")
    if not isinstance(tables, list) or not all(isinstance(t, str) and t for t in tables):
        errors["tables"] = ["A sql skill needs params.tables, a list of table names."]
    if errors:
        # Keyed by where they are in the request body ({"skill": {…}}), as a 400's are.
        raise Unprocessable("Invalid params for a sql skill: "
                            + " ".join(m for ms in errors.values() for m in ms),
                            errors={"skill": {"params": errors}})


def _check_size(name: str, params: dict[str, Any]) -> None:
    require_params_within(params, current_app.config["PARAMS_MAX_BYTES"], f"skill '{name}'")


def _check_source(params: dict[str, Any]) -> None:
    # A skill must not become a way to a data source its author may not query.
    if isinstance(params.get("database"), str):
        access.require_source(params["database"])


def create_skill(project_name: str, data: dict[str, Any]) -> dict[str, Any]:
    project = get_project(project_name, "write")
    name = validate_name("skill", data["name"])
    params = data.get("params") or {}
    _check_params(data["type"], params)
    _check_size(name, params)
    _check_source(params)
    skill = Skill(project_id=project.id, name=name, name_key=name_key(name),
                  type=data["type"])
    seal_fields(skill, {"params": params}, f"The skill '{name}'")
    db.session.add(skill)
    audit.record_change("skill", "create", f"{project.name}.{name}", None,
                        {"type": data["type"], "params": skill.params})
    commit(taken_or_gone(project, _taken(name, project.name)))
    return _view(project, skill)


@retried_on_race
def put_skill(project_name: str, ref: str, data: dict[str, Any]
              ) -> tuple[dict[str, Any], bool]:
    """Update the skill ``ref``; if there is none, create it with the path's name.

    Returns the skill and whether it was created (201) rather than updated (200).
    """
    project = get_project(project_name, "write")
    try:
        skill = find_skill(project, ref)
    except SkillNotFound:
        if is_id(ref):
            raise
        missing = [f for f in ("type", "params") if data.get(f) is None]
        if missing:
            raise Unprocessable(f"Skill '{shown(ref)}' does not exist; to create it, send "
                                + " and ".join(missing),
                                errors={"skill": {f: ["Missing data for required field."]
                                                  for f in missing}}) from None
        try:
            return create_skill(project_name, {**data, "name": ref}), True
        except NameTaken:
            raise Raced from None  # created meanwhile by another PUT: update that one
    before = {"name": skill.name, "type": skill.type, "params": skill.params}
    if data.get("name") is not None:
        skill.name = validate_name("skill", data["name"])
        skill.name_key = name_key(skill.name)
    if data.get("type") is not None:
        skill.type = data["type"]
    if data.get("params") is not None:
        params = merge(skill.params, data["params"])
        _check_size(skill.name, params)
        seal_fields(skill, {"params": params}, f"The skill '{skill.name}'")
    _check_params(skill.type, skill.params)
    _check_source(skill.params)
    audit.record_change("skill", "update", f"{project.name}.{skill.name}", before,
                        {"name": skill.name, "type": skill.type, "params": skill.params})
    commit(_taken(skill.name, project.name))
    return _view(project, skill), False


def delete_skill(project_name: str, ref: str) -> None:
    project = get_project(project_name, "write")
    skill = find_skill(project, ref)
    audit.record_change("skill", "delete", f"{project.name}.{skill.name}",
                        {"type": skill.type, "params": skill.params}, None)
    # The agent links go with it (ON DELETE CASCADE): every agent that used it leaves it.
    delete_or_gone(db.delete(Skill).where(Skill.id == skill.id),
                   lambda: SkillNotFound(ref, project.name))


def skills_by_name(project: Project, names: list[str]) -> dict[str, Skill]:
    """The project's skills with these names (by lower-cased key); UnknownReference naming
    the missing."""
    keys = {name_key(n) for n in names}
    found = {s.name_key: s for s in db.session.scalars(
        select(Skill).where(Skill.project_id == project.id, Skill.name_key.in_(keys)))}
    missing = [n for n in names if name_key(n) not in found]
    if missing:
        # 422, not 404: the request's target exists, the skills its body names do not.
        raise UnknownSkill(missing[0], project.name,
                           detail=f"Skill(s) {', '.join(repr(m) for m in missing)} do not "
                                  f"exist in project '{project.name}'")
    return found

