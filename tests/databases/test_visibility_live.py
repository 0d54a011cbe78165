"""What one request creates, changes or drops, the very next request sees on every worker and
every instance: a real gunicorn of three workers (and, on PostgreSQL, a second instance on the
same store), each request on a new connection so that the workers take turns."""

from __future__ import annotations

import itertools
import shutil
import sqlite3
from collections.abc import Iterator

import pytest
import requests

from tests.conftest import _empty_pg_store
from tests.live import quarry_env, serving

pytestmark = pytest.mark.slow

ROUNDS = 6
READS = 3  # requests right after each change: with three workers, some reach the others


def _data_file(folder) -> None:
    with sqlite3.connect(folder / "vis.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, label TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, "one"), (2, "two")])
    conn.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def servers(request, tmp_path_factory, session_dir) -> Iterator[list[str]]:
    """The URLs of every instance: SQLite, one of three workers; PostgreSQL, two instances
    (three workers and one) on one store."""
    tmp = tmp_path_factory.mktemp(f"visibility_{request.param}")
    _data_file(tmp)
    if request.param == "sqlite":
        shutil.copy(request.getfixturevalue("sqlite_template"), tmp / "store.db")
        store = f"sqlite:///{tmp}/store.db"
    else:
        store = request.getfixturevalue("pg_store")
        _empty_pg_store(store)
    env = quarry_env(QUARRY_DATABASE_URL=store, QUARRY_INSTANCE_PATH=str(tmp),
                     QUARRY_WORKERS="3", QUARRY_THREADS="2",
                     QUARRY_DEMO_PATH=f"{session_dir}/demo.db")
    if request.param == "sqlite":
        with serving(env, tmp / "a") as server:
            yield [server.url]
        return
    with serving(env, tmp / "a") as first, \
            serving({**env, "QUARRY_WORKERS": "1"}, tmp / "b") as second:
        yield [first.url, second.url]


def _sql(url: str, query: str) -> dict:
    # A new connection each time (no keep-alive): gunicorn hands it to any worker.
    response = requests.post(f"{url}/api/sql/query", json={"query": query},
                             headers={"Connection": "close"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_next_request_sees_every_change(servers):
    turns = itertools.cycle(servers)
    for i in range(ROUNDS):
        name = f"vis_{i}"
        created = _sql(next(turns), f"CREATE DATABASE {name} WITH ENGINE = 'sqlite', "
                                    "PARAMETERS = {\"db_file\": \"vis.db\"}")
        assert created["type"] == "ok", created
        for _ in range(READS):
            answer = _sql(next(turns), f"SELECT label FROM {name}.t ORDER BY id")
            assert answer.get("data") == [["one"], ["two"]], (i, answer)
        view = _sql(next(turns), f"CREATE VIEW mindsdb.{name}_v AS "
                                 f"(SELECT id FROM {name}.t WHERE id > 1)")
        assert view["type"] == "ok", (i, view)
        for _ in range(READS):
            answer = _sql(next(turns), f"SELECT id FROM mindsdb.{name}_v")
            assert answer.get("data") == [[2]], (i, answer)
        assert _sql(next(turns), f"DROP VIEW mindsdb.{name}_v")["type"] == "ok"
        assert _sql(next(turns), f"DROP DATABASE {name}")["type"] == "ok"
        for _ in range(READS):
            answer = _sql(next(turns), f"SELECT label FROM {name}.t")
            assert answer["type"] == "error", (i, answer)
            assert f"'{name}'" in answer["error_message"], (i, answer)
