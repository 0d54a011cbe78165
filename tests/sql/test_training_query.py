"""CREATE MODEL's training query, checked on real PostgreSQL and MariaDB data sources before
anything is recorded: only its columns are asked for, through the read-only path."""

from __future__ import annotations

import itertools

import pytest

from tests.helpers import assert_problem

# 250⁴ rows: run for real it would take far longer than the tests' time limit (5 s), so an
# answer that lists its columns shows the columns were read without running it.
HUGE = "SELECT a.n, a.label, a.y FROM big a, big b, big c, big d"
_names = itertools.count()


@pytest.fixture
def project(sql_app):
    client = sql_app.test_client()
    name = f"tq_{next(_names)}"
    assert client.post("/api/projects", json={"name": name}).status_code == 201
    yield client, name
    client.delete(f"/api/projects/{name}")


def _models(client, name):
    return client.get(f"/api/projects/{name}/models").get_json()


@pytest.mark.parametrize("source", ["pg", "maria"])
def test_missing_predict_column_is_refused_without_running_the_query(project, source):
    client, name = project
    response = client.post(f"/api/projects/{name}/models", json={
        "query": f"CREATE MODEL {name}.m FROM {source} ({HUGE}) PREDICT x"})
    body = assert_problem(response, 422, "'x'", "n, label, y")
    assert body["title"] == "Unknown PREDICT column"
    assert _models(client, name) == []


@pytest.mark.parametrize("source", ["pg", "maria"])
def test_two_columns_of_one_name_are_read_without_running_the_query(project, source):
    # The LIMIT 0 goes on the statement itself: MariaDB refuses a derived table around it
    # ("Duplicate column name 'n'"), which a training query may well be.
    client, name = project
    response = client.post(f"/api/projects/{name}/models", json={
        "query": f"CREATE MODEL {name}.m FROM {source} "
                 "(SELECT a.n, b.n, a.y FROM big a, big b, big c, big d) PREDICT x"})
    assert_problem(response, 422, "'x'", "n, n, y")
    # Two columns of one name cannot both be trained on (the second hid the first, and the
    # training failed inside): refused at once, naming it; renamed, it trains.
    refused = client.post(f"/api/projects/{name}/models", json={
        "query": f"CREATE MODEL {name}.m FROM {source} (SELECT a.n, b.n, a.y FROM big a "
                 "JOIN big b ON b.n = a.n ORDER BY a.n LIMIT 10) PREDICT y"})
    body = assert_problem(refused, 422, "'n'", "more than once", "AS")
    assert body["title"] == "Invalid training query"
    assert _models(client, name) == []
    accepted = client.post(f"/api/projects/{name}/models", json={
        "query": f"CREATE MODEL {name}.m FROM {source} (SELECT a.n, b.n AS n2, a.y FROM big "
                 "a JOIN big b ON b.n = a.n ORDER BY a.n LIMIT 10) PREDICT y"})
    assert accepted.status_code in (200, 201), accepted.get_json()


@pytest.mark.parametrize("source", ["pg", "maria"])
@pytest.mark.parametrize("select, words", [
    ("DELETE FROM big", ["delete"]),
    ("UPDATE big SET y = 0", ["update"]),
    ("SELECT n, y FROM nosuch_table", ["nosuch_table"]),
    ("SELECT n, nosuch FROM big", ["nosuch"]),
])
def test_queries_that_are_not_reads_of_the_source_are_refused(project, query, source, select,
                                                               words):
    client, name = project
    statement = f"CREATE MODEL {name}.m FROM {source} ({select}) PREDICT y"
    assert_problem(client.post(f"/api/projects/{name}/models", json={"query": statement}),
                   422, "training query", *words)
    answer = client.post("/api/sql/query", json={"query": statement}).get_json()
    assert answer["type"] == "error" and all(w in answer["error_message"].lower()
                                             for w in words), answer
    assert _models(client, name) == []
    # Nothing was changed on the source either.
    assert query("SELECT count(*) AS c, sum(y) AS s FROM big", db=source)["data"] == \
        [[250, 750]]
