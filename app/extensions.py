"""Extensions, created unbound here and bound to the app in the factory.

The lowest floor with ``config`` and ``errors``: nothing here imports the rest of the app
(the OpenAPI ``Api`` object lives in ``app/api/openapi.py``).
"""

import logging

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

log = logging.getLogger(__name__)

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


# Objects stay readable after a commit: a service reads the id of what it just wrote, and
# reloading it could meet a row another request deleted in between.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()


def release_session(_error: BaseException | None = None) -> None:
    """End the request's store session; never raises (a teardown and the error handlers).

    Closing a session rolls its transaction back. When the store dies mid-request that
    rollback fails, and in flask-sqlalchemy's own teardown the error would escape every
    error handler: the server would answer its HTML 500 page instead of a 503 problem.
    Rolling back first, here, closes the connection even when the rollback fails (a dead
    one is invalidated, never handed out again); what is left to remove cannot fail.
    The objects are let go first, as closing does, so they keep what they loaded (a
    rollback would expire them).
    """
    if not db.session.registry.has():
        return  # the request never used the store
    db.session.expunge_all()
    try:
        db.session.rollback()
    except Exception as error:  # noqa: BLE001 - the request's answer is already decided
        log.warning("metadata store: rollback at the end of a request failed: %s", error)
    try:
        db.session.remove()
    except Exception as error:  # noqa: BLE001
        log.warning("metadata store: closing the session failed: %s", error)
        db.session.registry.clear()
