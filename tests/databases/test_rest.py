"""/api/databases: connecting real PostgreSQL and MariaDB databases at run time, over HTTP."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from cryptography.fernet import Fernet

from tests.helpers import assert_problem

from .conftest import (
    KEY,
    MARIA_PASSWORD,
    PG_OTHER_DB,
    PG_PASSWORD,
    PG_ROWS,
    database_body,
    make_sqlite,
)


def _names(client) -> list[tuple[str, str]]:
    return [(d["name"], d["type"]) for d in client.get("/api/databases").get_json()]


def _query(client, query: str, db: str | None = None) -> dict:
    body = {"query": query, **({"context": {"db": db}} if db else {})}
    response = client.post("/api/sql/query", json=body)
    assert response.status_code == 200
    return response.get_json()


def test_postgres_script_connect_query_train_drop(db_client, pg_db):
    """A MindsDB user's first steps, over REST: connect, query, train a model from it, drop."""
    created = db_client.post("/api/databases", json=database_body("shop_pg", "postgres", pg_db))
    assert created.status_code == 201, created.get_json()
    record = created.get_json()
    assert (record["name"], record["type"], record["engine"]) == ("shop_pg", "data", "postgres")
    assert record["connection_data"] == {**pg_db, "password": "********"}
    assert record["configured"] is False

    listed = {d["name"]: d for d in db_client.get("/api/databases").get_json()}
    assert listed["demo"]["configured"] is True and listed["demo"]["deletable"] is False
    assert listed["shop_pg"]["deletable"] is True and listed["information_schema"]["type"] \
        == "system"
    assert db_client.get("/api/databases/shop_pg").get_json()["connection_data"]["password"] \
        == "********"
    checked = db_client.get("/api/databases/shop_pg?check_connection=true").get_json()
    assert checked["connection_status"] == {"success": True, "error_message": None}
    tables = db_client.get("/api/databases/shop_pg/tables").get_json()
    assert tables == [{"name": "b_points", "type": "view"}, {"name": "points", "type": "data"}]

    answer = _query(db_client, "SELECT count(*) AS n, sum(x) AS s FROM shop_pg.points")
    assert answer["data"] == [[len(PG_ROWS), sum(r[2] for r in PG_ROWS)]]
    assert _query(db_client, "SELECT label FROM points WHERE id = 7", db="shop_pg")["data"] \
        == [["row 7"]]

    model = db_client.post("/api/projects/mindsdb/models", json={
        "query": "CREATE MODEL mindsdb.kinds FROM shop_pg (SELECT x, kind FROM points) "
                 "PREDICT kind USING join_learn_process = true, time_budget_s = 1"})
    assert model.status_code == 201, model.get_json()
    assert model.get_json()["status"] == "complete"
    assert model.get_json()["data_source"] == "shop_pg"

    refused = assert_problem(db_client.delete("/api/databases/shop_pg"), 409, "kinds", "cascade")
    assert refused["references"] == {"models": ["mindsdb.kinds"]}
    assert ("shop_pg", "data") in _names(db_client)
    assert db_client.delete("/api/databases/shop_pg?cascade=true").status_code == 204
    assert ("shop_pg", "data") not in _names(db_client)
    assert db_client.get("/api/projects/mindsdb/models/kinds").status_code == 404
    gone = _query(db_client, "SELECT count(*) FROM shop_pg.points")
    assert gone["type"] == "error" and "shop_pg" in gone["error_message"]
    assert_problem(db_client.get("/api/databases/shop_pg"), 404, "shop_pg")


