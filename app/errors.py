"""One error type tree, and the handlers that turn any error into an RFC 7807 problem.

Services raise these typed errors; views never build error bodies themselves.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Response, json
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import exc as orm_exc
from werkzeug.exceptions import HTTPException

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger(__name__)


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


class UnknownReference(Unprocessable):
    """The request's body names an object that does not exist (an agent's skill).

    Not 404: the request's target exists, and a 404 would tell the client it does not. The
    SQL endpoint reports it as "not found", since there the statement names both.
    """

    title = "Not found"


class Unauthorized(QuarryError):
    status = 401
    title = "Unauthorized"


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
        detail = "The request did not validate: " + _summarise(errors)
    # Keep werkzeug's own headers (Allow on 405), but not its HTML content type.
    headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
    if status == 413:
        from flask import current_app
        detail = (f"The request body is larger than the limit of "
                  f"{current_app.config['MAX_CONTENT_LENGTH']} bytes")
    return problem(status, error.name if status != 400 else "Bad request", detail,
                   errors if isinstance(errors, dict) else None, headers=headers)


def _summarise(errors: dict, prefix: str = "") -> str:
    parts = []
    for key, value in errors.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            parts.append(_summarise(value, name + "."))
        else:
            messages = value if isinstance(value, list) else [value]
            parts.append(f"{name}: {' '.join(str(m) for m in messages)}")
    return "; ".join(parts)


def _from_store_error(error: sa_exc.DBAPIError) -> Response:
    # Only connection trouble is the store being down; anything else is a bug (500).
    from .extensions import db
    db.session.rollback()
    if isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError) \
            or error.connection_invalidated:
        log.error("metadata store unavailable: %s", error.orig)
        return problem(503, StoreUnavailable.title,
                       "The metadata store cannot be reached; try again shortly")
    return _from_unexpected(error)


def _from_unexpected(error: Exception) -> Response:
    log.exception("unhandled error", exc_info=error)
    return problem(500, "Internal server error", "An unexpected error occurred; it was logged")


def _from_deleted_row(error: orm_exc.ObjectDeletedError) -> Response:
    # A row another request deleted while this one was using it.
    from .extensions import db
    db.session.rollback()
    return problem(409, "Conflict", "The object was deleted by another request while this one "
                   "used it; read it again")


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(QuarryError, _from_quarry_error)
    app.register_error_handler(HTTPException, from_http_exception)
    app.register_error_handler(sa_exc.DBAPIError, _from_store_error)
    app.register_error_handler(orm_exc.ObjectDeletedError, _from_deleted_row)
    app.register_error_handler(Exception, _from_unexpected)
