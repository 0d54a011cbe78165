"""Checks of the metadata store when the app starts."""

from __future__ import annotations

import importlib
import logging
import threading
import time

from flask import Flask, current_app
from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from ..extensions import db
from ..federation.engine import current_engine, load_modules
from ..federation.plan import warm as warm_planner
from ..sql.execute import open_connections
from ..sql.files import FILES_SOURCE
from ..sql.sources import DataSource, current_sources, data_source_names, default_tls_context
from ..store import UploadedFile
from .projects import shadowed_projects
from .trainer import recover_orphans

log = logging.getLogger(__name__)


# Set in the app by a master that preloaded the engine's modules (``preload_engine``).
_PRELOADED = "quarry.federation.preloaded"


def check_store(app: Flask) -> None:
    """Mark models orphaned by a dead trainer as error; warn of projects a data source hides."""
    with app.app_context():
        try:
            recovered = recover_orphans()
            shadowed = shadowed_projects()
        except SQLAlchemyError:
            # A store not migrated yet (``flask db upgrade`` builds an app too) or down:
            # the models are checked again whenever they are read.
            db.session.rollback()
            log.debug("store not checked at start-up", exc_info=True)
            return
        finally:
            db.session.remove()
    if recovered:
        log.warning("marked %d interrupted model(s) as error", recovered)
    if shadowed:
        # A data source configured after the project was made: SQL's db.table reaches the
        # data source, so the project's objects are reachable over REST only.
        log.warning("project(s) %s have the name of a data source: SQL statements reach the "
                    "data source; rename the data source in QUARRY_DATA_SOURCES",
                    ", ".join(shadowed))


def preload_engine() -> bool:
    """Load the federation engine's modules (DuckDB, pyarrow, the planner's dialects, the
    ADBC driver of PostgreSQL legs, connectorx for MariaDB/MySQL legs) when this
    deployment can use them: it has two data sources or more (configured or created at run
    time) or an uploaded file. Whether it loaded them. In a gunicorn master before forking
    (``FEDERATION_PRELOAD``); a deployment of one database never holds them."""
    try:
        files = db.session.execute(select(func.count()).select_from(UploadedFile)).scalar()
        # The files source is always listed: whether it holds a file is counted above.
        sources = [n for n in data_source_names() if n != FILES_SOURCE]
    except SQLAlchemyError:  # a store not migrated yet, or down: workers load on demand
        db.session.rollback()
        return False
    finally:
        db.session.remove()
    if len(sources) < 2 and not files:
        return False
    load_modules()
    dialects = current_sources().dialects()
    warm_planner(dialects)
    if "postgres" in dialects:  # PostgreSQL legs are read through ADBC (1.6 s to load)
        importlib.import_module("app.sql.native")
    if "mysql" in dialects:  # MariaDB/MySQL legs through connectorx (0.15-0.4 s to load)
        importlib.import_module("app.sql.native_mysql")
        default_tls_context()  # the workers' PyMySQL connections share it (80-105 ms each)
    current_app.extensions[_PRELOADED] = True
    return True


def open_engine_in_worker(app: Flask) -> None:
    """In a gunicorn worker whose master preloaded the engine's modules: open the worker's
    own engine database (DuckDB's threads and memory are the worker's) and run its first
    statements (``Engine.warm``), 50 ms and 50-100 ms under load that its first federated
    statement would pay otherwise."""
    if app.extensions.get(_PRELOADED):
        with app.app_context():
            engine = current_engine()
            engine.open()
            try:
                # Here, not in the background: a process that ends while DuckDB runs a
                # statement in another thread is aborted by its C++ runtime.
                engine.warm()
            except Exception:  # noqa: BLE001 - a first statement would only pay for it
                log.debug("the engine was not warmed at start", exc_info=True)


# How long a worker waits for its connections to the data sources before it takes its
# first request (``open_sources_in_worker``). Measured on 2 shared cores (TPC-H SF 0.1 over
# PostgreSQL, MariaDB and SQLite, load 4-6): a worker opens them in 0.3-1.4 s while the
# other workers start beside it; a first statement that lands on a worker still opening
# them took 1.5 s against 0.4 s on one that had. A source that does not answer in this
# time is left to the first statement, and the worker takes requests without it.
OPEN_SOURCES_WAIT_S = 5.0


def open_sources_in_worker(app: Flask, wait_s: float = OPEN_SOURCES_WAIT_S
                           ) -> list[threading.Thread]:
    """In a gunicorn worker whose master preloaded the engine's modules: open a connection
    to each data source (and an ADBC session to each PostgreSQL one, a first connectorx
    read from each MariaDB/MySQL one), each source in its own thread, and wait for them up
    to ``wait_s`` before the worker takes its first request, so that its first federated
    statement neither pays for them (a PostgreSQL session reads the server's type catalogue
    when it connects) nor runs beside them. The threads are daemons: a source that is down
    or slow only leaves its connection to the first statement that needs it."""
    if not app.extensions.get(_PRELOADED):
        return []
    with app.app_context():
        sources = [source for source in current_sources().sources()
                   if not source.engine_only and source.name]
    threads = [threading.Thread(target=_open_source, args=(app, source), daemon=True,
                                name=f"quarry-open-{source.name}") for source in sources]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + wait_s
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))
    return threads


def _open_source(app: Flask, source: DataSource) -> None:
    with app.app_context():
        try:
            open_connections(source, arrow=True)
        except Exception:  # noqa: BLE001 - down, busy, refused: the statement will say
            log.debug("no connection opened to %s at start", source.name, exc_info=True)


def store_ready() -> bool:
    """Whether the metadata store answers a query now (the readiness probe)."""
    try:
        db.session.execute(text("SELECT 1"))
        return True
    except SQLAlchemyError:
        db.session.rollback()
        log.warning("readiness: the metadata store does not answer", exc_info=True)
        return False
