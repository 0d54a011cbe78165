"""What a service statement runs in: the context database and name resolution."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ProjectNotFound
from ..rules.names import SYSTEM_DATABASE
from ..services import projects as project_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.running import Statement
from ..sql.sources import SourceRegistry
from ..store import Project
from .errors import service_errors


@dataclass
class Context:
    db: str                          # context.db of the request (default project mindsdb)
    registry: SourceRegistry
    params: dict[str, Any] | None = None
    statement: Statement | None = None   # the running statement, when there is one
    query: str = ""                  # the statement's text as the caller wrote it
    # Projects found while resolving the statement's names, by lower-case name: a statement
    # names one several times (a search: the project, its models, its knowledge bases).
    found: dict[str, Project] = field(default_factory=dict, repr=False, compare=False)

    def is_source(self, name: str) -> bool:
        return self.registry.get(name) is not None

    def project(self, name: str | None = None) -> str:
        """The stored name of project ``name`` (default: the context's); an error if none."""
        name = name or self.db
        if self.is_source(name):
            raise SqlError(ErrorCode.UNSUPPORTED,
                           f"'{name}' is a data source, not a project: it holds no models, "
                           "skills or agents")
        with service_errors({ProjectNotFound: name}):
            return project_service.get_project(name).name

    def find_project(self, name: str) -> str | None:
        """The stored name of project ``name``, or None when there is no such project."""
        found = self.project_row(name)
        return found.name if found is not None else None

    def project_row(self, name: str) -> Project | None:
        """Project ``name`` as the caller may read it (``get_project``), or None; looked up
        once per statement."""
        if self.is_source(name) or name.lower() == SYSTEM_DATABASE:
            return None
        found = self.found.get(name.lower())
        if found is None:
            try:
                found = self.found[name.lower()] = project_service.get_project(name)
            except ProjectNotFound:
                return None
        return found

    def split(self, parts: list[str], kind: str) -> tuple[str, str]:
        """``[p, x]`` or ``[x]`` (in the context project) → (project, name).

        For models a trailing number is a version: ``p.m.2`` and ``m.2`` name version 2, as
        the ref ``m.2`` the services take (a model name never is all digits).
        """
        if kind == "model" and len(parts) in (2, 3) and parts[-1].isascii() \
                and parts[-1].isdigit():
            ref = f"{parts[-2]}.{parts[-1]}"
            return (parts[0], ref) if len(parts) == 3 else (self.db, ref)
        if len(parts) == 1:
            return self.db, parts[0]
        if len(parts) == 2:
            return parts[0], parts[1]
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       f"A {kind} is named {kind} or project.{kind}, not "
                       f"'{'.'.join(parts)}'")


def qualified(project: str, name: str) -> str:
    return f"{project}.{name}"
