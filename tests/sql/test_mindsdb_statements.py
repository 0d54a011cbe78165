"""MindsDB statements about projects, models, skills and agents, through POST /api/sql/query.

Run on SQLite and PostgreSQL metadata stores; every answer is checked against the REST view
of the same objects, so that SQL and REST cannot drift apart.
"""

from __future__ import annotations

import json

import pytest

from app.sql.errors import ErrorCode
from tests.conftest import STORES, fresh_store_url

MODEL_COLUMNS = ["NAME", "ENGINE", "PROJECT", "ACTIVE", "VERSION", "STATUS", "ACCURACY",
                 "PREDICT", "UPDATE_STATUS", "MINDSDB_VERSION", "ERROR", "SELECT_DATA_QUERY",
                 "TRAINING_OPTIONS", "CURRENT_TRAINING_PHASE", "TOTAL_TRAINING_PHASES",
                 "TRAINING_PHASE_NAME", "TAG", "CREATED_AT", "TRAINING_TIME"]
RECORD_COLUMNS = MODEL_COLUMNS[:13] + ["TAG"]
SETOSA = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}


@pytest.fixture(params=STORES)
def store_url(request, tmp_path) -> str:
    """Both metadata stores (tests/sql/conftest.py narrows the data-path tests to one)."""
    return fresh_store_url(request, tmp_path)


