"""The connection parameters MindsDB's handlers take (postgres, mysql, mariadb): accepted,
used where they apply, "type" ignored, an unknown key refused naming the accepted ones; and
PUT / ALTER DATABASE merging the parameters they are given (null removes one)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import assert_problem

from .conftest import MARIA_PASSWORD, _pg_admin, database_body

# The rules are the service's and the same on both stores (test_rest.py): SQLite is enough.
pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def _query(client, query: str, db: str | None = None) -> dict:
    body = {"query": query, **({"context": {"db": db}} if db else {})}
    response = client.post("/api/sql/query", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _parameters(client, name: str) -> dict:
    response = client.get(f"/api/databases/{name}")
    assert response.status_code == 200, response.get_json()
    return response.get_json()["connection_data"]


def test_mindsdb_postgres_arguments_are_used_and_type_ignored(db_client, pg_db):
    """The body of MindsDB's own HTTP tests (with "type"), plus schema, sslmode and
    libpq's keywords: each applies to the connection."""
    params = {"type": "postgres", **pg_db, "port": "5432", "schema": "archive",
              "sslmode": "disable", "connect_timeout": 5,
              "connection_parameters": {"application_name": "quarry_params_t",
                                        "connect_timeout": 3}}
    created = db_client.post("/api/databases", json=database_body("mdb_pg", "postgres", params))
    assert created.status_code == 201, created.get_json()
    shown = _parameters(db_client, "mdb_pg")
    assert "type" not in shown and shown["schema"] == "archive" and shown["port"] == 5432
    # schema: bare names resolve in it; application_name: the connection carries it.
    assert _query(db_client, "SELECT count(*) FROM old_points", db="mdb_pg")["data"] == [[2]]
    with _pg_admin() as admin:
        found = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                              "'quarry_params_t'").fetchone()
    assert found[0] >= 1


def test_sql_create_database_with_type_and_unknown_keys(db_client, pg_db):
    params = {"type": "postgres", **pg_db}
    created = _query(db_client, f"CREATE DATABASE sql_pg WITH ENGINE = 'postgres', "
                                f"PARAMETERS = {json.dumps(params)}")
    assert created["type"] == "ok", created
    assert _query(db_client, "SELECT count(*) FROM sql_pg.points")["data"] == [[60]]

    for extra, word in (({"bogus": 1}, "bogus"),
                        ({"connection_parameters": {"sslrootcert": "/etc/passwd"}},
                         "sslrootcert"),
                        ({"connect_timeout": 0}, "connect_timeout")):
        refused = _query(db_client, f"CREATE DATABASE sql_bad WITH ENGINE = 'postgres', "
                                    f"PARAMETERS = {json.dumps({**params, **extra})}")
        assert refused["type"] == "error" and refused["error_code"] == 19, refused
        assert word in refused["error_message"], refused
    unknown = _query(db_client, "CREATE DATABASE sql_bad WITH ENGINE = 'postgres', "
                                f"PARAMETERS = {json.dumps({**params, 'bogus': 1})}")
    # The accepted ones are named.
    assert "sslmode" in unknown["error_message"] and "schema" in unknown["error_message"]
    response = db_client.post("/api/databases", json=database_body(
        "rest_bad", "postgres", {**params, "bogus": 1}))
    body = assert_problem(response, 422, "bogus", "connection_parameters")
    assert "bogus" in body["errors"]["parameters"]
    assert db_client.get("/api/databases/sql_bad").status_code == 404


def test_mariadb_url_ssl_and_type(db_client, maria_db):
    """MindsDB's mysql/mariadb arguments: url in place of the five, ssl false, type."""
    url = (f"mariadb://{maria_db['user']}:{MARIA_PASSWORD}@127.0.0.1:3306/"
           f"{maria_db['database']}")
    created = db_client.post("/api/databases", json=database_body(
        "m_url", "mariadb", {"type": "mariadb", "url": url, "ssl": False,
                             "connect_timeout": "4"}))
    assert created.status_code == 201, created.get_json()
    shown = _parameters(db_client, "m_url")
    assert shown["password"] == "********" and "url" not in shown
    assert MARIA_PASSWORD not in json.dumps(shown)
    assert (shown["host"], shown["user"], shown["ssl"]) == ("127.0.0.1", maria_db["user"], False)
    assert _query(db_client, "SELECT count(*) FROM m_url.flowers")["data"] == [[3]]
    # sslmode is PostgreSQL's: ignoring it on MySQL would drop a TLS demand in silence.
    response = db_client.post("/api/databases", json=database_body(
        "m_bad", "mysql", {**maria_db, "sslmode": "require"}))
    assert_problem(response, 422, "sslmode", "ssl_ca")


def test_put_merges_the_parameters_it_is_given(db_client, maria_db):
    created = db_client.post("/api/databases", json=database_body("m_put", "mariadb", maria_db))
    assert created.status_code == 201, created.get_json()
    before = _parameters(db_client, "m_put")

    # Only the changed parameter (MindsDB merges it into the stored ones).
    changed = db_client.put("/api/databases/m_put",
                            json={"database": {"parameters": {"connect_timeout": 7}}})
    assert changed.status_code == 200, changed.get_json()
    assert _parameters(db_client, "m_put") == {**before, "connect_timeout": 7}
    # The stored password was kept: the account still signs in.
    assert _query(db_client, "SELECT count(*) FROM m_put.flowers")["data"] == [[3]]

    # null removes a parameter: without its password the account is refused.
    removed = db_client.put("/api/databases/m_put",
                            json={"database": {"parameters": {"connect_timeout": None,
                                                              "password": None}}})
    assert removed.status_code == 200, removed.get_json()
    assert _parameters(db_client, "m_put") == {k: v for k, v in before.items()
                                               if k != "password"}
    refused = _query(db_client, "SELECT count(*) FROM m_put.flowers")
    assert refused["type"] == "error", refused

    # ALTER DATABASE merges too; a required parameter cannot be removed.
    altered = _query(db_client, f"ALTER DATABASE m_put PARAMETERS = "
                                f"{json.dumps({'password': MARIA_PASSWORD})}")
    assert altered["type"] == "ok", altered
    assert _query(db_client, "SELECT count(*) FROM m_put.flowers")["data"] == [[3]]
    missing = db_client.put("/api/databases/m_put",
                            json={"database": {"parameters": {"host": None}}})
    assert_problem(missing, 422, "host", "missing")
    assert _parameters(db_client, "m_put") == before
