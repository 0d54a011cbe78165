"""Real databases to connect at run time: a PostgreSQL and a MariaDB database made per test
session (named with this process's id), a MariaDB account with a password, SQLite files."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pymysql
import pytest
from cryptography.fernet import Fernet
from flask import Flask

from ..conftest import PG_ADMIN_URL

PID = os.getpid()
PG_DB = f"quarry_conn_{PID}"
PG_OTHER_DB = f"quarry_conn2_{PID}"
MARIA_DB = f"quarry_conn_{PID}"
MARIA_USER = f"quarry_cu_{PID}"
MARIA_PASSWORD = f"maria-pw-{PID}-Zq8"
PG_PASSWORD = f"pg-pw-{PID}-Kx3"
KEY = Fernet.generate_key().decode()

PG_ROWS = [(i, f"row {i}", i * 1.5, "a" if i % 3 else "b") for i in range(1, 61)]


def _pg_admin(database: str = "postgres") -> psycopg.Connection:
    url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(url.rsplit("/", 1)[0] + "/" + database, autocommit=True)


@pytest.fixture(scope="session")
def pg_db() -> Iterator[dict[str, Any]]:
    """Two PostgreSQL databases: ``points`` (60 rows) in the first, ``other`` in the second."""
    with _pg_admin() as admin:
        for name in (PG_DB, PG_OTHER_DB):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    with _pg_admin(PG_DB) as conn:
        conn.execute("CREATE TABLE points (id integer PRIMARY KEY, label text, x float8, "
                     "kind text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO points VALUES (%s, %s, %s, %s)", PG_ROWS)
        conn.execute("CREATE VIEW b_points AS SELECT * FROM points WHERE kind = 'b'")
        conn.execute("CREATE SCHEMA archive")
        conn.execute("CREATE TABLE archive.old_points (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO archive.old_points VALUES (1), (2)")
    with _pg_admin(PG_OTHER_DB) as conn:
        conn.execute("CREATE TABLE points (id integer PRIMARY KEY, label text, x float8, "
                     "kind text)")
        conn.execute("INSERT INTO points VALUES (1, 'elsewhere', 0, 'a')")
    try:
        yield {"host": "127.0.0.1", "port": 5432, "database": PG_DB, "user": "postgres",
               "password": PG_PASSWORD}
    finally:
        with _pg_admin() as admin:
            for name in (PG_DB, PG_OTHER_DB):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _maria(database: str | None = None) -> pymysql.Connection:
    # No TLS on the tests' own loopback connections: PyMySQL would otherwise build an SSL
    # context (loading the system's CA certificates) for every connection, ~30x its cost.
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database=database,
                           autocommit=True, ssl_disabled=True)


@pytest.fixture(scope="session")
def maria_db() -> Iterator[dict[str, Any]]:
    """A MariaDB database and an account that needs its password (so a wrong one fails)."""
    with contextlib.closing(_maria()) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{MARIA_DB}`")
        cur.execute(f"CREATE DATABASE `{MARIA_DB}`")
        cur.execute(f"CREATE TABLE `{MARIA_DB}`.flowers (id INT PRIMARY KEY, "
                    "name VARCHAR(20), petal DOUBLE)")
        cur.execute(f"INSERT INTO `{MARIA_DB}`.flowers VALUES (1, 'rose', 1.5), "
                    "(2, 'tulip', 2.5), (3, 'iris', 3.5)")
        for host in ("%", "localhost", "127.0.0.1"):
            cur.execute(f"DROP USER IF EXISTS '{MARIA_USER}'@'{host}'")
            cur.execute(f"CREATE USER '{MARIA_USER}'@'{host}' IDENTIFIED BY '{MARIA_PASSWORD}'")
            cur.execute(f"GRANT SELECT ON `{MARIA_DB}`.* TO '{MARIA_USER}'@'{host}'")
    try:
        yield {"host": "127.0.0.1", "port": 3306, "database": MARIA_DB, "user": MARIA_USER,
               "password": MARIA_PASSWORD}
    finally:
        with contextlib.closing(_maria()) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{MARIA_DB}`")
            for host in ("%", "localhost", "127.0.0.1"):
                cur.execute(f"DROP USER IF EXISTS '{MARIA_USER}'@'{host}'")


def make_sqlite(path: str, rows: int = 3) -> str:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, label TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"n{i}") for i in range(rows)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def db_app(make_app, tmp_path, session_dir) -> Flask:
    """An app with an encryption key and its own instance folder (the SQLite root)."""
    instance = tmp_path / "instance"
    instance.mkdir()
    return make_app(ENCRYPTION_KEY=KEY, INSTANCE_PATH=str(instance),
                    DEMO_PATH=os.path.join(session_dir, "demo.db"))


@pytest.fixture
def other_app(make_app, db_app) -> Callable[..., Flask]:
    """``other_app(**changes)``: another app on the same store and folders (another worker
    or instance), with ``changes`` to db_app's settings."""

    def build(**changes: Any) -> Flask:
        keep = ("ENCRYPTION_KEY", "INSTANCE_PATH", "DEMO_PATH")
        return make_app(**{**{k: db_app.config[k] for k in keep}, **changes})

    return build


@pytest.fixture
def db_client(db_app):
    return db_app.test_client()


@pytest.fixture
def sql(db_client) -> Callable[..., dict]:
    """``sql("SHOW DATABASES", db=None)`` -> the JSON body of /api/sql/query (HTTP 200)."""

    def run(query: str, db: str | None = None) -> dict:
        body: dict[str, Any] = {"query": query}
        if db is not None:
            body["context"] = {"db": db}
        response = db_client.post("/api/sql/query", json=body)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    return run


def database_body(name: str, engine: str, params: dict[str, Any], check: bool = True) -> dict:
    return {"database": {"name": name, "engine": engine, "parameters": params},
            "check_connection": check}