def sql(client, query: str, db: str | None = None) -> dict:
    body = {"query": query}
    if db is not None:
        body["context"] = {"db": db}
    response = client.post("/api/sql/query", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def table(client, query: str, db: str | None = None, *, data_path: bool = False
          ) -> tuple[list[str], list[list]]:
    answer = sql(client, query, db)
    assert answer["type"] == "table", answer
    if not data_path:  # the data path answers with the data source it ran on
        assert answer["context"]["db"] == (db or "mindsdb")
    return answer["column_names"], answer["data"]


def ok(client, query: str, db: str | None = None) -> None:
    answer = sql(client, query, db)
    assert answer.pop("query_id")
    assert answer == {"type": "ok", "column_names": [], "context": {"db": db or "mindsdb"}}


def error(client, query: str, code: ErrorCode, *words: str, db: str | None = None) -> str:
    answer = sql(client, query, db)
    assert answer["type"] == "error", answer
    assert answer["error_code"] == code, answer
    for word in words:
        assert word in answer["error_message"], (word, answer)
    return answer["error_message"]


def rest_project_names(client) -> list[str]:
    return [p["name"] for p in client.get("/api/projects").get_json()]


# --- projects and databases ---------------------------------------------------------------

def test_project_statements_match_rest(client):
    ok(client, "CREATE PROJECT p1")
    error(client, "CREATE PROJECT p1", ErrorCode.CONFLICT, "Project already exists: p1")
    error(client, "CREATE PROJECT P1", ErrorCode.CONFLICT, "P1")  # names are case-blind
    ok(client, "CREATE PROJECT IF NOT EXISTS p1")
    ok(client, "CREATE DATABASE p2")                          # MindsDB: a project
    ok(client, "CREATE DATABASE p3 WITH ENGINE = 'mindsdb'")  # what mindsdb_sdk sends
    error(client, "CREATE PROJECT 9lives", ErrorCode.INVALID_STATEMENT, "9lives")
    # With an engine it is a data source (tests/databases): checked like POST /api/databases.
    error(client, "CREATE DATABASE pg WITH ENGINE = 'postgres', "
                  "PARAMETERS = {\"host\": \"x\"}", ErrorCode.INVALID_STATEMENT, "database",
          "user")
    error(client, "CREATE DATABASE mg WITH ENGINE = 'mongodb'", ErrorCode.INVALID_STATEMENT,
          "mongodb")
    error(client, "CREATE PROJECT demo", ErrorCode.CONFLICT, "demo")
    assert rest_project_names(client) == ["mindsdb", "p1", "p2", "p3"]

    columns, rows = table(client, "SHOW PROJECTS")
    assert columns == ["project"] and rows == [[n] for n in rest_project_names(client)]
    columns, rows = table(client, "SHOW PROJECTS LIKE 'p%'")
    assert rows == [["p1"], ["p2"], ["p3"]]

    ok(client, "DROP PROJECT p2")
    ok(client, "DROP DATABASE p3")
    error(client, "DROP PROJECT nope", ErrorCode.NOT_FOUND, "Project not found: nope")
    ok(client, "DROP PROJECT IF EXISTS nope")
    error(client, "DROP DATABASE demo", ErrorCode.UNSUPPORTED, "demo", "data source")
    error(client, "DROP PROJECT mindsdb", ErrorCode.CONFLICT, "mindsdb")
    assert rest_project_names(client) == ["mindsdb", "p1"]

    # Refused while it holds something, exactly as DELETE /api/projects/p1 is.
    assert client.post("/api/projects/p1/skills", json={"skill": {
        "name": "s1", "type": "retrieval", "params": {"source": "kb"}}}).status_code == 201
    error(client, "DROP PROJECT p1", ErrorCode.CONFLICT, "p1", "s1")
    assert client.delete("/api/projects/p1").status_code == 409
    assert rest_project_names(client) == ["mindsdb", "p1"]


def test_show_databases_and_information_schema(make_app):
    client = make_app(DATA_SOURCES={
        "warehouse": "postgresql://reader:hunter2secret@db.example:5433/sales"}).test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    projects = rest_project_names(client)

    columns, rows = table(client, "SHOW DATABASES")
    assert columns == ["Database"]
    assert rows == [["information_schema"], *[[p] for p in projects], ["demo"], ["files"],
                    ["warehouse"]]
    assert table(client, "SHOW SCHEMAS") == (columns, rows)  # MindsDB's SHOW DATABASES
    assert table(client, "SHOW SCHEMAS LIKE 'p%'") == (columns, [["p1"]])
    columns, rows = table(client, "SHOW FULL DATABASES")
    assert columns == ["Database", "TYPE", "ENGINE"]
    assert rows == [["information_schema", "system", None],
                    *[[p, "project", None] for p in projects],
                    ["demo", "data", "sqlite"], ["files", "data", "files"],
                    ["warehouse", "data", "postgresql"]]

    answer = sql(client, "SELECT * FROM information_schema.databases")
    assert "hunter2secret" not in json.dumps(answer)
    assert answer["column_names"] == ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]
    by_name = {r[0]: r for r in answer["data"]}
    assert [r[0] for r in answer["data"]] == ["information_schema", *projects, "demo",
                                              "files", "warehouse"]
    assert json.loads(by_name["warehouse"][3]) == {
        "host": "db.example", "port": 5433, "user": "reader", "password": "********",
        "database": "sales"}
    assert by_name["p1"][1:] == ["project", None, None]

    # What mindsdb_sdk sends for projects.list() and databases.list().
    columns, rows = table(client, "select NAME from information_schema.databases "
                                  "where TYPE='project'")
    assert columns == ["NAME"] and [r[0] for r in rows] == projects
    columns, rows = table(client, "select NAME, ENGINE, CONNECTION_DATA from "
                                  "information_schema.databases where TYPE='data' "
                                  "ORDER BY NAME DESC LIMIT 1")
    assert columns == ["NAME", "ENGINE", "CONNECTION_DATA"] and rows[0][:2] == ["warehouse",
                                                                               "postgresql"]
    columns, rows = table(client, "SELECT d.NAME FROM information_schema.databases AS d "
                                  "WHERE d.TYPE IN ('system', 'data') AND NAME <> 'demo' "
                                  "AND NAME <> 'files'")
    assert rows == [["information_schema"], ["warehouse"]]
    columns, rows = table(client, "SELECT NAME FROM databases WHERE TYPE = 'project'",
                          db="information_schema")
    assert [r[0] for r in rows] == projects
    error(client, "SELECT * FROM information_schema.nope", ErrorCode.UNKNOWN_TABLE, "nope")
    error(client, "SELECT NOPE FROM information_schema.databases", ErrorCode.QUERY_FAILED,
          "NOPE")


# --- skills and agents --------------------------------------------------------------------

