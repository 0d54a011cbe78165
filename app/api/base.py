"""The Blueprint every resource uses: flask-smorest's, with Quarry's request parsing."""

import json
import math
from http import HTTPStatus
from typing import Any

import flask
from flask_smorest import Blueprint as SmorestBlueprint
from webargs import core
from webargs.flaskparser import FlaskParser


def _refuse_constant(token: str) -> Any:
    raise json.JSONDecodeError(f"{token} is not a JSON value", token, 0)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} is too large a number", text, 0)
    return value


def parse_strict_json(body: bytes) -> Any:
    """JSON as RFC 8259 has it: Python's NaN/Infinity extensions and numbers that overflow
    are refused (they would be stored, then answered as invalid JSON), and so are integers
    beyond Python's digit limit (a ValueError, not a JSONDecodeError, from json.loads).
    """
    try:
        text = body.decode("utf-8")
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # UnicodeDecodeError, int digit limit
        # A non-empty doc: webargs reads an empty one as "no body" (missing), not as invalid.
        raise json.JSONDecodeError(str(exc), "body", 0) from None


class JsonBodyParser(FlaskParser):
    """Reads the body as JSON whatever its Content-Type, and answers 400 (not 422).

    MindsDB's clients and curl scripts do not all send ``Content-Type: application/json``;
    a body that is not JSON at all is then reported as such instead of as missing fields.
    """

    DEFAULT_VALIDATION_STATUS = 400

    def _raw_load_json(self, req: flask.Request) -> Any:
        body = req.get_data(cache=True)
        if not body:
            return core.missing
        return parse_strict_json(body)


class Blueprint(SmorestBlueprint):
    ARGUMENTS_PARSER = JsonBodyParser()

    def arguments(self, schema: Any, **kwargs: Any):
        # webargs builds a new instance of a schema class on every request; one instance,
        # made here, serves them all (a tenth of a small request's time).
        return super().arguments(schema() if isinstance(schema, type) else schema, **kwargs)

    def doc_response(self, status: int, schema: dict[str, Any]):
        """Document the schema of an answer the view builds itself (``response`` without a
        schema sends it as it is)."""
        return self.alt_response(status, schema=schema, success=True)

    def problems(self, *statuses: int):
        """Document the problem+json answers a view gives besides its success.

        Only the view-specific ones: 404 (a project or object missing), 409, 422, 429. The
        answers every route may give (400 for a body or query that does not validate, 401,
        413, 503) are added to the document in one place, ``app/api/openapi.py``.
        """
        def decorator(view):
            for status in statuses:
                view = self.alt_response(status, response=HTTPStatus(status).name)(view)
            return view
        return decorator
