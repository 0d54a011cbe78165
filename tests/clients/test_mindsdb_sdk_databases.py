"""mindsdb_sdk 3.4.10, unchanged, connecting real PostgreSQL and MariaDB databases to a live
Quarry (gunicorn, two workers): create, list, get, query, train from, drop."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import requests
from cryptography.fernet import Fernet

from tests.databases.conftest import (  # noqa: F401 - fixtures used below
    MARIA_PASSWORD,
    PG_PASSWORD,
    PG_ROWS,
    maria_db,
    pg_db,
)
from tests.live import quarry_env, serving, sqlite_store

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory, session_dir, sqlite_template):
    tmp = tmp_path_factory.mktemp("sdk_databases")
    env = quarry_env(QUARRY_DATABASE_URL=sqlite_store(sqlite_template, tmp),
                     QUARRY_INSTANCE_PATH=str(tmp), QUARRY_WORKERS="2", QUARRY_THREADS="4",
                     QUARRY_DEMO_PATH=f"{session_dir}/demo.db",
                     QUARRY_ENCRYPTION_KEY=Fernet.generate_key().decode())
    with serving(env, tmp) as server:
        yield server.url
    # The workers logged every request of this module: never a password.
    logs = "".join(p.read_text() for p in tmp.glob("*.log"))
    assert logs and MARIA_PASSWORD not in logs and PG_PASSWORD not in logs
    # Nor the store, whose audit log and history keep the SDK's CREATE DATABASE, masked.
    store = b"".join(p.read_bytes() for p in tmp.glob("store.db*"))
    assert MARIA_PASSWORD.encode() not in store and PG_PASSWORD.encode() not in store


def test_sdk_databases_postgres(url, pg_db):  # noqa: F811
    server = mindsdb_sdk.connect(url)
    created = server.create_database("sdk_pg", engine="postgres", connection_args=pg_db)
    assert created.name == "sdk_pg"
    # The SDK sent CREATE DATABASE … PARAMETERS = {…"password": …}: recorded, masked.
    audit = requests.get(url + "/api/audit", params={"kind": "sql"}, timeout=30).json()
    statement = audit["records"][0]["statement"]
    assert "sdk_pg" in statement and "'password': '********'" in statement, statement
    history = requests.get(url + "/api/console/history", timeout=30).text
    assert "sdk_pg" in history and PG_PASSWORD not in history + json.dumps(audit)
    # Two workers: whichever answers the very next request knows the new database.
    names = {d.name: d.engine for d in server.list_databases()}
    assert names == {"demo": "sqlite", "files": "files", "sdk_pg": "postgres"}
    database = server.get_database("sdk_pg")
    assert database.engine == "postgres"
    # CONNECTION_DATA is JSON text, as MindsDB answers it; the password masked.
    assert json.loads(database.params)["password"] == "********"
    assert sorted(t.name for t in database.list_tables()) == ["b_points", "points"]
    frame = database.query("SELECT id, label, x FROM points ORDER BY id LIMIT 5").fetch()
    assert isinstance(frame, pd.DataFrame) and list(frame.id) == [1, 2, 3, 4, 5]
    assert len(database.query("SELECT * FROM points").fetch()) == len(PG_ROWS)

    project = server.get_project("mindsdb")
    model = project.models.create("sdk_kinds", predict="kind", query="SELECT x, kind FROM points",
                                  database="sdk_pg", options={"join_learn_process": True})
    assert model.data["status"] == "complete"
    predicted = model.predict(pd.DataFrame([{"x": 4.5}]))
    assert predicted.kind[0] in ("a", "b")
    project.models.drop("sdk_kinds")

    server.drop_database("sdk_pg")
    assert "sdk_pg" not in [d.name for d in server.list_databases()]
    with pytest.raises(AttributeError):
        server.get_database("sdk_pg")


def test_sdk_databases_mariadb(url, maria_db):  # noqa: F811
    server = mindsdb_sdk.connect(url)
    database = server.databases.create("sdk_maria", engine="mariadb", connection_args=maria_db)
    frame = database.query("SELECT name, petal FROM flowers ORDER BY id").fetch()
    assert list(frame.name) == ["rose", "tulip", "iris"]
    assert [t.name for t in server.get_database("sdk_maria").list_tables()] == ["flowers"]
    with pytest.raises(RuntimeError, match="sdk_maria"):
        server.create_database("sdk_maria", engine="mariadb", connection_args=maria_db)
    server.databases.drop("sdk_maria")