def test_skill_and_agent_statements_match_rest(client):
    ok(client, "CREATE PROJECT p1")
    ok(client, "CREATE SKILL p1.sql_skill USING type = 'sql', database = 'demo', "
               "tables = ['iris'], description = 'flowers'")
    ok(client, "CREATE SKILL kb_skill USING type = 'retrieval', source = 'kb', "
               "api_key = 'sk-secret'", db="p1")
    error(client, "CREATE SKILL p1.sql_skill USING type = 'sql', database = 'demo', "
                  "tables = ['iris']", ErrorCode.CONFLICT, "Skill already exists: p1.sql_skill")
    ok(client, "CREATE SKILL IF NOT EXISTS p1.sql_skill USING type = 'sql', "
               "database = 'demo', tables = ['iris']")
    error(client, "CREATE SKILL p1.bad USING type = 'sql', database = 'nowhere', "
                  "tables = ['t']", ErrorCode.INVALID_STATEMENT, "nowhere")
    error(client, "CREATE SKILL nope.s USING type = 'sql', database = 'demo', tables = ['t']",
          ErrorCode.NOT_FOUND, "Project not found: nope")
    # A bare word is a value too (the parser reads it as a name): stored as its text.
    ok(client, "CREATE SKILL p1.bare USING type = retrieval, source = kb, depth = 2")
    assert client.get("/api/projects/p1/skills/bare").get_json()["params"] == {
        "source": "kb", "depth": 2}
    ok(client, "DROP SKILL p1.bare")

    rest = client.get("/api/projects/p1/skills").get_json()
    assert [s["name"] for s in rest] == ["sql_skill", "kb_skill"]
    assert rest[0]["params"] == {"database": "demo", "tables": ["iris"],
                                 "description": "flowers"}
    columns, rows = table(client, "SHOW SKILLS", db="p1")
    assert columns == ["NAME", "PROJECT", "TYPE", "PARAMS"]
    assert rows == [[s["name"], "p1", s["type"], json.dumps(s["params"])] for s in rest]
    assert json.loads(rows[1][3])["api_key"] == "********"
    assert table(client, "SHOW SKILLS FROM p1")[1] == rows
    assert table(client, "SELECT * FROM p1.skills")[1] == rows
    columns, rows = table(client, "SELECT NAME AS skill, TYPE FROM p1.skills "
                                  "WHERE TYPE = 'sql' OR NAME LIKE 'KB%' ORDER BY skill DESC")
    assert columns == ["skill", "TYPE"] and rows == [["sql_skill", "sql"],
                                                      ["kb_skill", "retrieval"]]
    assert table(client, "SELECT NAME FROM p1.skills ORDER BY NAME LIMIT 1 OFFSET 1")[1] \
        == [["sql_skill"]]

    ok(client, "CREATE AGENT p1.helper USING model = 'gpt-4o', provider = 'openai', "
               "skills = ['sql_skill', 'kb_skill'], prompt_template = 'Answer {{question}}', "
               "openai_api_key = 'sk-agent', temperature = 0.1")
    error(client, "CREATE AGENT p1.other USING model = 'gpt-4o', skills = ['missing']",
          ErrorCode.NOT_FOUND, "missing")
    error(client, "CREATE AGENT p1.helper USING model = 'x'", ErrorCode.CONFLICT,
          "Agent already exists: p1.helper")
    agent = client.get("/api/projects/p1/agents/helper").get_json()
    assert agent["model_name"] == "gpt-4o" and agent["provider"] == "openai"
    assert agent["prompt_template"] == "Answer {{question}}"
    assert [s["name"] for s in agent["skills"]] == ["sql_skill", "kb_skill"]
    assert agent["params"] == {"openai_api_key": "********", "temperature": 0.1}

    columns, rows = table(client, "SHOW AGENTS FROM p1")
    assert columns == ["NAME", "PROJECT", "MODEL_NAME", "SKILLS", "PARAMS"]
    assert rows == [["helper", "p1", "gpt-4o", ["sql_skill", "kb_skill"],
                     json.dumps(agent["params"])]]
    assert table(client, "SELECT * FROM agents", db="p1")[1] == rows
    assert table(client, "SELECT NAME FROM information_schema.agents")[1] == [["helper"]]
    assert len(table(client, "SELECT * FROM information_schema.skills")[1]) == 2

    ok(client, "DROP SKILL p1.kb_skill")  # and the agent no longer uses it, as in REST
    assert [s["name"] for s in
            client.get("/api/projects/p1/agents/helper").get_json()["skills"]] == ["sql_skill"]
    error(client, "DROP SKILL p1.kb_skill", ErrorCode.NOT_FOUND, "Skill not found: p1.kb_skill")
    ok(client, "DROP SKILL IF EXISTS p1.kb_skill")
    ok(client, "DROP AGENT helper", db="p1")
    error(client, "DROP AGENT p1.helper", ErrorCode.NOT_FOUND, "Agent not found: p1.helper")
    assert client.get("/api/projects/p1/agents").get_json() == []
    assert table(client, "SHOW AGENTS", db="p1")[1] == []


# --- models -------------------------------------------------------------------------------

