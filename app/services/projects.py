"""Projects: the namespaces that hold models, skills and agents."""

from sqlalchemy import select

from ..errors import BadRequest, NameReserved, NameTaken, ProjectNotEmpty, ProjectNotFound
from ..extensions import db
from ..rules.names import DEFAULT_PROJECT, lookup_key, name_key, validate_database_name
from ..sql.sources import current_sources
from ..store import Agent, MLModel, Project, Skill
from . import databases as database_service
from .common import commit, delete_or_gone


def list_projects() -> list[Project]:
    return list(db.session.scalars(select(Project).order_by(Project.id)))


def get_project(name: str) -> Project:
    project = db.session.scalar(select(Project).where(Project.name_key == lookup_key(name)))
    if project is None:
        raise ProjectNotFound(name)
    return project


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
    validate_database_name("project", name)  # information_schema is not a name (400)
    check_free_database_name(name)
    project = Project(name=name, name_key=name_key(name))
    db.session.add(project)
    commit(lambda: NameTaken("Project", name))
    return project


def project_contents(project: Project) -> dict[str, list[str]]:
    """Names of the models, skills and agents a project holds, by kind."""
    contents = {}
    for kind, entity in (("models", MLModel), ("skills", Skill), ("agents", Agent)):
        names = db.session.scalars(select(entity.name).where(entity.project_id == project.id)
                                   .order_by(entity.id)).all()
        if names:
            contents[kind] = list(dict.fromkeys(names))
    return contents


def delete_project(name: str, *, cascade: bool = False) -> None:
    if name_key(name) == DEFAULT_PROJECT:
        raise BadRequest(f"The default project '{DEFAULT_PROJECT}' cannot be deleted",
                         title="Project cannot be deleted")
    project = get_project(name)
    contents = project_contents(project)
    if contents and not cascade:
        listing = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in contents.items())
        raise ProjectNotEmpty(f"Project '{project.name}' is not empty ({listing}); delete them "
                              "first or pass cascade=true", contents=contents)
    # The foreign keys cascade in the database; the ORM objects of the contents are not
    # loaded, so one DELETE removes the project and everything in it.
    delete_or_gone(db.delete(Project).where(Project.id == project.id),
                   lambda: ProjectNotFound(name))


def shadowed_projects() -> list[str]:
    """Projects whose name a configured data source also has (SQL reaches the data source)."""
    registry = current_sources()
    return [p.name for p in list_projects() if registry.is_configured(p.name)]
