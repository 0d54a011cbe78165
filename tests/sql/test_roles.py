"""The account check of data sources: warned at start, shown in GET /api/status, refused
with ``"privileged_role": "refuse"``; a source that is down at start is checked later.

Real accounts on the real servers: the SELECT-only PostgreSQL role of the suite, the
superuser, roles holding predefined server roles or write privileges, and MariaDB users
with SELECT only, with write privileges, with FILE/PROCESS, and through a granted role.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest

from app.services import auth as auth_service
from app.sql.errors import ErrorCode

from ..auth.conftest import PASSWORD, SECRET_KEY, sign_in
from ..conftest import PG_ADMIN_URL
from .conftest import PID, SRC_DB, _pg_admin, mysql_connect

PG_BASE = "postgresql+psycopg://{user}@127.0.0.1:5432/" + SRC_DB
MARIA_BASE = "mysql+pymysql://{user}@127.0.0.1:3306/" + SRC_DB


def status_of(app) -> dict:
    body = app.test_client().get("/api/status").get_json()
    return {s["name"]: s for s in body["data_sources"]}


@pytest.fixture(scope="module")
def pg_roles(pg_source) -> Iterator[dict[str, str]]:
    """Login roles: one holding predefined server roles, one that may write a table."""
    names = {"server": f"quarry_rc_server_{PID}", "writer": f"quarry_rc_writer_{PID}"}
    with _pg_admin(SRC_DB) as conn:
        for name in names.values():
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')
            conn.execute(f'CREATE ROLE "{name}" LOGIN')
            conn.execute(f'GRANT CONNECT ON DATABASE "{SRC_DB}" TO "{name}"')
            conn.execute(f'GRANT USAGE ON SCHEMA public TO "{name}"')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{name}"')
        conn.execute(f'GRANT pg_signal_backend, pg_read_server_files TO "{names["server"]}"')
        conn.execute(f'GRANT INSERT ON items TO "{names["writer"]}"')
    try:
        yield names
    finally:
        with _pg_admin(SRC_DB) as conn:
            for name in names.values():
                conn.execute(f'DROP OWNED BY "{name}"')
                conn.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.fixture(scope="module")
def maria_users(maria_source) -> Iterator[dict[str, str]]:
    """MariaDB users: SELECT only; INSERT; FILE and PROCESS; DELETE through a role."""
    names = {kind: f"quarry_rc_{kind}_{PID}" for kind in ("select", "insert", "file", "role")}
    role = f"quarry_rc_r_{PID}"
    grants = {"select": [], "insert": [f"GRANT INSERT ON `{SRC_DB}`.* TO {{u}}"],
              "file": ["GRANT FILE, PROCESS ON *.* TO {u}"],
              "role": [f"GRANT {role} TO {{u}}"]}
    with contextlib.closing(mysql_connect(None)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP ROLE IF EXISTS {role}")
        cur.execute(f"CREATE ROLE {role}")
        cur.execute(f"GRANT DELETE ON `{SRC_DB}`.* TO {role}")
        for kind, name in names.items():
            user = f"'{name}'@'%'"
            cur.execute(f"DROP USER IF EXISTS {user}")
            cur.execute(f"CREATE USER {user}")
            cur.execute(f"GRANT SELECT ON `{SRC_DB}`.* TO {user}")
            for grant in grants[kind]:
                cur.execute(grant.format(u=user))
    try:
        yield names
    finally:
        with contextlib.closing(mysql_connect(None)) as conn, conn.cursor() as cur:
            for name in names.values():
                cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
            cur.execute(f"DROP ROLE IF EXISTS {role}")


def test_status_shows_each_source_and_what_its_account_may_do(
        make_app, sources, pg_roles, maria_users):
    app = make_app(DATA_SOURCES={
        "pg": sources["pg"], "pgsuper": sources["pgsuper"],
        "pgserver": PG_BASE.format(user=pg_roles["server"]),
        "pgwriter": PG_BASE.format(user=pg_roles["writer"]),
        "maria": sources["maria"],
        **{f"maria_{kind}": MARIA_BASE.format(user=name) for kind, name in maria_users.items()},
        "lite": sources["lite"],
        "down": "postgresql+psycopg://postgres@127.0.0.1:1/nothing"})
    status = status_of(app)

    assert status["pg"] == {"name": "pg", "engine": "postgresql", "role_check": "passed",
                            "warnings": []}
    assert status["maria_select"]["role_check"] == "passed", status["maria_select"]
    assert status["maria_select"]["warnings"] == []
    assert status["lite"]["role_check"] == "not_applicable"
    assert status["down"] == {"name": "down", "engine": "postgresql", "role_check": "unknown",
                              "warnings": []}
    privileged = {name: " | ".join(s["warnings"]) for name, s in status.items()
                  if s["role_check"] == "privileged"}
    assert set(privileged) == {"pgsuper", "pgserver", "pgwriter", "maria", "maria_insert",
                               "maria_file", "maria_role"}
    assert "superuser" in privileged["pgsuper"]
    assert "pg_signal_backend" in privileged["pgserver"]
    assert "pg_read_server_files" in privileged["pgserver"]
    assert "may write (or owns) 1 table" in privileged["pgwriter"]
    assert "ALL PRIVILEGES" in privileged["maria"]
    assert "INSERT" in privileged["maria_insert"] and SRC_DB in privileged["maria_insert"]
    assert "FILE" in privileged["maria_file"] and "PROCESS" in privileged["maria_file"]
    assert "DELETE" in privileged["maria_role"]  # a role it could switch to counts too
    # Warned, but still serving: reads work on every privileged source.
    for name in ("pgsuper", "pgwriter", "maria_insert"):
        body = app.test_client().post("/api/sql/query", json={
            "query": "SELECT count(*) FROM items", "context": {"db": name}}).get_json()
        assert body["data"] == [[3]], (name, body)


def test_a_privileged_account_is_logged_at_start(make_app, sources, caplog):
    with caplog.at_level(logging.WARNING, logger="app.sql.roles"):
        make_app(DATA_SOURCES={"pg": sources["pg"], "pgsuper": sources["pgsuper"]})
    warned = [r.getMessage() for r in caplog.records if r.name == "app.sql.roles"]
    assert len(warned) == 1 and "'pgsuper'" in warned[0] and "superuser" in warned[0]
    assert "SELECT-only" in warned[0]


@pytest.mark.parametrize("source", ["pgsuper", "maria"])
def test_refuse_makes_a_privileged_account_a_start_error(make_app, sources, source):
    with pytest.raises(RuntimeError) as caught:
        make_app(DATA_SOURCES={source: {"url": sources[source], "privileged_role": "refuse"}})
    message = str(caught.value)
    assert f"'{source}'" in message and "privileged_role" in message
    assert "SELECT-only" in message


def test_refuse_lets_a_select_only_account_start(make_app, sources, maria_users):
    app = make_app(DATA_SOURCES={
        "pg": {"url": sources["pg"], "privileged_role": "refuse"},
        "maria": {"url": MARIA_BASE.format(user=maria_users["select"]),
                  "privileged_role": "refuse"}})
    for name in ("pg", "maria"):
        assert status_of(app)[name]["role_check"] == "passed"
        body = app.test_client().post("/api/sql/query", json={
            "query": "SELECT count(*) FROM items", "context": {"db": name}}).get_json()
        assert body["data"] == [[3]], body


@pytest.fixture
def late_database() -> Iterator[str]:
    """The name of a database that does not exist yet (the test creates it)."""
    name = f"quarry_late_{PID}"
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    yield name
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("mode", ["warn", "refuse"])
def test_a_source_down_at_start_is_checked_on_first_use(make_app, late_database, mode):
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + late_database  # the superuser
    app = make_app(DATA_SOURCES={"late": {"url": url, "privileged_role": mode}})
    assert status_of(app)["late"]["role_check"] == "unknown"  # Quarry started anyway
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{late_database}"')

    # Its first statement reads the function catalog (the gate) and checks the account.
    body = app.test_client().post("/api/sql/query", json={
        "query": "SELECT upper('a') AS one", "context": {"db": "late"}}).get_json()

    assert status_of(app)["late"]["role_check"] == "privileged"
    if mode == "warn":
        assert body["type"] == "table" and body["data"] == [["A"]], body
        body = app.test_client().post("/api/sql/query", json={
            "query": "SELECT pg_read_file('/etc/hostname')", "context": {"db": "late"}}
        ).get_json()
        assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, body
    else:
        assert body["type"] == "error", body
        assert body["error_code"] == ErrorCode.PERMISSION_DENIED
        assert "'late'" in body["error_message"] and "refuse" in body["error_message"]


@pytest.mark.parametrize(("option", "value", "words"), [
    ("privileged_role", "maybe", ["privileged_role", "warn, refuse"]),
    ("allow_functions", "lower", ["allow_functions", "list"]),
    ("allow_functions", ["public.f(int)"], ["allow_functions", "function names"]),
])
def test_bad_source_options_are_start_errors(make_app, sources, option, value, words):
    with pytest.raises(RuntimeError) as caught:
        make_app(DATA_SOURCES={"pg": {"url": sources["pg"], option: value}})
    for word in words:
        assert word in str(caught.value)


def test_status_shows_accounts_only_to_callers_who_signed_in(make_app, sources):
    app = make_app(AUTH_REQUIRED=True, SECRET_KEY=SECRET_KEY,
                   DATA_SOURCES={"pgsuper": sources["pgsuper"]})
    client = app.test_client()
    anonymous = client.get("/api/status").get_json()
    assert anonymous["auth"]["signed_in"] is False and "data_sources" not in anonymous
    with app.app_context():  # an admin: a member sees only the sources it may query
        auth_service.create_user("alice", PASSWORD, admin=True)
    assert sign_in(client).status_code == 200
    signed_in = client.get("/api/status").get_json()
    names = {s["name"]: s["role_check"] for s in signed_in["data_sources"]}
    assert names["pgsuper"] == "privileged"