def test_model_statements_and_predictions_match_rest(client, make_app):
    ok(client, "CREATE PROJECT p1")
    # A one-second budget: REST and SQL are compared on one model; its quality is not.
    columns, rows = table(client, "CREATE MODEL p1.iris FROM demo (SELECT * FROM iris) "
                                  "PREDICT species USING join_learn_process = true, "
                                  "time_budget_s = 1")
    record = client.get("/api/projects/p1/models/iris").get_json()
    assert columns == RECORD_COLUMNS
    row = dict(zip(columns, rows[0], strict=True))
    assert row["NAME"] == record["name"] == "iris" and row["PROJECT"] == "p1"
    assert row["STATUS"] == record["status"] == "complete"
    assert row["ACCURACY"] == record["accuracy"] and row["PREDICT"] == "species"
    assert row["ENGINE"] == record["engine"] and row["VERSION"] == record["version"]
    assert row["ACTIVE"] is True and row["SELECT_DATA_QUERY"] == record["fetch_data_query"]
    assert json.loads(row["TRAINING_OPTIONS"]) == record["training_options"]
    error(client, "CREATE MODEL p1.iris FROM demo (SELECT * FROM iris) PREDICT species",
          ErrorCode.CONFLICT, "Model already exists: p1.iris")
    error(client, "CREATE MODEL p1.bad FROM nowhere (SELECT 1) PREDICT x",
          ErrorCode.INVALID_STATEMENT, "nowhere")

    # Listing: SHOW MODELS, p.models, information_schema.models, bare names in context.
    columns, rows = table(client, "SHOW MODELS FROM p1")
    assert columns == MODEL_COLUMNS and len(rows) == 1
    listed = dict(zip(columns, rows[0], strict=True))
    assert listed["NAME"] == "iris" and listed["CREATED_AT"] == record["created_at"]
    assert listed["TRAINING_TIME"] == record["training_time"]
    assert table(client, "SELECT * FROM p1.models")[1] == rows
    assert table(client, "SELECT * FROM models", db="p1")[1] == rows
    assert table(client, "SHOW MODELS", db="p1")[1] == rows
    assert table(client, "SHOW MODELS FROM p1 LIKE 'IR%'")[1] == rows
    assert table(client, "SHOW MODELS FROM p1 WHERE STATUS = 'error'")[1] == []
    assert table(client, "SELECT NAME, PROJECT FROM information_schema.models")[1] \
        == [["iris", "p1"]]
    # mindsdb_sdk's models.get(name): a string '1' for a boolean, as MySQL compares.
    assert table(client, "SELECT NAME FROM models WHERE NAME = 'iris' AND ACTIVE = '1'",
                 db="p1")[1] == [["iris"]]
    columns, rows = table(client, "SHOW TABLES FROM p1")
    assert columns == ["Tables_in_p1"] and ["iris"] in rows and ["models"] in rows

    # DESCRIBE in each form, against GET …/describe.
    rest_info = client.get("/api/projects/p1/models/iris/describe").get_json()[0]
    for query, db in (("DESCRIBE p1.iris", None), ("DESCRIBE MODEL p1.iris", None),
                      ("DESCRIBE iris", "p1")):
        columns, rows = table(client, query, db)
        assert columns == ["TABLES", *RECORD_COLUMNS]
        assert rows[0][0] == ["info", "features", "model"] and rows[0][1] == "iris"
    columns, rows = table(client, "DESCRIBE p1.iris.info")
    assert columns[:4] == ["accuracies", "column_importances", "outputs", "inputs"]
    assert dict(zip(columns, rows[0], strict=True)) == rest_info
    for attribute in ("features", "model"):
        rest = client.get(f"/api/projects/p1/models/iris/describe?attribute={attribute}")
        columns, rows = table(client, f"DESCRIBE p1.iris.{attribute}")
        assert [dict(zip(columns, r, strict=True)) for r in rows] == rest.get_json()
    assert table(client, "DESCRIBE iris.features", db="p1")[0][:4] == [
        "column", "type", "encoder", "role"]
    error(client, "DESCRIBE p1.iris.bogus", ErrorCode.INVALID_STATEMENT, "bogus", "features")
    error(client, "DESCRIBE p1.nope", ErrorCode.NOT_FOUND, "Model not found: p1.nope")
    error(client, "DESCRIBE nope.iris", ErrorCode.NOT_FOUND, "Project not found: nope")

    # One prediction from literals, as POST …/predict answers it.
    rest_prediction = client.post("/api/projects/p1/models/iris/predict",
                                  json={"data": [SETOSA]}).get_json()[0]
    where = " AND ".join(f"{k} = {v}" for k, v in SETOSA.items())
    columns, rows = table(client, f"SELECT * FROM p1.iris WHERE {where}")
    assert dict(zip(columns, rows[0], strict=True)) == rest_prediction
    columns, rows = table(client, f"SELECT species, species_confidence AS c, species_explain "
                                  f"FROM iris WHERE {where}", db="p1")
    assert columns == ["species", "c", "species_explain"]
    assert rows == [[rest_prediction["species"], rest_prediction["species_confidence"],
                     rest_prediction["species_explain"]]]
    assert rows[0][0] == "setosa" and json.loads(rows[0][2])["predicted_value"] == "setosa"

    # JOIN: the table read through the data path, predicted in one batch.
    iris = table(client, "SELECT * FROM demo.iris WHERE petal_length > 5", data_path=True)[1]
    batch = client.post("/api/projects/p1/models/iris/predict", json={"data": [
        dict(zip(["sepal_length", "sepal_width", "petal_length", "petal_width", "species"], r,
                 strict=True)) for r in iris]}).get_json()
    columns, rows = table(client, "SELECT t.petal_length, t.species AS truth, m.species, "
                                  "m.species_confidence FROM demo.iris AS t JOIN p1.iris AS m "
                                  "WHERE t.petal_length > 5")
    assert columns == ["petal_length", "truth", "species", "species_confidence"]
    assert rows == [[r["petal_length"], i[4], r["species"], r["species_confidence"]]
                    for r, i in zip(batch, iris, strict=True)]
    assert len(rows) == len(iris) > 10
    columns, rows = table(client, "SELECT t.petal_length, m.species FROM demo.iris AS t "
                                  "JOIN p1.iris AS m WHERE t.petal_length > 5 LIMIT 3")
    assert rows == [[r["petal_length"], r["species"]] for r in batch[:3]]
    # A condition on the prediction is applied after predicting.
    columns, rows = table(client, "SELECT m.species FROM demo.iris AS t JOIN p1.iris AS m "
                                  "WHERE t.petal_length > 5 AND m.species = 'versicolor'")
    assert rows == [["versicolor"]] * sum(r["species"] == "versicolor" for r in batch)
    # What mindsdb_sdk sends for model.predict(query): a native query on the left.
    columns, rows = table(client, "SELECT m.* FROM demo (SELECT * FROM iris WHERE "
                                  "petal_length > 5) AS t JOIN p1.iris AS m")
    assert [dict(zip(columns, r, strict=True)) for r in rows] == batch
    columns, rows = table(client, "SELECT * FROM iris AS t JOIN p1.iris AS m LIMIT 2",
                          db="demo")
    assert columns[:5] == ["sepal_length", "sepal_width", "petal_length", "petal_width",
                           "species"] and columns[5:] == ["species", "species_confidence",
                                                          "species_explain"]
    error(client, "SELECT * FROM demo.nope AS t JOIN p1.iris AS m", ErrorCode.UNKNOWN_TABLE,
          "nope")
    # The data path's row cap holds for the rows read to predict.
    capped = make_app(SQL_MAX_ROWS=10).test_client()
    error(capped, "SELECT m.species FROM demo.iris AS t JOIN p1.iris AS m",
          ErrorCode.TOO_MANY_ROWS, "10")

    error(client, "DROP PROJECT p1", ErrorCode.CONFLICT, "iris")
    ok(client, "DROP MODEL p1.iris")
    assert client.get("/api/projects/p1/models/iris").status_code == 404
    error(client, "DROP MODEL p1.iris", ErrorCode.NOT_FOUND, "Model not found: p1.iris")
    ok(client, "DROP MODEL IF EXISTS p1.iris")
    ok(client, "DROP PROJECT p1")


# --- dispatch -----------------------------------------------------------------------------

def test_data_statements_still_reach_the_data_path(client):
    assert table(client, "SELECT species FROM demo.iris LIMIT 1", data_path=True)[1] \
        == [["setosa"]]
    # mindsdb_sql_parser cannot read SQLite's GLOB: the data source's own dialect answers.
    answer = sql(client, "SELECT count(*) FROM iris WHERE species GLOB 'set*'", db="demo")
    assert answer["type"] == "table" and answer["data"] == [[50]]
    error(client, "INSERT INTO demo.iris (species) VALUES ('x')", ErrorCode.READ_ONLY)
    error(client, "SHOW ML_ENGINES", ErrorCode.UNSUPPORTED, "ML_ENGINES")
    error(client, "SHOW MODELS FROM nope", ErrorCode.NOT_FOUND, "Project not found: nope")
