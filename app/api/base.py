"""The Blueprint every resource uses: flask-smorest's, with Quarry's request parsing."""

from typing import Any

import flask
from flask_smorest import Blueprint as SmorestBlueprint
from webargs import core
from webargs.flaskparser import FlaskParser


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
        return core.parse_json(body)


class Blueprint(SmorestBlueprint):
    ARGUMENTS_PARSER = JsonBodyParser()
