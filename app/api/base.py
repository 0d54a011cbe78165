"""The Blueprint every resource uses: flask-smorest's, with Quarry's request parsing."""

from http import HTTPStatus
from typing import Any

import flask
from flask_smorest import Blueprint as SmorestBlueprint
from webargs import core
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import RequestEntityTooLarge

from ..jsonio import parse_json_body


class JsonBodyParser(FlaskParser):
    """Reads the body as JSON whatever its Content-Type, and answers 400 (not 422).

    MindsDB's clients and curl scripts do not all send ``Content-Type: application/json``;
    a body that is not JSON at all is then reported as such instead of as missing fields.
    Every route that takes a body reads it here, so the nesting limit and the text checks
    of ``parse_json_body`` hold on all of them.
    """

    DEFAULT_VALIDATION_STATUS = 400

    def _raw_load_json(self, req: flask.Request) -> Any:
        body = req.get_data(cache=True)
        _refuse_cut_body(req, body)
        if not body:
            return core.missing
        return parse_json_body(body, flask.current_app.config["MAX_JSON_DEPTH"])


def _refuse_cut_body(req: flask.Request, body: bytes) -> None:
    """413 for a body without Content-Length (chunked) that went past the limit.

    Werkzeug stops reading such a body at ``max_content_length`` and hands over what it
    read, without an error: a too-large JSON body then read as invalid JSON (400) instead of
    too large. One more byte from the server's stream tells whether the body went on.
    """
    limit = req.max_content_length
    if req.content_length is not None or limit is None or len(body) < limit:
        return
    if req.environ["wsgi.input"].read(1):
        raise RequestEntityTooLarge()


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
