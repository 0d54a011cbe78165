"""An uploaded file's rows go wherever a table's go: a prediction JOIN reads them (through
the federation engine), and a view that joins a file with a model is stored and read."""

from __future__ import annotations

import io

import pytest

from .test_views_sources import views  # noqa: F401 - a fixture

# y = 2x + 1 over a few repeated x values: a model learns it exactly.
POINTS = [((i % 7) * 1.5, (i % 7) * 3 + 1) for i in range(30)]


@pytest.fixture(scope="module")
def points_model(fed_app):
    client = fed_app.test_client()
    data = ("x,y\n" + "".join(f"{x},{y}\n" for x, y in POINTS)).encode()
    response = client.put("/api/files/fpoints", query_string={"overwrite": "true"},
                          data={"file": (io.BytesIO(data), "points.csv")},
                          content_type="multipart/form-data")
    assert response.status_code == 200, response.get_data(as_text=True)
    body = client.post("/api/sql/query", json={
        "query": "CREATE MODEL mindsdb.fpm FROM files (SELECT x, y FROM fpoints) PREDICT y "
                 "USING join_learn_process = true, time_budget_s = 1"}).get_json()
    assert body["type"] == "table" and body["data"][0][5] == "complete", body
    yield
    client.post("/api/sql/query", json={"query": "DROP MODEL IF EXISTS mindsdb.fpm"})
    client.delete("/api/files/fpoints")


@pytest.mark.parametrize(("sql", "db"), [
    ("SELECT t.x, m.y FROM files.fpoints AS t JOIN mindsdb.fpm AS m WHERE t.x < 2", None),
    ("SELECT t.x, m.y FROM (SELECT x FROM files.fpoints WHERE x < 2) AS t "
     "JOIN mindsdb.fpm AS m", None),
    ("SELECT t.x, m.y FROM fpoints AS t JOIN mindsdb.fpm AS m WHERE t.x < 2", "files"),
])
def test_a_prediction_join_reads_a_files_rows(points_model, fquery, sql, db):
    body = fquery(sql, db=db)
    assert body["type"] == "table", body
    expected = sorted((x, y) for x, y in POINTS if x < 2)
    assert sorted((x, round(y)) for x, y in body["data"]) == expected, body


def test_a_view_joining_a_file_with_a_model_is_stored_and_read(points_model, fquery, fed_app,
                                                               views):  # noqa: F811
    views.extend(["fpred", "fpred_rest"])
    body = fquery("CREATE VIEW mindsdb.fpred AS (SELECT t.x, m.y FROM files.fpoints AS t "
                  "JOIN mindsdb.fpm AS m)")
    assert body["type"] == "ok", body
    body = fquery("SELECT * FROM mindsdb.fpred WHERE x > 8 ORDER BY x")
    assert body["column_names"] == ["x", "y"], body
    assert [(x, round(y)) for x, y in body["data"]] == sorted(
        (x, y) for x, y in POINTS if x > 8)
    body = fquery("SELECT v.y FROM fpred AS v ORDER BY v.x LIMIT 1")
    assert [[round(body["data"][0][0])]] == [[1]], body
    # REST makes the same view, and refuses one whose rows or model do not exist.
    client = fed_app.test_client()
    made = client.post("/api/projects/mindsdb/views", json={"view": {
        "name": "fpred_rest", "query": "SELECT t.x, m.y FROM files.fpoints t "
                                       "JOIN mindsdb.fpm m"}})
    assert made.status_code == 201, made.get_json()
    for query, named in (("SELECT t.x, m.y FROM files.nosuch t JOIN mindsdb.fpm m", "nosuch"),
                         ("SELECT t.x FROM files.fpoints t JOIN mindsdb.nomodel m",
                          "nomodel")):
        body = fquery(f"CREATE VIEW mindsdb.fbad AS ({query})")
        assert body["type"] == "error" and named in body["error_message"], body
    assert client.get("/api/projects/mindsdb/views/fbad").status_code == 404
