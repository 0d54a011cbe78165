"""Projects: the namespaces that hold models, skills and agents."""

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ..errors import Conflict, NameReserved, ProjectNotEmpty, ProjectNotFound
from ..extensions import db
from ..kb import stores
from ..rules.names import DEFAULT_PROJECT, lookup_key, name_key, validate_database_name
from ..sql.sources import current_sources
from ..store import Agent, DatabaseName, KnowledgeBase, MLModel, Project, Skill
from . import access, audit
from . import databases as database_service
from .common import commit, delete_or_gone


def list_projects() -> list[Project]:
    """The projects the caller may see (all of them when access checks are off)."""
    query = select(Project).order_by(Project.id)
    if (visible := access.visible_project_filter()) is not None:
        query = query.where(visible)
    return list(db.session.scalars(query))


def get_project(name: str, need: str = "read") -> Project:
    """The project, when the caller may ``need`` it ("read", "write", "own"); a project it
    may not see is not found (404), one it may not change is Forbidden (403)."""
    project = db.session.scalar(select(Project).where(Project.name_key == lookup_key(name)))
    if project is None:
        raise ProjectNotFound(name)
    return access.require_project(project, need)


def check_free_database_name(name: str) -> None:
    """NameReserved (409) when ``name`` belongs to a data source.

    In SQL, projects and data sources are both databases (SHOW DATABASES, ``db.table``): a
    project named like a data source could never be reached there. One rule for both
    directions, ``databases.name_owner``; a data source configured (in QUARRY_DATA_SOURCES)
    with an existing project's name is logged at start (``shadowed_projects``).
    """
    if database_service.name_owner(name) in ("configured", "stored"):
        raise NameReserved(f"'{name}' is the name of a data source; projects and data "
                           "sources share one name space (SHOW DATABASES)", name=name)


def create_project(name: str) -> Project:
    validate_database_name("project", name)  # information_schema is taken (409)
    access.require_create_project()
    check_free_database_name(name)
    project = Project(name=name, name_key=name_key(name))
    # The name's row: a data source created at the same moment with this name cannot both
    # commit (the store's primary key decides, across workers and instances).
    db.session.add(DatabaseName(name_key=name_key(name), kind="project"))
    db.session.add(project)
    try:
        db.session.flush()  # the id, for the creator's membership in the same transaction
    except IntegrityError:
        db.session.rollback()
        raise database_service.name_taken(name, "project") from None
    access.add_creator(project)
    audit.record_change("project", "create", project.name, None, {"name": project.name})
    commit(lambda: database_service.name_taken(name, "project"))
    return project


def project_contents(project: Project) -> dict[str, list[str]]:
    """Names of the models, skills and agents a project holds, by kind."""
    contents = {}
    for kind, entity in (("models", MLModel), ("skills", Skill), ("agents", Agent),
                         ("knowledge_bases", KnowledgeBase)):
        names = db.session.scalars(select(entity.name).where(entity.project_id == project.id)
                                   .order_by(entity.id)).all()
        if names:
            contents[kind] = list(dict.fromkeys(names))
    return contents


def delete_project(name: str, *, cascade: bool = False) -> None:
    if name_key(name) == DEFAULT_PROJECT:
        # The default project always exists (MindsDB clients assume it): a rule about the
        # state of the store, not about the request's shape, so 409 rather than 400.
        raise Conflict(f"The default project '{DEFAULT_PROJECT}' cannot be deleted",
                       title="Project cannot be deleted")
    project = get_project(name, "own")
    contents = project_contents(project)
    if contents and not cascade:
        listing = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in contents.items())
        raise ProjectNotEmpty(f"Project '{project.name}' is not empty ({listing}); delete them "
                              "first or pass cascade=true", contents=contents)
    # The foreign keys cascade in the database; the ORM objects of the contents are not
    # loaded, so one DELETE removes the project and everything in it.
    audit.record_change("project", "delete", project.name, {"name": project.name,
                                                            **contents}, None)
    db.session.execute(db.delete(DatabaseName).where(
        DatabaseName.name_key == project.name_key, DatabaseName.kind == "project"))
    # The knowledge bases' rows go with the project; their tables in the index file after.
    # Tables in a vector store first (one that cannot be reached leaves the project as it
    # was); the index file's after the commit.
    later = []
    for uid, params in db.session.execute(select(KnowledgeBase.uid, KnowledgeBase.params)
                                          .where(KnowledgeBase.project_id == project.id)):
        index, key = stores.index_of(uid, params)
        if params.get("storage"):
            index.drop(key)
        else:
            later.append((index, key))
    delete_or_gone(db.delete(Project).where(Project.id == project.id),
                   lambda: ProjectNotFound(name))
    for index, key in later:
        index.drop(key)


def shadowed_projects() -> list[str]:
    """Projects whose name a configured data source also has (SQL reaches the data source)."""
    registry = current_sources()
    return [p.name for p in list_projects() if registry.is_configured(p.name)]