def test_password_is_encrypted_in_the_store(db_app, db_client, pg_db, maria_db, store_url):
    for name, engine, params in (("enc_pg", "postgres", pg_db),
                                 ("enc_maria", "mariadb", maria_db)):
        response = db_client.post("/api/databases", json=database_body(name, engine, params))
        assert response.status_code == 201, response.get_json()
    # The raw rows, read with the store's own driver (sqlite3 / psycopg): no password in any
    # column, and the secrets column holds Fernet tokens.
    if store_url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as conn:
            cursor = conn.execute("SELECT * FROM data_sources ORDER BY id")
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
    else:
        with psycopg.connect(store_url.replace("postgresql+psycopg://", "postgresql://")) \
                as conn:
            cursor = conn.execute("SELECT * FROM data_sources ORDER BY id")
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
    assert len(rows) == 2
    dump = repr(rows)
    assert PG_PASSWORD not in dump and MARIA_PASSWORD not in dump
    secrets = [row[columns.index("secrets")] for row in rows]
    assert all(token.startswith("gAAAA") for token in secrets)
    # The MariaDB account needs its password: a query proves it was decrypted right.
    assert _query(db_client, "SELECT name FROM flowers ORDER BY id", db="enc_maria")["data"] \
        == [["rose"], ["tulip"], ["iris"]]
    for path in ("/api/databases", "/api/databases/enc_maria"):
        assert MARIA_PASSWORD not in db_client.get(path).get_data(as_text=True)
    described = _query(db_client, "DESCRIBE DATABASE enc_maria")
    assert MARIA_PASSWORD not in str(described) and "********" in str(described)


def test_echoed_mask_keeps_the_password(db_client, maria_db):
    db_client.post("/api/databases", json=database_body("m_echo", "mariadb", maria_db))
    shown = db_client.get("/api/databases/m_echo").get_json()["connection_data"]
    assert shown["password"] == "********"
    changed = db_client.put("/api/databases/m_echo", json={"database": {"parameters": shown},
                                                          "check_connection": True})
    assert changed.status_code == 200, changed.get_json()
    assert _query(db_client, "SELECT count(*) FROM flowers", db="m_echo")["data"] == [[3]]
    # A wrong password, sent in clear, replaces it: the check refuses it, nothing changes.
    wrong = db_client.put("/api/databases/m_echo", json={
        "database": {"parameters": {**shown, "password": "nope"}}, "check_connection": True})
    assert wrong.status_code == 200 and wrong.get_json()["status"] == "connection_error"
    assert _query(db_client, "SELECT count(*) FROM flowers", db="m_echo")["data"] == [[3]]


def test_rotate_key_reencrypts_with_the_newest(other_app, db_client, maria_db):
    db_client.post("/api/databases", json=database_body("m_rot", "mariadb", maria_db))
    new_key = Fernet.generate_key().decode()
    both = other_app(ENCRYPTION_KEY=f"{new_key},{KEY}")
    result = both.test_cli_runner().invoke(args=["databases", "rotate-key"])
    assert result.exit_code == 0, result.output
    assert "1 database(s)" in result.output
    # Only the new key now: the password still opens, so the query runs.
    only_new = other_app(ENCRYPTION_KEY=new_key).test_client()
    assert _query(only_new, "SELECT count(*) FROM flowers", db="m_rot")["data"] == [[3]]
    # Only the old key: the token cannot be opened; a clear error, never a 500.
    only_old = other_app(ENCRYPTION_KEY=KEY).test_client()
    refused = _query(only_old, "SELECT count(*) FROM flowers", db="m_rot")
    assert refused["type"] == "error" and "decrypted" in refused["error_message"]


def test_without_a_key_a_password_is_refused(other_app, pg_db):
    client = other_app(ENCRYPTION_KEY=None).test_client()
    assert_problem(client.post("/api/databases", json=database_body("nokey", "postgres", pg_db)),
                   422, "QUARRY_ENCRYPTION_KEY")
    assert "nokey" not in [n for n, _ in _names(client)]
    # Without a password (trust auth) nothing needs encrypting.
    no_password = {k: v for k, v in pg_db.items() if k != "password"}
    created = client.post("/api/databases", json=database_body("nokey", "postgres", no_password))
    assert created.status_code == 201, created.get_json()


