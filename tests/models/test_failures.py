"""Every way CREATE MODEL, describe and predict can fail: a clear 4xx or status error."""

import pytest

from app.sql.errors import ErrorCode
from tests.helpers import assert_problem
from tests.models.conftest import create, wait_for

# Slow on SQLite (tens of millions of recursive steps) yet a plain read-only SELECT.
SLOW_SELECT = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
               "WHERE x < 300000000) SELECT sum(x % 7) AS a, 1 AS b FROM c")


@pytest.mark.parametrize("body, words", [
    ({}, ["query"]),
    ({"query": 5}, ["query"]),
    ({"query": " \n"}, ["query"]),
])
def test_create_model_bodies_not_of_the_documented_shape_are_400(p1, body, words):
    response = p1.post("/api/projects/p1/models", json=body)
    assert_problem(response, 400, *words)
    assert p1.get("/api/projects/p1/models").get_json() == []


# The body has the documented shape (a query string); what the statement says cannot be
# done: 422, so that a client can tell it from a malformed request (400).
@pytest.mark.parametrize("body, words", [
    ({"query": "SELECT 1"}, ["not a create model statement"]),
    ({"query": "CREAT x"}, ["invalid"]),
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
               "USING engine = 'nope_engine'"}, ["nope_engine", "sklearn"]),
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
               "USING foo = 1, bar = 2"}, ["foo", "bar", "join_learn_process"]),
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
               "USING problem = 'clustering'"}, ["problem", "classification"]),
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
               "USING validation_fraction = 2"}, ["validation_fraction"]),
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
               "USING max_rows = -3"}, ["line 1, column 83 near '-'"]),  # MindsDB's parser
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
               "USING join_learn_process = 'maybe'"}, ["join_learn_process"]),
    ({"query": "CREATE MODEL p1.m PREDICT species"}, ["from"]),
    ({"query": "CREATE MODEL p1.m FROM nowhere (SELECT 1) PREDICT a"}, ["nowhere", "demo"]),
    ({"query": "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species, "
               "sepal_width"}, ["one column"]),
    ({"query": "CREATE MODEL p1.1m FROM demo (SELECT * FROM iris) PREDICT species"}, []),
])
def test_create_model_statements_that_cannot_be_done_are_422(p1, body, words):
    response = p1.post("/api/projects/p1/models", json=body)
    assert_problem(response, 422, *words)
    assert p1.get("/api/projects/p1/models").get_json() == []


def test_unknown_project_is_404(client):
    response = create(client, "CREATE MODEL nope.m FROM demo (SELECT * FROM iris) "
                              "PREDICT species", project="nope")
    assert_problem(response, 404, "nope")


def test_name_taken_is_409_case_insensitively(p1):
    first = create(p1, "CREATE MODEL p1.m1 FROM demo (SELECT * FROM iris WHERE 1 = 0) "
                       "PREDICT species")
    assert first.status_code == 201
    again = create(p1, "CREATE MODEL p1.M1 FROM demo (SELECT * FROM iris) PREDICT species")
    assert_problem(again, 409, "m1")
    assert len(p1.get("/api/projects/p1/models").get_json()) == 1


IRIS_COLUMNS = "sepal_length, sepal_width, petal_length, petal_width, species"


# The training query is checked before anything is recorded: a statement the SQL gate
# refuses, a table that is not there, or a PREDICT column the query does not return is a
# 422 that says what is wrong, and no model is left behind (not even one in status error).
@pytest.mark.parametrize("select, predict, words", [
    ("SELECT * FROM iris", "no_such_col", ["'no_such_col'", IRIS_COLUMNS]),
    ("SELECT sepal_length, sepal_width FROM iris", "species",
     ["'species'", "sepal_length, sepal_width"]),
    ("DELETE FROM iris", "species", ["select", "delete"]),
    ("INSERT INTO iris (species) VALUES ('x')", "species", ["read-only", "insert"]),
    ("SELECT * FROM iris; DELETE FROM iris", "species", ["one sql statement"]),
    ("SELECT * FROM no_such_table", "species", ["no_such_table"]),
    ("SELECT nosuch FROM iris", "species", ["nosuch"]),
    ("SELECT * FROM iris WHERE species = :kind", "species", ["kind"]),
])
def test_training_queries_that_cannot_train_are_refused_before_recording(p1, select, predict,
                                                                         words):
    for using in ("", " USING join_learn_process = true"):
        response = create(p1, f"CREATE MODEL p1.m FROM demo ({select}) PREDICT {predict}"
                              f"{using}")
        assert_problem(response, 422, *words)
        assert p1.get("/api/projects/p1/models").get_json() == []
    # Through SQL, as mindsdb_sdk sends it: the same refusal, nothing recorded either.
    answer = p1.post("/api/sql/query", json={
        "query": f"CREATE MODEL p1.m FROM demo ({select}) PREDICT {predict}"}).get_json()
    assert answer["type"] == "error", answer
    assert answer["error_code"] == ErrorCode.INVALID_STATEMENT, answer
    for word in words:
        assert word.lower() in answer["error_message"].lower(), answer
    assert p1.get("/api/projects/p1/models").get_json() == []
    # The iris rows are all still there (the DELETE never ran).
    count = p1.post("/api/sql/query", json={"query": "SELECT count(*) AS n FROM demo.iris"})
    assert count.get_json()["data"] == [[150]]


