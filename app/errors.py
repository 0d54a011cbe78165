"""One error type tree, and the handlers that turn any error into an RFC 7807 problem.

Services raise these typed errors; views never build error bodies themselves.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from datetime import UTC, datetime
from typing import Any

import psycopg
from flask import Flask, Response, current_app, json, request
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import exc as orm_exc
from werkzeug.exceptions import HTTPException

from .extensions import release_session

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger(__name__)


def shown(text: str, limit: int = 80) -> str:
    """``text`` as a message quotes it: cut short when long, so that a name of a megabyte
    does not come back in the answer."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


class QuarryError(Exception):
    """Base of every error the service reports to a caller."""

    status = 500
    title = "Internal server error"

    def __init__(self, detail: str, *, title: str | None = None,
                 errors: dict[str, Any] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        if title is not None:
            self.title = title
        self.errors = errors
        self.extra = extra

    def within(self, key: str) -> QuarryError:
        """This error with its field errors placed under ``key``: where the fields sit in a
        request body that wraps them (``{"knowledge_base": {…}}``), so that each error's
        path is its field's path from the body's root."""
        if self.errors is not None:
            self.errors = {key: self.errors}
        return self


class BadRequest(QuarryError):
    status = 400
    title = "Bad request"


class Unprocessable(BadRequest):
    """A request of the documented shape whose content cannot be acted on.

    400 means the request does not match its schema in the OpenAPI document; a request that
    does, but says something the service cannot do (SQL that is not a CREATE MODEL
    statement, prediction rows the model cannot read), is refused with 422, so that a
    client (or a fuzzer) can tell a malformed request from a refused one. A subclass of
    BadRequest: the SQL endpoint reports both as an invalid statement.
    """

    status = 422
    title = "Unprocessable request"


class Unauthorized(QuarryError):
    status = 401
    title = "Unauthorized"


class Forbidden(QuarryError):
    """Signed in, but this caller's role or grants do not allow it (app/services/access.py)."""

    status = 403
    title = "Forbidden"


class NotFound(QuarryError):
    status = 404
    title = "Not found"


class Conflict(QuarryError):
    status = 409
    title = "Conflict"


class PayloadTooLarge(QuarryError):
    status = 413
    title = "Payload too large"


class TooManyRequests(QuarryError):
    status = 429
    title = "Too many requests"


class StoreUnavailable(QuarryError):
    status = 503
    title = "Metadata store unavailable"


class VectorStoreUnavailable(QuarryError):
    """A vector store an administrator configured for knowledge bases cannot be reached: the
    message names the store, never its address or password."""

    status = 503
    title = "Vector store unavailable"


class EngineUnavailable(QuarryError):
    """The cluster engine federated statements run on (Spark Connect) cannot be reached or
    refuses the session: the statement did not run; it may be sent again later."""

    status = 503
    title = "Federation engine unavailable"


# --- What went wrong, by type: callers (the SQL adapter, IF EXISTS) tell errors apart by
# their class, never by their title or message text.

class ProjectNotFound(NotFound):
    title = "Project not found"

    def __init__(self, project: str) -> None:
        super().__init__(f"Project '{shown(project)}' does not exist")
        self.project = project


class DatabaseNotFound(NotFound):
    """A database (data source or project) by that name does not exist."""

    title = "Database not found"

    def __init__(self, name: str, *, detail: str | None = None) -> None:
        super().__init__(detail or f"Database '{shown(name)}' does not exist")
        self.name = name


class ObjectNotFound(NotFound):
    """A model, skill or agent that its project does not hold."""

    kind = "Object"

    def __init__(self, ref: str, project: str, *, detail: str | None = None) -> None:
        super().__init__(detail or f"{self.kind} '{shown(ref)}' does not exist in project "
                                   f"'{project}'")
        self.ref = ref
        self.project = project


class ModelNotFound(ObjectNotFound):
    kind = "Model"
    title = "Model not found"


class SkillNotFound(ObjectNotFound):
    kind = "Skill"
    title = "Skill not found"


class AgentNotFound(ObjectNotFound):
    kind = "Agent"
    title = "Agent not found"


class UnknownReference(ObjectNotFound):
    """The request's body names an object that does not exist (an agent's skill or model).

    422, not 404: the request's target (the project, the agent) exists, and a 404 would tell
    the client it does not. Still a NotFound by type: the SQL endpoint reports it as "not
    found", since there the statement names both.
    """

    status = 422


class UnknownSkill(UnknownReference, SkillNotFound):
    pass


class UnknownModel(UnknownReference, ModelNotFound):
    pass


class NameTaken(Conflict):
    """Another object of the same name space already has this name (case-insensitively)."""

    def __init__(self, kind: str, name: str, project: str | None = None) -> None:
        where = f" in project '{project}'" if project else ""
        super().__init__(f"{kind} '{name}' already exists{where}; choose another name",
                         title=f"{kind} already exists")
        self.kind = kind
        self.name = name


class NameReserved(Conflict):
    """The name belongs to something else that shares the name space: a data source, or
    ``information_schema`` (projects and data sources are both databases in SQL)."""

    title = "Name reserved"

    def __init__(self, detail: str, *, name: str) -> None:
        super().__init__(detail)
        self.name = name


class FileExists(Conflict):
    """An upload to the name of a stored file without ?overwrite=true: 409 (MindsDB answers
    400, with this title and detail), so that a client can tell it from a malformed request."""

    title = "File already exists"

    def __init__(self, name: str) -> None:
        super().__init__(f"File with name '{name}' already exists")
        self.name = name


class FileNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"File '{name}' does not exist", title="File not found")
        self.name = name