@pytest.mark.parametrize(("engine", "params", "words"), [
    ("mongodb", {"host": "h"}, ["engine", "mongodb"]),
    ("postgres", {"host": "127.0.0.1", "user": "u"}, ["database", "missing"]),
    ("postgres", {"host": "127.0.0.1", "database": "d", "user": "u", "port": "fifty"},
     ["port", "integer"]),
    ("postgres", {"host": "127.0.0.1", "database": "d", "user": 5}, ["user", "string"]),
    ("mysql", {"host": "127.0.0.1", "database": "d", "user": "u", "sslmode": "require"},
     ["sslmode", "unknown parameter"]),
    ("postgres", {"host": "127.0.0.1", "database": "d", "user": "u", "sslmode": "always"},
     ["sslmode", "one of"]),
    ("postgres", {"host": "127.0.0.1", "database": "d", "user": "u", "schema": "a; DROP"},
     ["schema"]),
    ("sqlite", {}, ["db_file", "missing"]),
    ("sqlite", {"db_file": "/etc/passwd"}, ["db_file", "QUARRY_SQLITE_ROOTS"]),
    ("sqlite", {"db_file": "../../../../../../etc/passwd"}, ["db_file", "QUARRY_SQLITE_ROOTS"]),
    ("sqlite", {"db_file": "missing.db"}, ["db_file", "no such file"]),
])
def test_bad_input_is_refused_naming_it(db_client, engine, params, words):
    before = db_client.get("/api/databases").get_json()
    response = db_client.post("/api/databases", json=database_body("bad_db", engine, params))
    assert_problem(response, 422, *words)  # the right shape; what it says cannot be done
    assert db_client.get("/api/databases").get_json() == before


@pytest.mark.parametrize("body", [
    {}, {"database": {"engine": "postgres"}}, {"database": {"name": "x"}},
    {"database": {"name": "9lives", "engine": "sqlite"}},
    {"database": {"name": "x", "engine": "sqlite", "parameters": ["db_file"]}},
    {"database": {"name": "x", "engine": "sqlite", "parameters": {}}, "check_connection": "hm"},
])
def test_malformed_bodies_are_400(db_client, body):
    assert_problem(db_client.post("/api/databases", json=body), 400)
    assert [n for n, t in _names(db_client) if t == "data"] == ["demo", "files"]


def test_the_system_database_name_is_taken(db_client):
    # The right shape (a name by the rule), but SQL's catalogue has the name: 409, not 400.
    body = {"database": {"name": "information_schema", "engine": "sqlite", "parameters": {}}}
    assert_problem(db_client.post("/api/databases", json=body), 409, "system database")
    assert_problem(db_client.put("/api/databases/Information_Schema", json=body), 409)
    assert [n for n, t in _names(db_client) if t == "data"] == ["demo", "files"]


def test_sqlite_files_only_under_the_roots(other_app, db_app, db_client, store_url, tmp_path):
    instance = db_app.instance_path
    outside = tmp_path / "outside"
    outside.mkdir()
    make_sqlite(str(outside / "secret.db"))
    os.symlink(str(outside / "secret.db"), os.path.join(instance, "link.db"))
    os.symlink("/etc/passwd", os.path.join(instance, "passwd.db"))
    with open(os.path.join(instance, "notes.db"), "w") as handle:
        handle.write("not a database")
    for path, why in (("link.db", "QUARRY_SQLITE_ROOTS"), ("passwd.db", "QUARRY_SQLITE_ROOTS"),
                      ("notes.db", "not a SQLite"), (str(outside / "secret.db"),
                                                     "QUARRY_SQLITE_ROOTS")):
        response = db_client.post("/api/databases",
                                  json=database_body("lite", "sqlite", {"db_file": path}))
        assert_problem(response, 422, "db_file", why)
    make_sqlite(os.path.join(instance, "ok.db"), rows=5)
    created = db_client.post("/api/databases",
                             json=database_body("lite", "sqlite", {"db_file": "ok.db"}))
    assert created.status_code == 201, created.get_json()
    assert _query(db_client, "SELECT count(*) FROM lite.t")["data"] == [[5]]
    # Read-only like every source: the authorizer refuses writes, the gate first.
    refused = _query(db_client, "DELETE FROM t", db="lite")
    assert refused["type"] == "error"
    assert _query(db_client, "SELECT count(*) FROM lite.t")["data"] == [[5]]

    if store_url.startswith("sqlite:///"):
        # With the store's folder a root, the store itself is still never opened.
        store_dir = os.path.dirname(store_url.removeprefix("sqlite:///"))
        app = other_app(SQLITE_ROOTS=f"{instance}{os.pathsep}{store_dir}")
        response = app.test_client().post("/api/databases", json=database_body(
            "store", "sqlite", {"db_file": store_url.removeprefix("sqlite:///")}))
        assert_problem(response, 422, "db_file", "metadata store")


