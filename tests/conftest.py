"""Fixtures: a fresh app and metadata store per test, on SQLite and on the real PostgreSQL.

The store is built by the migrations themselves (not ``create_all``), so every test also
exercises them. SQLite: one migrated template file per session, copied per test.
PostgreSQL: one database per test session, migrated once, emptied before every test.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import os
import shutil
from collections.abc import Callable, Iterator

import pytest
from cryptography.fernet import Fernet
from flask import Flask
from flask_migrate import upgrade
from sqlalchemy import create_engine, event, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool
from werkzeug.routing import Rule

from app import create_app
from app.extensions import db
from app.sql.demo import ensure_demo

# The server the PostgreSQL runs use; each test session makes (and drops) its own database.
PG_ADMIN_URL = os.environ.get("QUARRY_TEST_PG_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MARIADB_URL = os.environ.get("QUARRY_TEST_MARIADB_URL",
                             "mysql+pymysql://root@127.0.0.1:3306/test")
STORES = ["sqlite", "postgresql"]
# Every test app has an encryption key (as the default `make serve` makes one): agents' API
# keys and databases' passwords are refused without one. A test about that sets it to None.
TEST_KEY = Fernet.generate_key().decode()
# Passwords are hashed with one PBKDF2 round in the tests' apps and servers: the default
# scrypt (~0.1 s of CPU a hash, by design) was a twentieth of the suite's CPU, spent on
# sign-ins that test everything but the hash. tests/auth/test_login.py and test_abuse.py
# keep the default where it matters (what is stored; an unknown user costs a real check).
TEST_PASSWORD_HASH = "pbkdf2:sha256:1"


def _migrate(url: str, instance: str) -> None:
    app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": instance, "DEMO_SOURCE": False,
                      "TESTING": True})
    with app.app_context():
        upgrade()
        db.engine.dispose()


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory) -> str:
    """This session's folder: the instance folder of the apps the tests make, with the demo
    file in it (``demo_db``)."""
    folder = tmp_path_factory.mktemp("session")
    shutil.copy(_shared_demo(tmp_path_factory), folder / "demo.db")
    return str(folder)


def _run_folder(tmp_path_factory):
    """The folder of the whole run: pytest-xdist's workers have base folders in one parent."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def _shared_demo(tmp_path_factory) -> str:
    """The demo data source's file, built once for the whole run: pytest-xdist's workers
    (`make test`: five) have base folders in one parent, and the first to get there builds
    it while the others wait; each built its own before (~7 s of CPU each, in a child
    importing scikit-learn)."""
    root = _run_folder(tmp_path_factory)
    with open(root / "demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        return ensure_demo(str(root / "demo.db"))


@pytest.fixture(scope="session")
def sqlite_template(session_dir) -> str:
    path = os.path.join(session_dir, "template.db")
    _migrate(f"sqlite:///{path}", session_dir)
    return path


@pytest.fixture(scope="session")
def demo_db(session_dir) -> str:
    """The demo data source's file of this session (the apps the tests make use the same
    one: their instance folder is ``session_dir``). A server or an app given it as its
    DEMO_PATH spares building one (seconds of CPU in a child importing scikit-learn)."""
    return ensure_demo(os.path.join(session_dir, "demo.db"))


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    """The run's folder of the embedded model's int8 copy (KB_MODEL_DIR), shared by every
    test process and server: each made its own (~5 s of CPU) in its instance folder."""
    SHARED["model_dir"] = str(_run_folder(tmp_path_factory) / "kb-model")
    return SHARED["model_dir"]


# The session's demo file ("path") and the run's model folder ("model_dir"), for the
# servers tests/live.py starts (quarry_env gives them to each one that names no DEMO_PATH of
# its own): each built its own in its new instance folder.
SHARED: dict[str, str] = {}


@pytest.fixture(scope="session", autouse=True)
def _servers_share_the_demo_file(demo_db, model_dir) -> None:
    SHARED["path"] = demo_db


@contextlib.contextmanager
def pg_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for this test session; dropped afterwards."""
    name = f"{prefix}_{os.getpid()}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_store(session_dir) -> Iterator[str]:
    with pg_database("quarry_store") as url:
        _migrate(url, session_dir)
        yield url


def _empty_pg_store(url: str) -> None:
    """Every table emptied and every sequence set back to its start: a fresh store.

    DELETE, not TRUNCATE: the tables hold a few rows, and TRUNCATE makes new files for every
    table and index (hundreds of milliseconds per test on a busy server; DELETE a few).
    One script, one round trip (not one per table: on a busy machine each round trip waits
    for the server's process to be scheduled). A connection of its own each time (no
    pool): some tests kill every store connection."""
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.connection.driver_connection.execute(_emptying_script())
    engine.dispose()


@functools.cache
def _emptying_script() -> str:
    # Children before their parents.
    deletes = [str(table.delete().compile(dialect=postgresql.dialect()))
               for table in reversed(db.metadata.sorted_tables)]
    return ";\n".join([
        *deletes,
        "SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s "
        "JOIN pg_class c ON c.oid = s.seqrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace",
        "INSERT INTO projects (name, name_key, created_at) VALUES ('mindsdb', 'mindsdb', now())"])


@pytest.fixture(params=STORES)
def store_url(request, tmp_path) -> str:
    """The URL of a fresh, migrated metadata store: SQLite, then PostgreSQL."""
    return fresh_store_url(request, tmp_path)


def fresh_store_url(request, tmp_path) -> str:
    """A fresh, migrated store of the kind ``request.param`` names (for store_url overrides)."""
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("pg_store")
    _empty_pg_store(url)
    return url


@pytest.fixture
def make_app(store_url, session_dir) -> Iterator[Callable[..., Flask]]:
    """Build apps on this test's store, with extra settings: ``make_app(SQL_TIMEOUT_S=1)``."""
    apps: list[Flask] = []

    def build(**config) -> Flask:
        # No jobs' scheduler thread unless a test asks for one (tests/jobs/): it would
        # look at the store in the background of tests that count their statements.
        settings = {"DATABASE_URL": store_url, "INSTANCE_PATH": session_dir, "TESTING": True,
                    "ENCRYPTION_KEY": TEST_KEY, "JOBS_SCHEDULER": False,
                    "PASSWORD_HASH": TEST_PASSWORD_HASH,
                    "KB_MODEL_DIR": SHARED.get("model_dir")}
        settings.update(config)
        app = create_app(settings)
        apps.append(app)
        return app

    yield build
    for app in apps:
        _dispose(app)


def _dispose(app: Flask) -> None:
    # Close every pool the app opened, so PostgreSQL's connection slots are not used up.
    # Extensions first: the trainer's threads still use the store until they are stopped.
    for key, extension in app.extensions.items():
        if not key.startswith("quarry."):
            continue
        closer = getattr(extension, "dispose", None) or getattr(extension, "shutdown", None)
        if callable(closer) and not isinstance(extension, type):
            with contextlib.suppress(Exception):
                closer()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def app(make_app) -> Flask:
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


class StatementCounter:
    def __init__(self) -> None:
        self.statements: list[str] = []

    def __len__(self) -> int:
        return len(self.statements)


@pytest.fixture
def count_statements(app) -> Callable[[], contextlib.AbstractContextManager[StatementCounter]]:
    """``with count_statements() as counted:`` records the SQL the metadata store runs."""

    @contextlib.contextmanager
    def counting() -> Iterator[StatementCounter]:
        counter = StatementCounter()
        with app.app_context():
            engine = db.engine

        def record(conn, cursor, statement, parameters, context, executemany):
            counter.statements.append(statement)

        event.listen(engine, "before_cursor_execute", record)
        try:
            yield counter
        finally:
            event.remove(engine, "before_cursor_execute", record)

    return counting


def _share_url_builders() -> None:
    """Every test builds apps, and each app's ~90 routes had werkzeug write and compile two
    URL-building functions per route (Python source built as an AST): two thirds of what
    making an app cost once its OpenAPI document is lazy. The function depends only on the
    rule's text, its parsed parts and its defaults, so a test process makes it once per
    rule and every app's rule binds the same one (werkzeug binds it to the rule itself:
    ``__get__``). What url_for builds is unchanged; a served Quarry (gunicorn) never sees
    this: it makes one app."""
    original = Rule._compile_builder

    @functools.wraps(original)
    def compile_builder(self: Rule, append_unknown: bool = True):
        try:
            key = (self.rule, append_unknown, tuple(self._trace),
                   repr(sorted((self.defaults or {}).items())),
                   tuple((name, type(conv)) for name, conv in self._converters.items()))
            hash(key)
        except TypeError:  # a default werkzeug can use but not hash: no sharing
            return original(self, append_unknown)
        built = _url_builders.get(key)
        if built is None:
            built = _url_builders[key] = original(self, append_unknown)
        return built

    Rule._compile_builder = compile_builder


_url_builders: dict[tuple, Callable] = {}
_share_url_builders()


def pytest_collection_modifyitems(items) -> None:
    """Files with a slow test (gunicorn, Chromium, larger trainings) run first: under
    pytest-xdist (`make test`; one file at a time per worker) the long ones start at once and
    the many quick files fill the gaps, instead of one long file running alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: the rest keep their order


def pytest_collection_finish(session) -> None:
    """What collection imported (Flask, SQLAlchemy, pandas, scikit-learn, the app, the test
    modules: some 240 000 objects) lives until the end: out of the garbage collector's
    reach. Every test builds apps whose reference cycles only a full collection frees, and
    each full collection walked all of those objects again: a tenth of a test process's
    time went to it (tests/api/test_bad_input.py: 98 s of 453 s in the collector on a busy
    machine; 50 s after the freeze)."""
    gc.collect()
    gc.freeze()
