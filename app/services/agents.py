"""Agents: an LLM configuration of a project with the skills it may use."""

from collections.abc import Callable
from typing import Any

from flask import current_app
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from ..errors import AgentNotFound, NameTaken, UnknownModel
from ..extensions import db
from ..rules.names import lookup_key, name_key, validate_name
from ..rules.params import require_params_within
from ..rules.secrets import keep_masked, merge
from ..store import Agent, AgentSkill, MLModel, Project, Skill
from ..store.types import utcnow
from . import audit
from .common import commit, delete_or_gone, retried_on_race
from .credentials import opened_fields, rotate_tokens, seal_fields
from .lookup import find_in_project, taken_or_gone, view_by_ref
from .projects import get_project
from .skills import skills_by_name
from .views import agent_query, agent_views

# Fields copied as they come; None means "leave as it was" on update (clients send every field).
SCALAR_FIELDS = ("model_name", "provider", "prompt_template")
DICT_FIELDS = ("model", "data")
# The fields whose secrets are kept encrypted in ``Agent.secrets`` (the mask in their place).
SECRET_FIELDS = ("params", *DICT_FIELDS)


def _taken(name: str, project_name: str) -> Callable[[], NameTaken]:
    # Names read before the commit: a rollback expires the loaded objects.
    return lambda: NameTaken("Agent", name, project_name)


def _query():
    # For updates: the agent as an ORM object with its links and their skills.
    return select(Agent).options(selectinload(Agent.skill_links).selectinload(AgentSkill.skill))


def list_agents(project_name: str) -> list[dict[str, Any]]:
    project = get_project(project_name)
    return agent_views(agent_query().where(Agent.project_id == project.id).order_by(Agent.id))


def find_agent(project: Project, ref: str) -> Agent:
    return find_in_project(_query(), Agent, AgentNotFound, project, ref)


def get_agent(project_name: str, ref: str) -> dict[str, Any]:
    return view_by_ref(agent_views, agent_query(), Agent, AgentNotFound, project_name, ref)


def _view(project: Project, agent: Agent) -> dict[str, Any]:
    """The view of an agent just written (gone if another request deleted it since: 404)."""
    views = agent_views(agent_query().where(Agent.id == agent.id))
    if not views:
        raise AgentNotFound(agent.name, project.name)
    return views[0]


def _skill_specs(items: list[Any]) -> list[tuple[str, dict[str, Any] | None]]:
    """Skills given as names or as {"name", "parameters"} → (name, parameters) pairs."""
    specs = []
    for item in items:
        if isinstance(item, str):
            specs.append((item, None))
        else:
            specs.append((item["name"], item.get("parameters")))
    return specs


def _check_model(project: Project, agent: Agent) -> None:
    # A "mindsdb" provider means the agent's LLM is a model of this project: it must exist.
    if (agent.provider or "").lower() != "mindsdb" or not agent.model_name:
        return
    exists = db.session.scalar(select(MLModel.id).where(
        MLModel.project_id == project.id, MLModel.name_key == lookup_key(agent.model_name)))
    if exists is None:
        raise UnknownModel(agent.model_name, project.name)


def _attach(project: Project, agent: Agent, specs: list[tuple[str, dict | None]]) -> None:
    found = skills_by_name(project, [name for name, _ in specs])
    linked = {link.skill_id: link for link in agent.skill_links}
    for name, parameters in specs:
        skill = found[name_key(name)]
        if skill.id in linked:
            if parameters is not None:
                _seal_link(linked[skill.id], parameters, agent)
            continue
        link = AgentSkill(skill=skill, position=len(agent.skill_links))
        _seal_link(link, parameters, agent)
        agent.skill_links.append(link)
        linked[skill.id] = link


def _seal_link(link: AgentSkill, parameters: dict[str, Any] | None, agent: Agent) -> None:
    """The parameters the agent gives a skill, their secrets encrypted as the agent's."""
    seal_fields(link, {"parameters": parameters}, f"The agent '{agent.name}'")


def _replace(project: Project, agent: Agent, specs: list[tuple[str, dict | None]]) -> None:
    """Make the agent's skills exactly ``specs``, in that order, with those parameters."""
    found = skills_by_name(project, [name for name, _ in specs])
    order = {found[name_key(name)].id: i for i, (name, _) in enumerate(specs)}
    agent.skill_links = [link for link in agent.skill_links if link.skill_id in order]
    for link in agent.skill_links:
        link.parameters = link.secrets = None  # replaced: what the new list says, or nothing
    _attach(project, agent, specs)
    agent.skill_links.sort(key=lambda link: order[link.skill.id])


