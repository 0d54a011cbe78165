"""Projects: the namespaces that hold models, skills and agents."""

from sqlalchemy import func, select

from ..errors import Conflict, NotFound
from ..extensions import db
from ..store import Agent, MLModel, Project, Skill
from .common import commit
from .names import name_key, validate_name

DEFAULT_PROJECT = "mindsdb"


def list_projects() -> list[Project]:
    return list(db.session.scalars(select(Project).order_by(Project.id)))


def get_project(name: str) -> Project:
    project = db.session.scalar(select(Project).where(Project.name_key == name_key(name)))
    if project is None:
        raise NotFound(f"Project '{name}' does not exist", title="Project not found")
    return project


def create_project(name: str, *, if_not_exists: bool = False) -> Project:
    validate_name("project", name)
    project = Project(name=name, name_key=name_key(name))
    db.session.add(project)
    try:
        commit(lambda: Conflict(f"Project '{name}' already exists",
                                title="Project already exists"))
    except Conflict:
        if if_not_exists:
            return get_project(name)
        raise
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
        # The default project always exists (MindsDB clients assume it): a rule about the
        # state of the store, not about the request's shape, so 409 rather than 400.
        raise Conflict(f"The default project '{DEFAULT_PROJECT}' cannot be deleted",
                       title="Project cannot be deleted")
    project = get_project(name)
    contents = project_contents(project)
    if contents and not cascade:
        listing = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in contents.items())
        raise Conflict(f"Project '{project.name}' is not empty ({listing}); delete them first "
                       "or pass cascade=true", title="Project not empty", contents=contents)
    # The foreign keys cascade in the database; the ORM objects of the contents are not
    # loaded, so one DELETE removes the project and everything in it.
    db.session.execute(db.delete(Project).where(Project.id == project.id))
    db.session.commit()


def count_projects() -> int:
    return db.session.scalar(select(func.count()).select_from(Project)) or 0