class ProjectNotEmpty(Conflict):
    title = "Project not empty"


class ModelNotReady(Conflict):
    title = "Model not ready"


class ModelBusy(Conflict):
    """A version of the model is still training: one RETRAIN or FINETUNE at a time."""

    title = "Model busy"


class ActiveVersion(Conflict):
    """The active version cannot be dropped; another must be made active first."""

    title = "Active version"


class ConcurrentUpdate(Conflict):
    title = "Concurrent update"


class TrainingFailed(Unprocessable):
    """USING join_learn_process = true, and the training it waited for failed."""

    title = "Training failed"


def problem(status: int, title: str, detail: str, errors: dict | None = None,
            headers: dict | None = None, **extra: Any) -> Response:
    body: dict[str, Any] = {"title": title, "detail": detail, "status": status,
                            "timestamp": datetime.now(UTC).isoformat()}
    if errors:
        body["errors"] = errors
    body.update(extra)
    response = Response(json.dumps(body), status=status, mimetype=PROBLEM_JSON)
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def _from_quarry_error(error: QuarryError) -> Response:
    return problem(error.status, error.title, error.detail, error.errors, **error.extra)


# Werkzeug's descriptions are written for browsers; these say what went wrong for an API.
_HTTP_DETAILS = {
    400: "The request body is not valid JSON",
    404: "No such endpoint",
    405: "This endpoint does not accept that method",
    413: "The request body is larger than the configured limit",
}


def from_http_exception(error: HTTPException) -> Response:
    """Routing errors, webargs validation errors and werkzeug's own errors."""
    status = error.code or 500
    data = getattr(error, "data", None) or {}
    errors = data.get("errors") or data.get("messages")
    if status == 422:  # webargs' default for a body that fails its schema
        status = 400
    if isinstance(errors, dict) and set(errors) == {"json"}:
        errors = errors["json"]  # one location only; don't make clients dig for it
    detail = data.get("message") or _HTTP_DETAILS.get(status) or error.description
    if isinstance(errors, list):  # a message about the body as a whole (invalid JSON)
        detail, errors = " ".join(str(e) for e in errors), None
    elif errors and status == 400:
        detail = "The request did not validate: " + summarise(errors)
    # Keep werkzeug's own headers (Allow on 405), but not its HTML content type.
    headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
    if status == 413:
        # The limit of this route (the data routes have their own, see app/api/__init__.py).
        detail = (f"The request body is larger than the limit of "
                  f"{request.max_content_length} bytes")
    return problem(status, error.name if status != 400 else "Bad request", detail,
                   errors if isinstance(errors, dict) else None, headers=headers)


