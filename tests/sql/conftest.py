"""Data sources for the SQL tests: real PostgreSQL and MariaDB databases and SQLite files.

Every server-side object is named with this process's id (several people run tests on the
same servers) and dropped at the end of the session. The PostgreSQL source is reached
through a SELECT-only role, as docs/sql.md recommends.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pymysql
import pytest
from flask import Flask
from sqlalchemy.engine import make_url

from app import create_app

from ..conftest import MARIADB_URL, PG_ADMIN_URL, _dispose
from ..helpers import sql_runner

PID = os.getpid()
SRC_DB = f"quarry_src_{PID}"
RO_ROLE = f"quarry_ro_{PID}"
BIG_ROWS = 250


@pytest.fixture
def store_url(request, tmp_path) -> str:
    """These tests never touch the metadata store: one SQLite store is enough (not both)."""
    path = tmp_path / "store.db"
    shutil.copy(request.getfixturevalue("sqlite_template"), path)
    return f"sqlite:///{path}"


def _pg_admin(database: str = "postgres") -> psycopg.Connection:
    url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(url.rsplit("/", 1)[0] + "/" + database, autocommit=True)


PG_SCHEMA = """
CREATE TABLE items (
    id integer PRIMARY KEY, name text, price numeric(12,2), big numeric(38,12), f float8,
    ok boolean, d date, t time, ts timestamp, tstz timestamptz, span interval, raw bytea,
    uid uuid, doc jsonb, js json, tags text[], nums integer[], addr inet, spot point
);
INSERT INTO items VALUES
 (1, 'apple', 1.50, 12345678901234567890.123456789012, 0.1, true, '2024-02-29',
  '13:45:30.5', '2024-02-29 13:45:30.25', '2024-02-29 13:45:30+02', '1 day 02:03:04.5',
  '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, 2.5, null]}',
  '{"j": "v"}', '{a,b}', '{1,2,3}', '192.168.0.1', '(1,2)'),
 (2, 'pear', NULL, NULL, 'NaN', false, NULL, NULL, NULL, NULL, '-3 hours', NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL),
 (3, 'fig', 2.00, -0.5, 'Infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE big (n integer PRIMARY KEY, label text, x float8, y integer);
INSERT INTO big SELECT g, 'row ' || g, g * 0.5, g % 7 FROM generate_series(1, 250) g;
CREATE SEQUENCE items_seq;
"""


@pytest.fixture(scope="session")
def pg_source() -> Iterator[dict[str, str]]:
    """{"ro": URL as the SELECT-only role, "owner": URL as the superuser, "db": name}."""
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{SRC_DB}" WITH (FORCE)')
        admin.execute(f'DROP ROLE IF EXISTS "{RO_ROLE}"')
        admin.execute(f'CREATE DATABASE "{SRC_DB}"')
        admin.execute(f'CREATE ROLE "{RO_ROLE}" LOGIN')
    with _pg_admin(SRC_DB) as conn:
        conn.execute(PG_SCHEMA)
        conn.execute(f'REVOKE ALL ON DATABASE "{SRC_DB}" FROM PUBLIC')
        conn.execute(f'GRANT CONNECT ON DATABASE "{SRC_DB}" TO "{RO_ROLE}"')
        conn.execute(f'GRANT USAGE ON SCHEMA public TO "{RO_ROLE}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{RO_ROLE}"')
    base = "postgresql+psycopg://{user}@127.0.0.1:5432/" + SRC_DB
    try:
        yield {"ro": base.format(user=RO_ROLE), "owner": base.format(user="postgres"),
               "db": SRC_DB}
    finally:
        with _pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{SRC_DB}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{RO_ROLE}"')


MYSQL_SCHEMA = [
    """CREATE TABLE items (
        id INT PRIMARY KEY, name VARCHAR(50), price DECIMAL(12,2), big DECIMAL(38,12),
        f DOUBLE, ok BOOLEAN, d DATE, t TIME(1), ts DATETIME(2), raw BLOB, doc JSON)""",
    """INSERT INTO items VALUES
        (1, 'apple', 1.50, 12345678901234567890.123456789012, 0.1, TRUE, '2024-02-29',
         '13:45:30.5', '2024-02-29 13:45:30.25', X'00FF10', '{"k": [1, 2.5, null]}'),
        (2, 'pear', NULL, NULL, NULL, FALSE, NULL, '-03:00:00', NULL, NULL, NULL),
        (3, 'fig', 2.00, -0.5, 1e300, NULL, NULL, NULL, NULL, NULL, NULL)""",
    "CREATE TABLE big (n INT PRIMARY KEY, label VARCHAR(20), x DOUBLE, y INT)",
    """INSERT INTO big SELECT seq, CONCAT('row ', seq), seq * 0.5, seq % 7
       FROM seq_1_to_250""",
]


def mysql_connect(database: str | None = SRC_DB) -> pymysql.Connection:
    # No TLS on the tests' own loopback connections: PyMySQL would otherwise build an SSL
    # context (loading the system's CA certificates) for every connection, ~30x its cost.
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database=database,
                           autocommit=True, ssl_disabled=True)


@pytest.fixture(scope="session")
def maria_source() -> Iterator[dict[str, str]]:
    with contextlib.closing(mysql_connect(None)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{SRC_DB}`")
        cur.execute(f"CREATE DATABASE `{SRC_DB}`")
        cur.execute(f"USE `{SRC_DB}`")
        for statement in MYSQL_SCHEMA:
            cur.execute(statement)
    base = MARIADB_URL.rsplit("/", 1)[0]
    try:
        yield {"url": f"{base}/{SRC_DB}", "db": SRC_DB}
    finally:
        with contextlib.closing(mysql_connect(None)) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{SRC_DB}`")


@pytest.fixture(scope="session")
def maria_ro_source(maria_source) -> Iterator[dict[str, str]]:
    """The MariaDB source through a SELECT-only account (as docs/sql.md recommends):
    {"url", "user"}; the account is dropped at the end of the session."""
    with contextlib.closing(mysql_connect(None)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{RO_ROLE}'@'%'")
        cur.execute(f"CREATE USER '{RO_ROLE}'@'%'")
        cur.execute(f"GRANT SELECT ON `{SRC_DB}`.* TO '{RO_ROLE}'@'%'")
    server = make_url(maria_source["url"])
    url = server.set(username=RO_ROLE, password=None).render_as_string(hide_password=False)
    try:
        yield {"url": url, "user": RO_ROLE}
    finally:
        with contextlib.closing(mysql_connect(None)) as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{RO_ROLE}'@'%'")


@pytest.fixture(scope="session")
def lite_source(tmp_path_factory) -> dict[str, str]:
    """A SQLite data source in a folder of its own (so new files there can be noticed)."""
    folder = tmp_path_factory.mktemp("lite")
    path = str(folder / "lite.db")
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, f REAL, raw BLOB);
        INSERT INTO items VALUES (1, 'apple', 0.1, X'00FF10'), (2, 'pear', NULL, NULL),
                                 (3, 'fig', 2.5, NULL);
        CREATE TABLE big (n INTEGER PRIMARY KEY, label TEXT, x REAL, y INTEGER);
        WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 250)
        INSERT INTO big SELECT n, 'row ' || n, n * 0.5, n % 7 FROM g;
    """)
    conn.commit()
    conn.close()
    return {"path": path, "folder": str(folder), "url": f"sqlite:///{path}"}


@pytest.fixture(scope="session")
def sources(pg_source, maria_source, lite_source) -> dict[str, Any]:
    """DATA_SOURCES for make_app: one of each dialect, plus the superuser PostgreSQL."""
    return {"pg": pg_source["ro"], "pgsuper": pg_source["owner"], "maria": maria_source["url"],
            "lite": lite_source["url"]}


@pytest.fixture(scope="session")
def sql_app(sources, sqlite_template, session_dir) -> Iterator[Flask]:
    """One app for the read-only tests (hundreds of requests; the store is never used)."""
    store = os.path.join(session_dir, "sql-store.db")
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir,
                      "TESTING": True, "DATA_SOURCES": sources, "SQL_TIMEOUT_S": 5.0})
    yield app
    _dispose(app)


@pytest.fixture
def query(sql_app) -> Callable[..., dict]:
    """``query("SELECT 1", db="pg", params={...})`` -> the JSON body (asserting HTTP 200)."""
    return sql_runner(sql_app.test_client())


def file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()
