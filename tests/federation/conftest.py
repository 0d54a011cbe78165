"""One small data set loaded twice: split over PostgreSQL (orders), MariaDB (customers) and
SQLite (targets), and whole in one PostgreSQL database, the reference for every answer.

Server-side objects carry this process's id (several people share the servers) and are
dropped at the end of the session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator

import psycopg
import pymysql
import pytest
from flask import Flask

from app import create_app

from ..conftest import MARIADB_URL, PG_ADMIN_URL, _dispose
from ..helpers import sql_runner

PID = os.getpid()
SPLIT_DB = f"quarry_fed_split_{PID}"
ONE_DB = f"quarry_fed_one_{PID}"

CUSTOMERS = [  # id, name, country, joined, score
    (1, "Ada", "FR", "2023-01-05", 7), (2, "Björn", "SE", "2023-03-11", None),
    (3, "Chloé", "FR", "2024-02-29", 3), (4, "Dmitri", "RU", None, 9),
    (5, "Émile", "BE", "2024-07-01", 5), (6, "Fatima 🌍", "MA", "2022-12-31", 1),
]
# id, customer_id, amount numeric(12,2), qty bigint, rate, paid, placed, placed_tz, note
ORDERS = [
    (i, (i * 7) % 8, f"{(i * 37) % 1000}.{(i * 13) % 100:02d}", 10_000_000_000 + i,
     i / 8, i % 3 == 0, f"2024-0{1 + i % 9}-1{i % 10} 1{i % 10}:30:0{i % 10}",
     f"2024-0{1 + i % 9}-1{i % 10} 0{i % 10}:15:00+02", None if i % 5 == 0 else f"n{i % 4}")
    for i in range(1, 61)
]
TARGETS = [("FR", 500, 0.5), ("SE", 100, 1.25), ("BE", 250, None), ("US", 900, 2.0)]

PG_DDL = """
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, amount numeric(12,2),
  qty bigint, rate float8, paid boolean, placed timestamp, placed_tz timestamptz, note text);
"""
PG_ONE_DDL = PG_DDL + """
CREATE TABLE customers (id integer PRIMARY KEY, name text, country text, joined date,
  score integer);
CREATE TABLE targets (country text, goal integer, ratio float8);
"""


def _pg(database: str = "postgres") -> psycopg.Connection:
    url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(url.rsplit("/", 1)[0] + "/" + database, autocommit=True)


def _mysql(database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database=database,
                           autocommit=True, ssl_disabled=True, charset="utf8mb4")


def _load_pg(database: str, whole: bool) -> None:
    with _pg(database) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute(PG_ONE_DDL if whole else PG_DDL)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO orders VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", ORDERS)
            if whole:
                cur.executemany("INSERT INTO customers VALUES (%s,%s,%s,%s,%s)", CUSTOMERS)
                cur.executemany("INSERT INTO targets VALUES (%s,%s,%s)", TARGETS)


@pytest.fixture(scope="session")
def fed_sources(tmp_path_factory) -> Iterator[dict[str, str]]:
    """DATA_SOURCES: pg (orders), maria (customers), lite (targets), one (all three)."""
    with _pg() as admin:
        for name in (SPLIT_DB, ONE_DB):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    _load_pg(SPLIT_DB, whole=False)
    _load_pg(ONE_DB, whole=True)
    with contextlib.closing(_mysql()) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{SPLIT_DB}`")
        cur.execute(f"CREATE DATABASE `{SPLIT_DB}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{SPLIT_DB}`")
        cur.execute("CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40), "
                    "country VARCHAR(2), joined DATE, score INT)")
        cur.executemany("INSERT INTO customers VALUES (%s,%s,%s,%s,%s)", CUSTOMERS)
    path = str(tmp_path_factory.mktemp("fed") / "targets.db")
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute("CREATE TABLE targets (country TEXT, goal INTEGER, ratio REAL)")
        lite.executemany("INSERT INTO targets VALUES (?,?,?)", TARGETS)
        lite.commit()
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield {"pg": f"{base}/{SPLIT_DB}", "one": f"{base}/{ONE_DB}",
               "maria": f"{MARIADB_URL.rsplit('/', 1)[0]}/{SPLIT_DB}?charset=utf8mb4",
               "lite": f"sqlite:///{path}"}
    finally:
        with _pg() as admin:
            for name in (SPLIT_DB, ONE_DB):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        with contextlib.closing(_mysql()) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{SPLIT_DB}`")


@pytest.fixture(scope="session")
def fed_app(fed_sources, sqlite_template, session_dir) -> Iterator[Flask]:
    store = os.path.join(session_dir, "fed-store.db")
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir,
                      "TESTING": True, "DATA_SOURCES": fed_sources, "SQL_TIMEOUT_S": 10.0,
                      "FEDERATION_MEMORY": 64 * 1024 * 1024})
    yield app
    _dispose(app)


@pytest.fixture
def fquery(fed_app) -> Callable[..., dict]:
    """``fquery(sql, db=None, **body)`` -> the JSON body (HTTP 200 asserted)."""
    return sql_runner(fed_app.test_client())
