"""Service errors (404, 409, 400 of the REST routes) as ``type: error`` answers of SQL.

Errors are told apart by their type (``app/errors.py``), never by their title or text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from marshmallow import ValidationError

from ..errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    QuarryError,
    summarise,
)
from ..sql.errors import ErrorCode, SqlError

Labels = dict[type[QuarryError], str]


@contextlib.contextmanager
def service_errors(labels: Labels | None = None) -> Iterator[None]:
    """Turn the typed errors the services raise into SqlError.

    ``labels`` maps an error type to the object's name as the statement wrote it, so that a
    message reads as MindsDB's do: ``service_errors({ModelNotFound: "p1.nope"})`` → "Model not
    found: p1.nope". Errors without a label keep the service's own sentence, which names the
    object.
    """
    try:
        yield
    except ValidationError as exc:
        raise SqlError(ErrorCode.INVALID_STATEMENT, summarise(exc.messages)) from None
    except QuarryError as exc:
        raise _to_sql_error(exc, labels or {}) from None


@contextlib.contextmanager
def if_clause(given: bool, outcome: type[QuarryError]) -> Iterator[None]:
    """``IF EXISTS`` / ``IF NOT EXISTS``: when the statement has the clause, ``outcome`` (the
    object missing, or its name taken) is what it asked to accept, and it succeeds quietly.

    Use it inside ``service_errors``, so that it sees the service's typed error.
    """
    try:
        yield
    except outcome:
        if not given:
            raise


def _to_sql_error(exc: QuarryError, labels: Labels) -> SqlError:
    label = next((name for kind, name in labels.items() if isinstance(exc, kind)), None)
    message = f"{exc.title}: {label}" if label else f"{exc.title}: {exc.detail}"
    if isinstance(exc, NotFound):
        code = ErrorCode.NOT_FOUND
    elif isinstance(exc, Conflict):
        code = ErrorCode.CONFLICT
    elif isinstance(exc, Forbidden):
        code = ErrorCode.ACCESS_DENIED
    elif isinstance(exc, BadRequest | PayloadTooLarge):
        code = ErrorCode.INVALID_STATEMENT
    else:
        code = ErrorCode.SERVICE_FAILED
    return SqlError(code, message)