def test_one_name_space_with_projects(db_client, sql):
    lite = {"db_file": "demo_copy.db"}
    make_sqlite(os.path.join(db_client.application.instance_path, "demo_copy.db"))
    assert db_client.post("/api/projects", json={"name": "proj1"}).status_code == 201
    assert_problem(db_client.post("/api/databases", json=database_body("PROJ1", "sqlite", lite)),
                   409, "project")
    assert db_client.post("/api/databases", json=database_body("lite1", "sqlite", lite)) \
        .status_code == 201
    assert_problem(db_client.post("/api/projects", json={"name": "Lite1"}), 409, "data source")
    assert_problem(db_client.post("/api/databases", json=database_body("LITE1", "sqlite", lite)),
                   409, "already exists")
    assert_problem(db_client.post("/api/databases", json=database_body("demo", "sqlite", lite)),
                   409, "configured")
    answer = sql("CREATE PROJECT lite1")
    assert answer["type"] == "error" and "lite1" in answer["error_message"]
    answer = sql("CREATE DATABASE proj1 WITH ENGINE = 'sqlite', "
                 "PARAMETERS = {\"db_file\": \"demo_copy.db\"}")
    assert answer["type"] == "error" and "project" in answer["error_message"]
    assert db_client.get("/api/databases/proj1").get_json()["type"] == "project"
    assert_problem(db_client.delete("/api/databases/proj1"), 422, "project")


def test_configured_sources_cannot_be_changed(db_client, sql):
    view = db_client.get("/api/databases/demo").get_json()
    assert view["configured"] is True and view["engine"] == "sqlite"
    assert_problem(db_client.delete("/api/databases/demo"), 409, "configured")
    assert_problem(db_client.put("/api/databases/demo", json={
        "database": {"parameters": {"db_file": "x.db"}}}), 409, "configured")
    assert sql("DROP DATABASE demo")["type"] == "error"
    assert _query(db_client, "SELECT count(*) FROM demo.iris")["data"] == [[150]]


def test_skills_that_use_a_database_block_its_drop(db_client, pg_db):
    db_client.post("/api/databases", json=database_body("sk_pg", "postgres", pg_db))
    db_client.post("/api/projects", json={"name": "p1"})
    skill = db_client.post("/api/projects/p1/skills", json={"skill": {
        "name": "pts", "type": "sql", "params": {"database": "sk_pg", "tables": ["points"]}}})
    assert skill.status_code == 201, skill.get_json()
    body = assert_problem(db_client.delete("/api/databases/sk_pg"), 409, "p1.pts")
    assert body["references"] == {"skills": ["p1.pts"]}
    assert db_client.delete("/api/databases/sk_pg?cascade=true").status_code == 204
    assert db_client.get("/api/projects/p1/skills/pts").status_code == 404


def test_status_checks_without_saving(db_client, pg_db):
    ok = db_client.post("/api/databases/status", json={"engine": "postgres", **pg_db})
    assert ok.status_code == 200 and ok.get_json() == {"status": "success"}
    bad = db_client.post("/api/databases/status",
                         json={"engine": "postgres", **pg_db, "database": "no_such_db_x"})
    assert bad.status_code == 200 and bad.get_json()["status"] == "connection_error"
    assert "no_such_db_x" in bad.get_json()["detail"]
    assert_problem(db_client.post("/api/databases/status", json={"host": "h"}), 400, "engine")
    assert [n for n, t in _names(db_client) if t == "data"] == ["demo", "files"]


def test_failed_check_answers_like_mindsdb_and_stores_nothing(db_client, pg_db):
    response = db_client.post("/api/databases", json=database_body(
        "down_pg", "postgres", {**pg_db, "port": 1}))
    assert response.status_code == 200
    assert response.get_json()["status"] == "connection_error"
    assert response.get_json()["detail"]
    assert "down_pg" not in [n for n, _ in _names(db_client)]
    # Without the check it is stored, and a query says the source is down.
    stored = db_client.post("/api/databases", json=database_body(
        "down_pg", "postgres", {**pg_db, "port": 1}, check=False))
    assert stored.status_code == 201
    answer = _query(db_client, "SELECT 1 FROM points", db="down_pg")
    assert answer["type"] == "error" and answer["error_code"] == 10
    status = db_client.get("/api/databases/down_pg?check_connection=true").get_json()
    assert status["connection_status"]["success"] is False
    assert status["connection_status"]["error_message"]


