"""Who may do what: user roles, project members, data-source grants, narrowed tokens.

The rules, each in one place for REST and SQL:

- Checks are on only when sign-in is required (AUTH_REQUIRED): the entry guard then puts
  the caller's ``Actor`` on ``flask.g`` for the request. Without an actor (sign-in off, the
  command line, a background training) nothing is checked, as before roles existed.
- An admin may do everything. A member sees a project only while holding a role in it:
  ``viewer`` reads, describes and predicts; ``editor`` also creates, changes and drops
  models, skills and agents; ``owner`` also manages the members and drops the project.
  A project the caller may not see answers 404, as if it did not exist, so that names do
  not leak; a project seen but not changeable answers 403.
- A member may query a data source when granted ``query`` on it or when it is public.
- A token may be narrowed to one project and to reading only; it never exceeds its owner.
- Rights are read from the store on every request (no cache), so that a revoke made through
  one worker or instance holds on the very next request of every other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import current_app, g, has_request_context
from sqlalchemy import delete, func, select

from ..errors import BadRequest, Conflict, Forbidden, NotFound, ProjectNotFound
from ..extensions import db
from ..rules.names import name_key
from ..sql.sources import SourceRegistry, VisibleSources, current_sources
from ..store import Project, ProjectMember, SourceGrant, User
from . import audit

ROLES = ("admin", "member")
PROJECT_ROLES = ("owner", "editor", "viewer")
SOURCE_PRIVILEGES = ("query",)
# What each need asks of a project role.
_LEVEL = {"viewer": 1, "editor": 2, "owner": 3}
NEEDS = {"read": 1, "write": 2, "own": 3}


@dataclass(frozen=True)
class Actor:
    """The signed-in caller whose rights this request is checked against."""

    user_id: int
    user_name: str
    admin: bool
    project_key: str | None = None   # a token narrowed to one project
    read_only: bool = False          # a token narrowed to reading
    # Name keys of the data sources granted to the user, read with the credential on this
    # request; None when not read (then the store is asked).
    sources: frozenset[str] | None = None


def set_actor(actor: Actor | None) -> None:
    """Called by the entry guard once per request (never cached across requests)."""
    g.quarry_actor = actor


def current_actor() -> Actor | None:
    """The caller to check, or None when checks are off for this call."""
    if not has_request_context():
        return None
    return g.get("quarry_actor")


def actor_of(user_id: int | None, user_name: str | None,
             project_key: str | None = None) -> Actor | None:
    """The rights user ``user_id`` holds now, read from the store, for work done in its
    name without a request of its own (a job's run). None when sign-in is off: nothing is
    checked then, as for any caller. Forbidden when the user is gone or was never known."""
    if not current_app.config["AUTH_REQUIRED"]:
        return None
    user = db.session.get(User, user_id) if user_id is not None else None
    if user is None:
        who = f"'{user_name}'" if user_name else "nobody (sign-in was off)"
        raise Forbidden(f"The job's creator {who} is no longer a user: the job cannot run "
                        "as anyone; drop it and create it again", title="Creator unknown")
    return Actor(user.id, user.name, user.role == "admin", project_key)


def actor_name() -> str | None:
    actor = current_actor()
    return actor.user_name if actor is not None else None


# --- projects --------------------------------------------------------------------------------

def project_role(project: Project, actor: Actor | None = None) -> str | None:
    """The caller's role in ``project`` ("owner" for an admin), or None when it may not see it."""
    actor = actor or current_actor()
    if actor is None:
        return "owner"
    if actor.project_key is not None and actor.project_key != project.name_key:
        return None
    if actor.admin:
        return "owner"
    return db.session.scalar(select(ProjectMember.role).where(
        ProjectMember.project_id == project.id, ProjectMember.user_id == actor.user_id))


def require_project(project: Project, need: str) -> Project:
    """``project`` when the caller may ``need`` ("read", "write", "own") it; 404 when it may
    not even see it, 403 when it sees it but may not do this."""
    actor = current_actor()
    if actor is None:
        return project
    role = project_role(project, actor)
    if role is None:
        raise ProjectNotFound(project.name)
    if need != "read" and actor.read_only:
        raise Forbidden("This token is read-only: it may read, describe and predict, "
                        "not change anything", title="Read-only token")
    if _LEVEL[role] < NEEDS[need]:
        wanted = {"write": "editor", "own": "owner"}[need]
        raise Forbidden(f"Your role in project '{project.name}' is {role}; this needs "
                        f"{wanted} (ask an owner of the project or an admin)",
                        title="Not allowed in this project", role=role)
    return project


def visible_project_filter() -> Any | None:
    """A WHERE clause on Project limiting a listing to what the caller sees (None: all)."""
    actor = current_actor()
    if actor is None:
        return None
    clauses = []
    if actor.project_key is not None:
        clauses.append(Project.name_key == actor.project_key)
    if not actor.admin:
        clauses.append(Project.id.in_(select(ProjectMember.project_id)
                                      .where(ProjectMember.user_id == actor.user_id)))
    return db.and_(*clauses) if clauses else None


def require_create_project() -> None:
    """Any signed-in user may create a project (and owns it); a narrowed token may not."""
    actor = current_actor()
    if actor is not None and (actor.read_only or actor.project_key is not None):
        raise Forbidden("This token is narrowed (to one project or to reading): it cannot "
                        "create projects", title="Narrowed token")


def add_creator(project: Project) -> None:
    """Make the caller owner of the project it just added (same transaction)."""
    actor = current_actor()
    if actor is not None:
        db.session.add(ProjectMember(project_id=project.id, user_id=actor.user_id,
                                     role="owner"))


def _user(name: str) -> User:
    user = db.session.scalar(select(User).where(User.name_key == name.strip().lower()))
    if user is None:
        raise NotFound(f"User '{name}' does not exist", title="User not found")
    return user


def _project(name: str) -> Project:
    project = db.session.scalar(select(Project).where(Project.name_key == name_key(name)))
    if project is None:
        raise ProjectNotFound(name)
    return project


def list_members(project_name: str) -> list[dict[str, Any]]:
    """The members of a project and their roles (any member may see them)."""
    project = require_project(_project(project_name), "read")
    rows = db.session.execute(
        select(User.name, ProjectMember.role, ProjectMember.created_at)
        .join(User, User.id == ProjectMember.user_id)
        .where(ProjectMember.project_id == project.id).order_by(User.name_key)).all()
    return [{"user": n, "role": r, "since": c} for n, r, c in rows]


def set_member(project_name: str, user_name: str, role: str) -> dict[str, Any]:
    """Give ``user_name`` ``role`` in a project (owners and admins); the last owner stays."""
    if role not in PROJECT_ROLES:
        raise BadRequest(f"Unknown project role {role!r}: one of {', '.join(PROJECT_ROLES)}",
                         title="Unknown role", errors={"role": [f"One of {PROJECT_ROLES}"]})
    project = require_project(_project(project_name), "own")
    user = _user(user_name)
    member = _member(project, user)
    before = {"role": member.role} if member is not None else None
    if member is None:
        member = ProjectMember(project_id=project.id, user_id=user.id, role=role)
        db.session.add(member)
    else:
        if member.role == "owner" and role != "owner":
            _keep_an_owner(project, user)
        member.role = role
    audit.record_change("grant", "grant", f"project {project.name} → {user.name}",
                        before, {"role": role})
    db.session.commit()
    return {"user": user.name, "role": role, "since": member.created_at}


def remove_member(project_name: str, user_name: str) -> None:
    """Take a user's role in a project away; 409 for the last owner."""
    project = require_project(_project(project_name), "own")
    user = _user(user_name)
    member = _member(project, user)
    if member is None:
        raise NotFound(f"User '{user.name}' holds no role in project '{project.name}'",
                       title="Member not found")
    if member.role == "owner":
        _keep_an_owner(project, user)
    audit.record_change("grant", "revoke", f"project {project.name} → {user.name}",
                        {"role": member.role}, None)
    db.session.delete(member)
    db.session.commit()


def _member(project: Project, user: User) -> ProjectMember | None:
    return db.session.scalar(select(ProjectMember).where(
        ProjectMember.project_id == project.id, ProjectMember.user_id == user.id))


def _keep_an_owner(project: Project, leaving: User) -> None:
    # Locked on PostgreSQL (FOR UPDATE), so two owners demoting each other at once cannot
    # both pass; SQLite serialises writers anyway.
    owners = db.session.scalars(select(ProjectMember.user_id).where(
        ProjectMember.project_id == project.id, ProjectMember.role == "owner")
        .with_for_update()).all()
    if set(owners) <= {leaving.id}:
        raise Conflict(f"'{leaving.name}' is the last owner of project '{project.name}'; "
                       "make another user owner first", title="Last owner")


# --- data sources ----------------------------------------------------------------------------

def queryable_sources() -> SourceRegistry | VisibleSources:
    """The data sources as the caller sees them: those it may not query do not exist.

    Statements, prediction JOINs, training queries and skills resolve source names through
    this, so that a source the caller may not query answers exactly as a missing one (same
    error code and message, listing only what the caller may query). Read once per request
    (the caller's grants: one query), never cached beyond it.
    """
    registry = current_sources()
    actor = current_actor()
    if actor is None or actor.admin:
        return registry
    view = g.get("quarry_visible_sources")
    if view is None:
        granted = _granted(actor)
        hidden = frozenset(name_key(n) for n in registry.names()
                           if name_key(n) not in granted and not _public(registry, n))
        view = g.quarry_visible_sources = VisibleSources(registry, hidden)
    return view


def _public(registry: SourceRegistry, name: str) -> bool:
    source = registry.get(name)
    return bool(source is not None and source.public)


def is_public_source(name: str) -> bool:
    source = current_sources().get(name)
    return bool(source is not None and getattr(source, "public", False))


def _granted(actor: Actor) -> frozenset[str]:
    if actor.sources is not None:
        return actor.sources  # read with the credential, on this request
    return frozenset(db.session.scalars(select(SourceGrant.source_key)
                                        .where(SourceGrant.user_id == actor.user_id)))


def may_query(source_name: str, actor: Actor | None = None) -> bool:
    actor = actor or current_actor()
    if actor is None or actor.admin or is_public_source(source_name):
        return True
    return name_key(source_name) in _granted(actor)


def require_source(source_name: str) -> None:
    """Unless the caller may query data source ``source_name``: the answer to a source that
    does not exist (its name must not leak; the callers resolve names through
    ``queryable_sources`` first, so this is the last guard)."""
    if not may_query(source_name):
        known = ", ".join(queryable_sources().names()) or "none"
        raise BadRequest(f"Data source '{source_name}' does not exist; configured data "
                         f"sources: {known}", title="Unknown data source")


def require_admin(what: str) -> None:
    actor = current_actor()
    if actor is not None and (not actor.admin or actor.read_only):
        raise Forbidden(f"Only an admin may {what}", title="Admin only")


def grant_source(source_name: str, user_name: str, privilege: str = "query") -> None:
    """GRANT query ON DATABASE s TO u (admins)."""
    require_admin("grant rights on data sources")
    source = _source(source_name)
    user = _user(user_name)
    if privilege.lower() not in SOURCE_PRIVILEGES:
        raise BadRequest(f"Unknown privilege {privilege!r} on a data source: only "
                         f"{', '.join(SOURCE_PRIVILEGES)}", title="Unknown privilege")
    exists = db.session.scalar(select(SourceGrant).where(
        SourceGrant.user_id == user.id, SourceGrant.source_key == name_key(source)))
    if exists is None:
        db.session.add(SourceGrant(source_key=name_key(source), user_id=user.id,
                                   privilege="query"))
        audit.record_change("grant", "grant", f"database {source} → {user.name}", None,
                            {"privilege": "query"})
    db.session.commit()


def revoke_source(source_name: str, user_name: str) -> None:
    """REVOKE query ON DATABASE s FROM u (admins); 404 when there was no such grant."""
    require_admin("revoke rights on data sources")
    user = _user(user_name)
    deleted = db.session.execute(delete(SourceGrant).where(
        SourceGrant.user_id == user.id,
        SourceGrant.source_key == name_key(source_name))).rowcount
    if not deleted:
        db.session.rollback()
        raise NotFound(f"User '{user.name}' holds no grant on data source '{source_name}'",
                       title="Grant not found")
    audit.record_change("grant", "revoke", f"database {source_name} → {user.name}",
                        {"privilege": "query"}, None)
    db.session.commit()


def _source(name: str) -> str:
    source = current_sources().get(name)
    if source is None:
        raise NotFound(f"Data source '{name}' does not exist", title="Database not found")
    return source.name


def grant_project_sql(project_name: str, user_name: str, role: str) -> None:
    set_member(project_name, user_name, role.lower())


def revoke_project_sql(project_name: str, user_name: str) -> None:
    remove_member(project_name, user_name)


def list_grants(user_name: str | None = None) -> list[tuple[str, str, str, str]]:
    """(user, kind, object, right) rows: the caller's own, or any user's for an admin."""
    actor = current_actor()
    if user_name is not None and actor is not None and not actor.admin \
            and name_key(user_name) != name_key(actor.user_name):
        raise Forbidden("Only an admin may see another user's grants", title="Admin only")
    if user_name is None and actor is not None:
        user_name = actor.user_name
    users = select(User.id, User.name, User.role)
    if user_name is not None:
        users = users.where(User.id == _user(user_name).id)
    rows: list[tuple[str, str, str, str]] = []
    for uid, uname, role in db.session.execute(users.order_by(User.name_key)).all():
        rows.append((uname, "role", "", role))
        rows += [(uname, "project", p, r) for p, r in db.session.execute(
            select(Project.name, ProjectMember.role)
            .join(Project, Project.id == ProjectMember.project_id)
            .where(ProjectMember.user_id == uid).order_by(Project.name_key)).all()]
        rows += [(uname, "database", k, "query") for (k,) in db.session.execute(
            select(SourceGrant.source_key).where(SourceGrant.user_id == uid)
            .order_by(SourceGrant.source_key)).all()]
    return rows


# --- users -----------------------------------------------------------------------------------

def set_role(user_name: str, role: str) -> User:
    """Make a user admin or member; the last admin stays one."""
    if role not in ROLES:
        raise BadRequest(f"Unknown role {role!r}: admin or member", title="Unknown role")
    require_admin("change roles")
    user = _user(user_name)
    if user.role == "admin" and role != "admin":
        admins = db.session.scalar(select(func.count()).select_from(User)
                                   .where(User.role == "admin"))
        if admins <= 1:
            raise Conflict(f"'{user.name}' is the last admin", title="Last admin")
    before = {"role": user.role}
    user.role = role
    audit.record_change("user", "update", user.name, before, {"role": role})
    db.session.commit()
    return user
