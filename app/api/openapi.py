"""The flask-smorest ``Api`` that serves /api/openapi.json, answering in the problem envelope.

It lives with the blueprints, not in ``extensions.py``: documenting the error responses
needs the problem schema (``schemas``), a floor above the extensions (tests/test_layers.py).
"""

from flask_smorest import Api

from ..errors import PROBLEM_JSON, from_http_exception
from ..schemas.common import ProblemSchema


class QuarryApi(Api):
    """flask-smorest's Api, answering its errors in the one problem+json envelope."""

    def handle_http_exception(self, error):
        return from_http_exception(error)

    def _register_responses(self):
        """Document the error responses as they are sent: problem+json problem documents.

        flask-smorest documents its own ErrorSchema as application/json; clients that check
        responses against the OpenAPI document (schemathesis does) would see every error as
        undocumented.
        """
        self.ERROR_SCHEMA = ProblemSchema
        self.DEFAULT_RESPONSE_CONTENT_TYPE = PROBLEM_JSON
        try:
            super()._register_responses()
        finally:
            del self.DEFAULT_RESPONSE_CONTENT_TYPE  # success responses stay application/json


# Created unbound, bound to the app in the factory (like the extensions).
openapi = QuarryApi()