def test_change_replaces_the_pool_and_the_gated_statement(db_client, pg_db):
    db_client.post("/api/databases", json=database_body("moving", "postgres", pg_db))
    query = "SELECT count(*) FROM moving.points"
    assert _query(db_client, query)["data"] == [[len(PG_ROWS)]]
    changed = db_client.put("/api/databases/moving", json={
        "database": {"parameters": {**pg_db, "database": PG_OTHER_DB, "password": "********"}}})
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["connection_data"]["database"] == PG_OTHER_DB
    assert _query(db_client, query)["data"] == [[1]]


def test_concurrent_creates_one_wins(db_app, db_client, pg_db):
    racers = 8
    barrier = threading.Barrier(racers)

    def send(i):
        client = db_app.test_client()
        barrier.wait()
        return client.post("/api/databases", json=database_body(
            "twin" if i % 2 else "TWIN", "postgres", pg_db, check=False)).status_code

    with ThreadPoolExecutor(racers) as pool:
        statuses = list(pool.map(send, range(racers)))
    assert sorted(statuses) == [201] + [409] * (racers - 1)
    assert [n for n, t in _names(db_client) if t == "data"] in (
        ["demo", "files", "twin"], ["demo", "files", "TWIN"])


def test_other_instances_see_changes_within_a_second(other_app, db_client, pg_db):
    """Two apps on one store stand for two workers (or two hosts): no restart needed."""
    other = other_app().test_client()
    query = "SELECT count(*) FROM shared.points"
    assert _query(other, query)["type"] == "error"  # not yet: and the other has looked
    db_client.post("/api/databases", json=database_body("shared", "postgres", pg_db))

    def eventually(expected, seconds: float = 1.5) -> float:
        start = time.monotonic()
        while True:
            answer = _query(other, query)
            if answer.get("data") == expected or time.monotonic() - start > seconds:
                assert answer.get("data") == expected, answer
                return time.monotonic() - start
            time.sleep(0.05)

    assert eventually([[len(PG_ROWS)]]) <= 1.5
    db_client.put("/api/databases/shared", json={
        "database": {"parameters": {**pg_db, "database": PG_OTHER_DB, "password": "********"}}})
    assert eventually([[1]]) <= 1.5
    db_client.delete("/api/databases/shared")
    assert eventually(None) <= 1.5
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{PG_OTHER_DB}") as conn:
        # The dropped source's pool was disposed in the other app too: no session is left
        # open by this process on the database it pointed at.
        pids = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                            "AND pid <> pg_backend_pid() AND application_name = ''",
                            (PG_OTHER_DB,)).fetchone()[0]
    assert pids == 0


def test_passwords_never_reach_the_log(db_client, maria_db, sql, caplog):
    caplog.set_level("DEBUG")
    db_client.post("/api/databases", json=database_body("logged", "mariadb", maria_db))
    db_client.post("/api/databases", json=database_body(
        "logged2", "mariadb", {**maria_db, "password": MARIA_PASSWORD + "x"}))
    sql("ALTER DATABASE logged PARAMETERS = " + str({**maria_db, "port": 1}).replace("'", '"'))
    sql("SELECT count(*) FROM logged.flowers")
    db_client.delete("/api/databases/logged")
    assert caplog.records, "nothing was logged at all: the test would prove nothing"
    assert MARIA_PASSWORD not in caplog.text


def test_rotate_key_needs_a_key_and_a_bad_key_stops_the_start(other_app):
    result = other_app(ENCRYPTION_KEY=None).test_cli_runner().invoke(
        args=["databases", "rotate-key"])
    assert result.exit_code != 0 and "QUARRY_ENCRYPTION_KEY" in result.output
    with pytest.raises(RuntimeError, match="QUARRY_ENCRYPTION_KEY: key 2"):
        other_app(ENCRYPTION_KEY=f"{KEY},not-a-key")