def test_predict_column_is_matched_as_training_matches_it(p1):
    # Unquoted names are folded by some databases: a PREDICT in another case still trains.
    response = create(p1, "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT Species "
                          "USING join_learn_process = true, time_budget_s = 1")
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["status"] == "complete"


def test_qualified_training_query_is_checked_too(p1):
    # FROM (SELECT … FROM demo.iris), as mindsdb_sdk writes models.create(query=…).
    body = assert_problem(create(p1, "CREATE MODEL p1.m FROM (SELECT sepal_length, species "
                                     "FROM demo.iris) PREDICT petal_width"),
                          422, "'petal_width'", "sepal_length, species")
    assert body["errors"] == {"predict": [body["detail"]]}
    assert p1.get("/api/projects/p1/models").get_json() == []


def test_or_replace_with_a_bad_query_keeps_the_model(p1):
    assert create(p1, "CREATE MODEL p1.m FROM demo (SELECT * FROM iris WHERE 1 = 0) "
                      "PREDICT species").status_code == 201
    before = p1.get("/api/projects/p1/models").get_json()
    assert_problem(create(p1, "CREATE OR REPLACE MODEL p1.m FROM demo (SELECT * FROM iris) "
                              "PREDICT nosuch"), 422, "nosuch")
    after = p1.get("/api/projects/p1/models").get_json()
    assert [(m["id"], m["version"]) for m in after] == [(m["id"], m["version"]) for m in before]


def test_retrain_with_a_new_query_is_checked_before_recording(p1):
    assert create(p1, "CREATE MODEL p1.m FROM demo (SELECT * FROM iris WHERE 1 = 0) "
                      "PREDICT species").status_code == 201
    wait_for(p1, "m")
    for path in ("retrain", "finetune"):
        for query, words in [("DELETE FROM iris", ["delete"]),
                             ("SELECT sepal_length, petal_width FROM iris",
                              ["'species'", "sepal_length, petal_width"])]:
            response = p1.post(f"/api/projects/p1/models/m/{path}",
                               json={"query": query, "data_source": "demo"})
            assert_problem(response, 422, *words)
    answer = p1.post("/api/sql/query", json={
        "query": "RETRAIN p1.m FROM demo (SELECT petal_width FROM iris)"}).get_json()
    assert answer["error_code"] == ErrorCode.INVALID_STATEMENT and \
        "'species'" in answer["error_message"], answer
    assert_problem(p1.post("/api/projects/p1/models/nope/retrain",
                           json={"query": "SELECT * FROM iris", "data_source": "demo"}),
                   404, "nope")
    assert [m["version"] for m in p1.get("/api/projects/p1/models").get_json()] == [1]


@pytest.mark.parametrize("select, predict, words", [
    ("SELECT * FROM iris WHERE 1 = 0", "species", ["no rows"]),
    ("SELECT sepal_length, 'x' AS kind FROM iris", "kind", ["constant", "kind"]),
    ("SELECT species FROM iris", "species", ["no usable input"]),
])
def test_training_failures_end_in_error_with_the_reason(p1, select, predict, words):
    # Joined: the POST answers 422 with the reason, and the record stays, in status error.
    joined = create(p1, f"CREATE MODEL p1.joined FROM demo ({select}) PREDICT {predict} "
                        "USING join_learn_process = true")
    assert_problem(joined, 422, *words)
    record = p1.get("/api/projects/p1/models/joined").get_json()
    assert record["status"] == "error" and record["accuracy"] is None
    for word in words:
        assert word.lower() in record["error"].lower()

    # In the background: 201 at once, then error with the same reason.
    response = create(p1, f"CREATE MODEL p1.background FROM demo ({select}) PREDICT {predict}")
    assert response.status_code == 201
    assert response.get_json()["status"] in ("generating", "training")
    record = wait_for(p1, "background")
    assert record["status"] == "error"
    assert all(word.lower() in record["error"].lower() for word in words)

    # Neither can be described or used.
    for name in ("joined", "background"):
        body = assert_problem(p1.get(f"/api/projects/p1/models/{name}/describe"), 409, "error")
        assert body["model_status"] == "error" and body["model_error"] == record["error"]
        assert_problem(p1.post(f"/api/projects/p1/models/{name}/predict",
                               json={"data": [{"sepal_length": 1}]}), 409, "error")