def create_agent(project_name: str, data: dict[str, Any]) -> dict[str, Any]:
    project = get_project(project_name, "write")
    name = validate_name("agent", data["name"])
    params = data.get("params") or {}
    require_params_within(params, current_app.config["PARAMS_MAX_BYTES"], f"agent '{name}'")
    agent = Agent(project_id=project.id, name=name, name_key=name_key(name),
                  **{f: data.get(f) for f in SCALAR_FIELDS})
    _seal(agent, {"params": params, **{f: data.get(f) for f in DICT_FIELDS}})
    _check_model(project, agent)
    with db.session.no_autoflush:
        _attach(project, agent, _skill_specs(data.get("skills") or []))
    db.session.add(agent)
    audit.record_change("agent", "create", f"{project.name}.{name}", None,
                        {"model_name": agent.model_name, "params": agent.params})
    commit(taken_or_gone(project, _taken(name, project.name)))
    return _view(project, agent)


@retried_on_race
def update_agent(project_name: str, ref: str, data: dict[str, Any]) -> dict[str, Any]:
    project = get_project(project_name, "write")
    agent = find_agent(project, ref)
    before = {"name": agent.name, "model_name": agent.model_name, "params": agent.params}
    # As stored (secrets masked): a mask sent back keeps its secret (``seal_fields``).
    clear = {f: getattr(agent, f) for f in SECRET_FIELDS}
    with db.session.no_autoflush:
        if data.get("name") is not None:
            agent.name = validate_name("agent", data["name"])
            agent.name_key = name_key(agent.name)
        for field in SCALAR_FIELDS:
            if data.get(field) is not None:
                setattr(agent, field, data[field])
        if data.get("params") is not None:
            clear["params"] = merge(clear["params"], data["params"])
            require_params_within(clear["params"], current_app.config["PARAMS_MAX_BYTES"],
                                  f"agent '{agent.name}'")
        for field in DICT_FIELDS:
            if data.get(field) is not None:
                clear[field] = keep_masked(clear[field], data[field])
        _seal(agent, clear)
        _check_model(project, agent)
        if data.get("skills") is not None:
            specs = _skill_specs(data["skills"])
            _replace(project, agent, specs)
        if data.get("skills_to_add"):
            _attach(project, agent, _skill_specs(data["skills_to_add"]))
        if data.get("skills_to_remove"):
            drop = {name_key(n) for n, _ in _skill_specs(data["skills_to_remove"])}
            agent.skill_links = [link for link in agent.skill_links
                                 if link.skill.name_key not in drop]
        for position, link in enumerate(agent.skill_links):
            link.position = position
        # Changes to the skill links alone do not touch the agents row: say it changed.
        agent.updated_at = utcnow()
    audit.record_change("agent", "update", f"{project.name}.{agent.name}", before,
                        {"name": agent.name, "model_name": agent.model_name,
                         "params": agent.params})
    commit(_taken(agent.name, project.name))
    return _view(project, agent)


def agent_for_use(project_name: str, ref: str) -> dict[str, Any]:
    """The agent's view with its secrets in clear: for calling its model, never an answer."""
    view = get_agent(project_name, ref)
    token = db.session.scalar(select(Agent.secrets).where(Agent.id == view["id"]))
    view.update(opened_fields({f: view[f] for f in SECRET_FIELDS}, token))
    return view


def _seal(agent: Agent, clear: dict[str, Any]) -> None:
    seal_fields(agent, {**clear, "params": clear.get("params") or {}},
                f"The agent '{agent.name}'")


def rotate_secrets() -> int:
    """Encrypt every agent's and skill's secrets again with the newest key; how many."""
    count = sum(rotate_tokens(db.session.scalars(select(kind).where(
        kind.secrets.is_not(None))).all(), label) for kind, label in (
            (Agent, "agent"), (Skill, "skill"), (AgentSkill, "an agent's use of a skill")))
    db.session.commit()
    return count


def delete_agent(project_name: str, ref: str) -> None:
    project = get_project(project_name, "write")
    agent = find_agent(project, ref)
    audit.record_change("agent", "delete", f"{project.name}.{agent.name}",
                        {"model_name": agent.model_name, "params": agent.params}, None)
    delete_or_gone(db.delete(Agent).where(Agent.id == agent.id),
                   lambda: AgentNotFound(ref, project.name))
