"""Service errors (404, 409, 400 of the REST routes) as ``type: error`` answers of SQL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from marshmallow import ValidationError

from ...errors import BadRequest, Conflict, NotFound, QuarryError, UnknownReference
from ..errors import ErrorCode, SqlError


@contextlib.contextmanager
def service_errors(**labels: str) -> Iterator[None]:
    """Turn the typed errors the services raise into SqlError.

    ``labels`` maps an error title to the qualified object name, so that a message reads as
    MindsDB's do: ``service_errors(**{"Model not found": "p1.nope"})`` → "Model not found:
    p1.nope". Errors without a label keep the service's own sentence, which names the object.
    """
    try:
        yield
    except ValidationError as exc:
        raise SqlError(ErrorCode.INVALID_STATEMENT, _fields(exc.messages)) from None
    except QuarryError as exc:
        raise to_sql_error(exc, labels) from None


def to_sql_error(exc: QuarryError, labels: dict[str, str] | None = None) -> SqlError:
    label = (labels or {}).get(exc.title)
    message = f"{exc.title}: {label}" if label else f"{exc.title}: {exc.detail}"
    if isinstance(exc, NotFound | UnknownReference):
        code = ErrorCode.NOT_FOUND
    elif isinstance(exc, Conflict):
        code = ErrorCode.CONFLICT
    elif isinstance(exc, BadRequest):
        code = ErrorCode.INVALID_STATEMENT
    else:
        code = ErrorCode.SERVICE_FAILED
    return SqlError(code, message)


def _fields(messages: object) -> str:
    """marshmallow's {"field": ["msg"]} (nested) as one line."""
    if isinstance(messages, dict):
        return "; ".join(f"{key}: {_fields(value)}" for key, value in messages.items())
    if isinstance(messages, list):
        return " ".join(_fields(m) for m in messages)
    return str(messages)
