"""A password given in SQL is kept and shown masked: in the audit log, the statement history,
the running statements, the store's rows and the error messages, on both stores."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from sqlalchemy import select

from app.extensions import db

from .conftest import MARIA_DB, MARIA_USER, database_body

SECRET = "Sw0rdfish-never-shown"


def _create(params: dict, name: str = "sales", engine: str = "postgres") -> str:
    return (f"CREATE DATABASE {name} WITH ENGINE = '{engine}', "
            f"PARAMETERS = {json.dumps(params)}")


def _store_text(app) -> str:
    """Every row of every table of the store, as text."""
    with app.app_context():
        return "\n".join(str(row) for table in db.metadata.sorted_tables
                         for row in db.session.execute(select(table)).all())


def _shown(client) -> str:
    audit = client.get("/api/audit", query_string={"kind": "sql"})
    history = client.get("/api/console/history")
    assert audit.status_code == 200 and history.status_code == 200
    return audit.get_data(as_text=True) + history.get_data(as_text=True)


def _statements(client) -> list[str]:
    return [r["statement"] for r in client.get("/api/audit", query_string={"kind": "sql"})
            .get_json()["records"]]


def _assert_masked(db_app, db_client, answer: dict) -> None:
    assert SECRET not in json.dumps(answer)
    assert SECRET not in _shown(db_client)
    assert SECRET not in _store_text(db_app)
    # The statement is still recorded, with the mask where the password was.
    last = _statements(db_client)[0]
    assert "********" in last and "DATABASE" in last.upper(), last


def test_create_database_that_connects(sql, db_app, db_client, pg_db):
    answer = sql(_create({**pg_db, "password": SECRET}))
    assert answer["type"] == "ok", answer
    _assert_masked(db_app, db_client, answer)
    assert "'host': '127.0.0.1'" in _statements(db_client)[0]  # the rest is kept


def test_create_database_whose_check_fails(sql, db_app, db_client, maria_db):
    params = {"host": "127.0.0.1", "port": 3306, "database": MARIA_DB, "user": MARIA_USER,
              "password": SECRET}
    answer = sql(_create(params, engine="mariadb"))
    assert answer["type"] == "error" and "denied" in answer["error_message"], answer
    _assert_masked(db_app, db_client, answer)


def test_alter_database(sql, db_app, db_client, maria_db):
    assert db_client.post("/api/databases", json=database_body(
        "m1", "mariadb", maria_db)).status_code == 201
    answer = sql(f"ALTER DATABASE m1 PARAMETERS = {json.dumps({**maria_db, 'password': SECRET})}")
    assert answer["type"] == "error", answer  # the wrong password fails the check
    _assert_masked(db_app, db_client, answer)
    answer = sql(f"ALTER DATABASE m1 PARAMETERS = {json.dumps(maria_db)}")
    assert answer["type"] == "ok", answer
    assert maria_db["password"] not in _shown(db_client) + _store_text(db_app)


@pytest.mark.parametrize("statement", [
    # Does not parse: a value is missing after "port".
    'CREATE DATABASE s2 WITH ENGINE = "postgres", PARAMETERS = {"password": "%s", "port": }',
    # Cannot even be split into tokens: the quote after the password is never closed, and
    # the parser's message quotes the text from that quote on.
    'CREATE DATABASE s2 WITH ENGINE = "postgres", PARAMETERS = {"user": "u", '
    '"password": "%s}',
    # The syntax error is the token right after the password.
    "CREATE DATABASE s2 WITH ENGINE = 'postgres', PARAMETERS = {'password': '%s' 'x': 1}",
])
def test_statement_that_does_not_parse(sql, db_app, db_client, statement):
    answer = sql(statement % SECRET)
    assert answer["type"] == "error" and "yntax" in answer["error_message"], answer
    _assert_masked(db_app, db_client, answer)


def test_running_statements_list_shows_it_masked(sql, db_app, db_client):
    """A connection check that takes a while (a server that answers nothing for a second)
    is listed by GET /api/sql/queries while it runs: masked."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def slow_server() -> None:
        conn, _ = listener.accept()
        time.sleep(1.5)
        conn.close()

    server = threading.Thread(target=slow_server)
    server.start()
    answers: list[dict] = []
    runner = threading.Thread(target=lambda: answers.append(sql(_create(
        {"host": "127.0.0.1", "port": port, "database": "d", "user": "u",
         "password": SECRET}))))
    runner.start()
    try:
        listed: list[dict] = []
        deadline = time.monotonic() + 5
        while not listed and time.monotonic() < deadline:
            listed = db_app.test_client().get("/api/sql/queries").get_json()
            time.sleep(0.05)
        assert listed, "the statement was never listed"
        assert SECRET not in json.dumps(listed)
        assert "********" in listed[0]["statement"] and "DATABASE" in listed[0]["statement"]
    finally:
        runner.join()
        server.join()
        listener.close()
    assert answers[0]["type"] == "error"
    _assert_masked(db_app, db_client, answers[0])