def summarise(errors: dict, prefix: str = "") -> str:
    """Per-field messages ({"skill": {"name": ["…"]}}) as one line: "skill.name: …"."""
    parts = []
    for key, value in errors.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            parts.append(summarise(value, name + "."))
        else:
            messages = value if isinstance(value, list) else [value]
            parts.append(f"{name}: {' '.join(str(m) for m in messages)}")
    return "; ".join(parts)


def _from_store_error(error: sa_exc.DBAPIError) -> Response:
    # Only connection trouble is the store being down; anything else is a bug (500).
    release_session(quiet=True)  # a rollback here could fail too: on a dead connection
    if isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError) \
            or error.connection_invalidated:
        return _store_unavailable(error)
    return _from_unexpected(error)


# The store is unusable, with no SQLAlchemy DBAPIError around the cause: a disconnect seen
# by the pool, no free pooled connection in time, or a driver error raised directly
# (SQLite's "database is locked" / "disk I/O error" are OperationalErrors).
STORE_UNAVAILABLE_ERRORS = (sa_exc.DisconnectionError, sa_exc.TimeoutError,
                            psycopg.OperationalError, psycopg.InterfaceError,
                            sqlite3.OperationalError, sqlite3.InterfaceError)


def store_error_line(error: BaseException) -> str:
    """A store error in one line: its kind (the driver's class) and the first line of its
    message (a driver's message may go on with hints on further lines)."""
    cause = getattr(error, "orig", None) or error
    kind = type(cause).__module__.split(".")[0] + "." + type(cause).__qualname__
    text = str(cause).strip().splitlines()
    return f"{kind}: {shown(text[0], 200)}" if text else kind


OUTAGE_KEY = "quarry.store_outage"


class StoreOutage:
    """Whether this process is in an outage of the metadata store: from a request that
    failed for it until a statement succeeds on the store again.

    An outage is expected (a restart, a failover), and each failed request would otherwise
    write a traceback to the log: the first failure of an outage is logged with its
    traceback, every later one as one line naming the error's kind.
    """

    def __init__(self) -> None:
        self._down = False
        self._lock = threading.Lock()

    def failed(self) -> bool:
        """Note a failure; whether it is the first of an outage."""
        with self._lock:
            first, self._down = not self._down, True
        return first

    def answered(self, *_args: Any) -> None:
        """A statement succeeded on the store (an engine event: a read, then no lock)."""
        if self._down:
            self._down = False


def _store_unavailable(error: Exception) -> Response:
    release_session(quiet=True)
    outage = current_app.extensions.get(OUTAGE_KEY)
    if outage is None or outage.failed():
        log.error("metadata store unavailable: %s (the first failure of this outage, with "
                  "its traceback; later ones get one line each until the store answers again)",
                  store_error_line(error), exc_info=error)
    else:
        log.error("metadata store unavailable: %s", store_error_line(error))
    if isinstance(error, sa_exc.TimeoutError):
        detail = "The metadata store has no free connection (too many requests at once)"
    else:
        detail = "The metadata store cannot be reached"
    return problem(503, StoreUnavailable.title, f"{detail}; try again shortly")


def _from_unexpected(error: Exception) -> Response:
    log.exception("unhandled error", exc_info=error)
    return problem(500, "Internal server error", "An unexpected error occurred; it was logged")


def _from_deleted_row(error: orm_exc.ObjectDeletedError) -> Response:
    # A row another request deleted while this one was using it.
    release_session(quiet=True)
    return problem(409, "Conflict", "The object was deleted by another request while this one "
                   "used it; read it again")


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(QuarryError, _from_quarry_error)
    app.register_error_handler(HTTPException, from_http_exception)
    app.register_error_handler(sa_exc.DBAPIError, _from_store_error)
    for error_class in STORE_UNAVAILABLE_ERRORS:
        app.register_error_handler(error_class, _store_unavailable)
    app.register_error_handler(orm_exc.ObjectDeletedError, _from_deleted_row)
    app.register_error_handler(Exception, _from_unexpected)
