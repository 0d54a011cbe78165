"""Extensions, created unbound here and bound to the app in the factory."""

from flask_migrate import Migrate
from flask_smorest import Api
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

from .errors import from_http_exception

# Named constraints, so that Alembic can alter and drop them on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class QuarryApi(Api):
    """flask-smorest's Api, answering its errors in the one problem+json envelope."""

    # No catch-all "default" answer in the document: each operation lists the statuses it
    # gives (app/api/openapi.py), so that an undocumented one is a finding, not "default".
    DEFAULT_ERROR_RESPONSE_NAME = None

    def handle_http_exception(self, error):
        return from_http_exception(error)

    def _register_responses(self):
        """Document the error responses as they are sent: problem+json problem documents.

        flask-smorest documents its own ErrorSchema as application/json; clients that check
        responses against the OpenAPI document (schemathesis does) would see every error as
        undocumented.
        """
        from .errors import PROBLEM_JSON
        from .schemas.common import ProblemSchema  # not at import: schemas import services

        self.ERROR_SCHEMA = ProblemSchema
        self.DEFAULT_RESPONSE_CONTENT_TYPE = PROBLEM_JSON
        try:
            super()._register_responses()
        finally:
            del self.DEFAULT_RESPONSE_CONTENT_TYPE  # success responses stay application/json


# Objects stay readable after a commit: a service reads the id of what it just wrote, and
# reloading it could meet a row another request deleted in between.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()
api = QuarryApi()
