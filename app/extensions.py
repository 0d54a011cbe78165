"""Extensions, created unbound here and bound to the app in the factory.

The lowest floor with ``config`` and ``errors``: nothing here imports the rest of the app
(the OpenAPI ``Api`` object lives in ``app/api/openapi.py``).
"""

import logging
import os
from typing import Any

import click
from flask import Flask
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

MIGRATIONS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "migrations")


def init_migrations(app: Flask) -> None:
    """Flask-Migrate for ``app``, imported when first used.

    ``flask db …`` and Flask-Migrate's functions (``upgrade()`` in an app context) work as
    with a ``Migrate`` bound in the factory, but a server process never imports
    Flask-Migrate and Alembic (about 10 MiB in the gunicorn master, whose pages every
    worker maps): the ``db`` command group and ``app.extensions["migrate"]`` stand in for
    Flask-Migrate's own until one of them is used.
    """
    app.extensions["migrate"] = _MigrateConfigOnUse(app)
    app.cli.add_command(_DbCommandsOnUse(app), name="db")


def _migrate(app: Flask) -> Any:
    """Bind Flask-Migrate to ``app`` (once); its config, as ``app.extensions["migrate"]``."""
    config = app.extensions.get("migrate")
    if isinstance(config, _MigrateConfigOnUse):
        from flask_migrate import Migrate

        # Replaces both stand-ins: the extension entry and the ``db`` command group.
        Migrate(app, db, directory=MIGRATIONS_DIR)
        config = app.extensions["migrate"]
    return config


class _MigrateConfigOnUse:
    """``app.extensions["migrate"]`` until Flask-Migrate is loaded: reading any attribute
    (Flask-Migrate's commands and migrations/env.py read ``directory``, ``migrate``, ``db``,
    ``configure_args``) loads it and answers from its config."""

    def __init__(self, app: Flask) -> None:
        self._app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(_migrate(self._app), name)


class _DbCommandsOnUse(click.Group):
    """The ``flask db`` group until Flask-Migrate is loaded: when it is run (``flask db …``,
    ``flask db --help``), Flask-Migrate's own group parses the arguments and runs."""

    def __init__(self, app: Flask) -> None:
        super().__init__(name="db", help="Perform database migrations.")
        self._app = app

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        _migrate(self._app)
        group = self._app.cli.commands["db"]
        return group.make_context(info_name, args, parent=parent, **extra)


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def release_session(_error: BaseException | None = None, *, quiet: bool = False) -> None:
    """End the request's store session; never raises (a teardown and the error handlers).

    Closing a session rolls its transaction back. When the store dies mid-request that
    rollback fails, and in flask-sqlalchemy's own teardown the error would escape every
    error handler: the server would answer its HTML 500 page instead of a 503 problem.
    Rolling back first, here, closes the connection even when the rollback fails (a dead
    one is invalidated, never handed out again); what is left to remove cannot fail.
    The objects are let go first, as closing does, so they keep what they loaded (a
    rollback would expire them). ``quiet``: an error handler that logs the store's error
    itself (one line per request in an outage), so these failures are logged at DEBUG.
    """
    level = logging.DEBUG if quiet else logging.WARNING
    if not db.session.registry.has():
        return  # the request never used the store
    db.session.expunge_all()
    try:
        db.session.rollback()
    except Exception as error:  # noqa: BLE001 - the request's answer is already decided
        log.log(level, "metadata store: rollback at the end of a request failed: %s",
                _one_line(error))
    try:
        db.session.remove()
    except Exception as error:  # noqa: BLE001
        log.log(level, "metadata store: closing the session failed: %s", _one_line(error))
        db.session.registry.clear()