def test_row_sample_too_small_to_train(p1):
    response = create(p1, "CREATE MODEL p1.tiny FROM demo (SELECT * FROM iris) PREDICT species "
                          "USING max_rows = 5, join_learn_process = true")
    assert_problem(response, 422, "too few rows", "5")


def test_training_row_cap(make_app):
    client = make_app(TRAINING_MAX_ROWS=100).test_client()
    client.post("/api/projects", json={"name": "p1"})
    response = create(client, "CREATE MODEL p1.big FROM demo (SELECT * FROM iris) "
                              "PREDICT species USING join_learn_process = true")
    assert_problem(response, 422, "more than 100 rows")


def test_source_time_limit(make_app):
    client = make_app(SQL_TIMEOUT_S=0.5).test_client()
    client.post("/api/projects", json={"name": "p1"})
    response = create(client, f"CREATE MODEL p1.slow FROM demo ({SLOW_SELECT}) PREDICT a "
                              "USING join_learn_process = true")
    body = assert_problem(response, 422, "time limit")
    assert "slow" in body["detail"]
    assert client.get("/api/projects/p1/models/slow").get_json()["status"] == "error"


def test_source_down(make_app):
    # The training query cannot be checked: refused, nothing recorded.
    client = make_app(DATA_SOURCES={
        "down": "postgresql://postgres@127.0.0.1:9/nothing"}).test_client()
    client.post("/api/projects", json={"name": "p1"})
    response = create(client, "CREATE MODEL p1.m FROM down (SELECT a, b FROM t) PREDICT b "
                              "USING join_learn_process = true")
    assert_problem(response, 422, "down", "cannot be reached")
    assert client.get("/api/projects/p1/models").get_json() == []


def test_describe_and_predict_wait_for_training(make_app):
    # A training that cannot finish during the test: describe and predict answer 409.
    client = make_app(SQL_TIMEOUT_S=3).test_client()
    client.post("/api/projects", json={"name": "p1"})
    response = create(client, f"CREATE MODEL p1.slow FROM demo ({SLOW_SELECT}) PREDICT a")
    assert response.status_code == 201
    record = wait_for(client, "slow", statuses=("training",))
    assert record["status"] == "training"
    body = assert_problem(client.get("/api/projects/p1/models/slow/describe"), 409, "training")
    assert body["model_status"] == "training"
    assert_problem(client.post("/api/projects/p1/models/slow/predict",
                               json={"data": [{"b": 1}]}), 409, "training")
    # Deleting it mid-training works; the trainer's late result is dropped.
    assert client.delete("/api/projects/p1/models/slow").status_code == 204
    assert_problem(client.get("/api/projects/p1/models/slow"), 404, "slow")


@pytest.mark.parametrize("name", ["models", "Skills", "agents"])
def test_model_may_not_take_the_name_of_a_project_table(p1, name):
    # SELECT … FROM p1.models reads the project's table of models: such a model could never
    # be queried. One rule in the service: REST and SQL both refuse it with 409.
    query = f"CREATE MODEL p1.{name} FROM demo (SELECT * FROM iris) PREDICT species"
    body = assert_problem(create(p1, query), 409, name, "reserved")
    assert body["title"] == "Name reserved"
    answer = p1.post("/api/sql/query", json={"query": query}).get_json()
    assert answer["type"] == "error" and answer["error_code"] == ErrorCode.CONFLICT, answer
    assert name in answer["error_message"]
    assert p1.get("/api/projects/p1/models").get_json() == []


def test_using_errors_name_each_field_on_rest_and_sql(p1):
    # One schema checks USING for both paths: the same fields, the same messages.
    query = ("CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species USING "
             "validation_fraction = '0.3', max_rows = 2.5, Colour = 'red', engine = SkLearn")
    body = assert_problem(create(p1, query), 422, "using")
    assert body["errors"] == {
        "validation_fraction": ["Must be a number from 0.05 to 0.5."],
        "max_rows": ["Must be a positive integer."],
        "colour": ["Unknown key; accepted keys: engine, join_learn_process, problem, "
                   "validation_fraction, max_rows, time_budget_s, active."]}
    answer = p1.post("/api/sql/query", json={"query": query}).get_json()
    assert answer["error_code"] == ErrorCode.INVALID_STATEMENT, answer
    for field, messages in body["errors"].items():
        assert f"{field}: {messages[0]}" in answer["error_message"]
    assert p1.get("/api/projects/p1/models").get_json() == []


def test_using_values_may_be_bare_words(p1):
    # USING engine = sklearn (no quotes): the parser's identifier reaches the service as text.
    response = create(p1, "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) PREDICT species "
                          "USING engine = LightWood, problem = classification, "
                          "join_learn_process = true, time_budget_s = 1")
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["training_options"]["using"] == {
        "engine": "lightwood", "problem": "classification", "join_learn_process": True,
        "time_budget_s": 1}
