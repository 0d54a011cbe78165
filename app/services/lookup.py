"""Finding a project's object by name or ID: one rule for skills, agents (and their 404s)."""

from collections.abc import Callable
from typing import Any

from sqlalchemy import Select

from ..errors import ObjectNotFound, ProjectNotFound, QuarryError
from ..extensions import db
from ..rules.names import is_id, lookup_key, ref_value
from ..store import Project
from .projects import get_project


def where_ref(query: Select, entity: Any, ref: str) -> Select:
    """Filter ``query`` to the object named ``ref``, or with ID ``ref`` when it is all digits."""
    return query.where((entity.id if is_id(ref) else entity.name_key) == ref_value(ref))


def taken_or_gone(project: Project, taken: Callable[[], QuarryError]
                  ) -> Callable[[], QuarryError]:
    """The error of an insert into ``project`` refused by a constraint: the name is taken
    (409) — or the project was deleted meanwhile and its foreign key refused the row (404).

    Returns the callable ``common.commit`` wants; the project's id and name are read now,
    while the object is loaded (after the rollback it would be reloaded from a gone row).
    """
    project_id, project_name = project.id, project.name

    def error() -> QuarryError:
        if db.session.get(Project, project_id) is None:
            return ProjectNotFound(project_name)
        return taken()

    return error


def find_in_project(query: Select, entity: Any, missing: type[ObjectNotFound],
                    project: Project, ref: str) -> Any:
    """What ``query`` (over ``entity``) finds by ``ref`` in ``project``, or ``missing`` (404)."""
    found = db.session.scalar(where_ref(query.where(entity.project_id == project.id),
                                        entity, ref))
    if found is None:
        raise missing(ref, project.name)
    return found


def view_by_ref(views: Callable[[Select], list[dict[str, Any]]], query: Select, entity: Any,
                missing: type[ObjectNotFound], project_name: str, ref: str) -> dict[str, Any]:
    """One view by name or ID, the project matched in the same statement.

    Only when nothing matches is the project looked up, to say which of the two is missing.
    """
    found = views(where_ref(query.join(Project, Project.id == entity.project_id)
                            .where(Project.name_key == lookup_key(project_name)), entity, ref))
    if not found:
        raise missing(ref, get_project(project_name).name)
    return found[0]
