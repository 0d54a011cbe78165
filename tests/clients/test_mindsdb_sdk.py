"""The official Python client, mindsdb_sdk 3.4.10, unchanged, against a live Quarry (gunicorn)."""

from __future__ import annotations

import pandas as pd
import pytest
import requests

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")
from mindsdb_sdk.skills import Skill  # noqa: E402

from tests.live import migrated_sqlite_env, serving  # noqa: E402

SETOSA = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
VIRGINICA = {"sepal_length": 7.7, "sepal_width": 3.0, "petal_length": 6.1, "petal_width": 2.3}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory, session_dir, sqlite_template):
    """Quarry under gunicorn on a free port, with a migrated temporary SQLite store."""
    tmp = tmp_path_factory.mktemp("sdk")
    env = migrated_sqlite_env(tmp, sqlite_template, QUARRY_DEMO_PATH=f"{session_dir}/demo.db")
    with serving(env, tmp) as server:
        yield server.url


def test_projects_and_data_sources(url):
    server = mindsdb_sdk.connect(url)
    assert [p.name for p in server.projects.list()] == ["mindsdb"]
    project = server.projects.create("sdk_p1")
    assert project.name == "sdk_p1"
    assert [p.name for p in server.list_projects()] == ["mindsdb", "sdk_p1"]
    assert server.projects.get("sdk_p1").name == "sdk_p1"
    with pytest.raises(AttributeError):
        server.projects.get("nope")
    assert [(d.name, d.engine) for d in server.list_databases()] == [("demo", "sqlite"),
                                                                     ("files", "files")]

    frame = project.query("SELECT * FROM demo.iris LIMIT 3").fetch()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    assert list(frame.columns) == ["sepal_length", "sepal_width", "petal_length",
                                   "petal_width", "species"]
    assert list(frame.species) == ["setosa"] * 3
    assert len(server.databases.get("demo").query("SELECT * FROM wine").fetch()) == 178

    server.projects.drop("sdk_p1")
    assert [p.name for p in server.projects.list()] == ["mindsdb"]
    with pytest.raises(RuntimeError, match="nope"):
        server.projects.drop("nope")


def test_skills_and_agents(url):
    project = mindsdb_sdk.connect(url).projects.create("sdk_p2")
    skills = project.skills
    created = skills.create("s1", "sql", {"database": "demo", "tables": ["iris"],
                                          "description": "flowers"})
    assert created.name == "s1"
    skills.create("s2", "retrieval", {"source": "kb", "description": "docs"})
    assert [(s.name, s.type) for s in skills.list()] == [("s1", "sql"), ("s2", "retrieval")]
    s1 = skills.get("s1")
    assert s1.params == {"database": "demo", "tables": ["iris"], "description": "flowers"}
    updated = skills.update("s1", Skill("s1", "sql", {"database": "demo",
                                                       "tables": ["iris", "wine"]}))
    # params merge key by key (API.md): the description stays.
    assert updated.params == {"database": "demo", "tables": ["iris", "wine"],
                              "description": "flowers"}
    assert skills.get("s1").params["tables"] == ["iris", "wine"]

    agents = project.agents
    agent = agents.create("a1", model="gpt-4o", provider="openai", skills=["s1"],
                          params={"temperature": 0.2, "openai_api_key": "sk-never-shown"})
    assert agent.name == "a1" and agent.model == "gpt-4o"
    assert [s.name for s in agent.skills] == ["s1"]
    assert agent.params == {"temperature": 0.2, "openai_api_key": "********"}
    assert [a.name for a in agents.list()] == ["a1"]
    fetched = agents.get("a1")
    assert fetched.provider == "openai" and [s.name for s in fetched.skills] == ["s1"]
    fetched.skills = ["s2"]
    fetched.prompt_template = "Answer {{question}}"
    fetched.params = {"temperature": 0.5}
    changed = agents.update("a1", fetched)
    assert [s.name for s in changed.skills] == ["s2"]
    assert changed.prompt_template == "Answer {{question}}"
    # The masked secret sent back by the client kept its stored value.
    assert changed.params == {"temperature": 0.5, "openai_api_key": "********"}

    agents.drop("a1")
    assert agents.list() == []
    skills.drop("s1")
    assert [s.name for s in skills.list()] == ["s2"]
    with pytest.raises(requests.HTTPError):
        skills.get("s1")


def test_models(url):
    project = mindsdb_sdk.connect(url).projects.create("sdk_p3")
    created = project.models.create("iris_m", predict="species", query="SELECT * FROM iris",
                                    database="demo", options={"join_learn_process": True})
    assert created.name == "iris_m" and created.data["status"] == "complete"

    model = project.models.get("iris_m")
    assert model.name == "iris_m" and model.data["status"] == "complete"
    assert model.data["predict"] == "species" and model.data["accuracy"] >= 0.9
    assert model.get_status() == "complete"
    assert [m.name for m in project.models.list()] == ["iris_m"]
    with pytest.raises(AttributeError):
        project.models.get("nope")

    info = model.describe()
    assert info.loc[0, "NAME"] == "iris_m" and list(info.loc[0, "TABLES"]) == [
        "info", "features", "model"]
    features = model.describe("features")
    assert list(features.column) == ["sepal_length", "sepal_width", "petal_length",
                                     "petal_width", "species"]
    assert list(features.role) == ["feature"] * 4 + ["target"]
    assert model.describe("info").loc[0, "outputs"] == ["species"]

    predicted = model.predict(pd.DataFrame([SETOSA, VIRGINICA]))
    assert list(predicted.species) == ["setosa", "virginica"]
    assert (predicted.species_confidence > 0.5).all()
    # A deferred query: the client sends a JOIN with the model over a native query.
    joined = model.predict(project.server.databases.get("demo").query(
        "SELECT * FROM iris WHERE petal_length > 6"))
    assert len(joined) > 0 and set(joined.species) == {"virginica"}
    # Views as the client makes them: the demo source's own SQL (SQLite's schema main), and
    # one that JOINs the model (a prediction view).
    native = project.views.create("iris_main", "SELECT * FROM main.iris WHERE "
                                               "petal_length > 6", database="demo")
    assert len(native.fetch()) == len(joined)
    project.views.create("iris_pred", "SELECT t.petal_length, m.species FROM demo.iris t "
                                      "JOIN sdk_p3.iris_m m")
    predicted_view = project.query("SELECT * FROM iris_pred WHERE petal_length > 6").fetch()
    assert len(predicted_view) == len(joined) and set(predicted_view.species) == {"virginica"}
    project.views.drop("iris_main")
    project.views.drop("iris_pred")

    # A query string with qualified tables and no database: FROM (SELECT …) in the statement.
    bare = project.models.create("bare_m", predict="species",
                                 query="SELECT * FROM demo.iris WHERE 1 = 0")
    assert bare.name == "bare_m"
    record = requests.get(f"{url}/api/projects/sdk_p3/models/bare_m", timeout=10).json()
    assert record["data_source"] == "demo"
    project.models.drop("bare_m")

    # A PREDICT column the query does not return, or a query that writes: refused at once,
    # with the query's columns listed, and no model left behind in status error.
    with pytest.raises(RuntimeError, match="'nosuch'.*sepal_length, sepal_width"):
        project.models.create("bad_m", predict="nosuch", query="SELECT * FROM iris",
                              database="demo")
    with pytest.raises(RuntimeError, match="DELETE is refused"):
        project.models.create("bad_m", predict="species", query="DELETE FROM iris",
                              database="demo")
    assert [m.name for m in project.models.list()] == ["iris_m"]

    project.models.drop("iris_m")
    assert project.models.list() == []
    with pytest.raises(RuntimeError, match="iris_m"):
        project.models.drop("iris_m")


def test_text_target_values_and_unknown_inputs(url):
    # issue 26: a 'yes'/'no' target came back as true/false, and a value the model could not
    # read failed the whole prediction.
    project = mindsdb_sdk.connect(url).projects.create("sdk_yes")
    query = ("SELECT sepal_length, petal_length, CASE WHEN species = 'setosa' THEN 'yes' "
             "ELSE 'no' END AS setosa FROM iris")
    model = project.models.create("yes_m", predict="setosa", query=query, database="demo",
                                  options={"join_learn_process": True, "time_budget_s": 2})
    assert model.data["status"] == "complete"
    predicted = model.predict(pd.DataFrame([
        {"sepal_length": 5.1, "petal_length": 1.4},
        {"sepal_length": 7.7, "petal_length": "long"}]))
    assert list(predicted.setosa[:1]) == ["yes"] and predicted.setosa[1] in ("yes", "no")
    assert '"unknown_inputs": {"petal_length"' in predicted.setosa_explain[1]
    joined = model.predict(project.server.databases.get("demo").query(
        "SELECT sepal_length, petal_length FROM iris WHERE petal_length > 6"))
    assert len(joined) > 0 and set(joined.setosa) == {"no"}
    project.models.drop("yes_m")


def test_model_versions(url):
    # MindsDB's documented version script (sdks/python/manage-model-versions), unchanged.
    project = mindsdb_sdk.connect(url).projects.create("sdk_p4")
    model = project.models.create("vm", predict="species", query="SELECT * FROM iris",
                                  database="demo", options={"join_learn_process": True})
    model.retrain(options={"join_learn_process": True})
    model.finetune(query="SELECT * FROM iris WHERE species = 'setosa'", database="demo",
                   options={"join_learn_process": True, "active": False})
    listed = model.list_versions()
    assert [(v.version, v.data["status"], bool(v.data["active"])) for v in listed] == [
        (1, "complete", False), (2, "complete", True), (3, "complete", False)]
    assert all(v.data["accuracy"] > 0.5 for v in listed)

    first = model.get_version(1)
    assert first.version == 1
    assert list(first.predict(pd.DataFrame([SETOSA])).species) == ["setosa"]
    # (mindsdb_sdk 3.4.10 has no describe() of a version: ModelVersion.describe raises.)

    model.set_active(3)
    assert [v.version for v in model.list_versions() if v.data["active"]] == [3]
    with pytest.raises(RuntimeError, match="(?i)active"):
        project.drop_model_version("vm", 3)
    project.drop_model_version("vm", 1)
    assert [v.version for v in model.list_versions()] == [2, 3]
    project.models.drop("vm")
    assert project.models.list() == []


def test_objects_quarry_does_not_have_say_so(url):
    """ML engines, triggers and chatbots: the sdk's own calls raise with Quarry's sentence,
    not "names no data source" or "No such endpoint". (Jobs are served:
    test_mindsdb_sdk_jobs.py.)"""
    server = mindsdb_sdk.connect(url)
    project = server.get_project("mindsdb")
    # Views are served (tests/clients/test_mindsdb_sdk_files.py), knowledge bases too
    # (test_knowledge_bases_end_to_end).
    for call in (server.ml_engines.list,
                 lambda: server.ml_engines.create("e1", "openai", {"api_key": "sk-x"}),
                 lambda: server.ml_engines.drop("e1")):
        with pytest.raises(RuntimeError, match="^ML_ENGINES are not supported by Quarry"):
            call()
    # The sdk has no calls for triggers and chatbots; its query() sends the statements.
    for sql, word in (("SHOW TRIGGERS", "TRIGGERS"), ("SHOW CHATBOTS", "CHATBOTS"),
                      ("CREATE TRIGGER t1 ON demo.iris (SELECT 1)", "TRIGGERS"),
                      ("DROP CHATBOT c1", "CHATBOTS")):
        with pytest.raises(RuntimeError, match=f"^{word} are not supported by Quarry"):
            project.query(sql).fetch()
    # Everything else still works on the same connection.
    assert len(project.query("SELECT * FROM demo.iris LIMIT 2").fetch()) == 2


def test_knowledge_bases_end_to_end(url):
    """knowledge_bases.create/get/list/drop, kb.insert(DataFrame | rows | Query) and
    kb.find(text, limit).fetch(), on the embedded model, through gunicorn."""
    server = mindsdb_sdk.connect(url)
    project = server.get_project("mindsdb")
    kb = project.knowledge_bases.create("sdk_kb", metadata_columns=["team"])
    assert kb.name == "sdk_kb" and kb.metadata_columns == ["team"]
    kb.insert(pd.DataFrame([
        {"id": 1, "content": "The VPN needs a new certificate every year.", "team": "it"},
        {"id": 2, "content": "Holidays are requested in the HR portal.", "team": "hr"}]))
    kb.insert([{"id": 3, "content": "Expense reports are due by the fifth.", "team": "fin"}])
    kb.insert(server.databases.demo.query("SELECT 4 AS id, 'Setosa flowers have short "
                                          "petals.' AS content, 'bio' AS team "
                                          "FROM demo.iris LIMIT 1"))
    found = kb.find("how do I ask for days off", limit=2).fetch()
    assert list(found.columns[:3]) == ["id", "chunk_id", "chunk_content"]
    assert len(found) == 2 and str(found["id"].iloc[0]) == "2"
    assert [k.name for k in project.knowledge_bases.list()] == ["sdk_kb"]
    assert project.knowledge_bases.get("sdk_kb").id_column == "id"
    assert len(project.query("SELECT * FROM sdk_kb").fetch()) == 4
    project.knowledge_bases.drop("sdk_kb")
    assert project.knowledge_bases.list() == []


@pytest.fixture(scope="module")
def ts_url(tmp_path_factory, session_dir, sqlite_template):
    """Quarry under gunicorn with a SQLite data source of two weekly-seasonal daily series."""
    import math
    import sqlite3

    tmp = tmp_path_factory.mktemp("sdk_ts")
    conn = sqlite3.connect(tmp / "ts.db")
    conn.execute("CREATE TABLE visits (site TEXT, day TEXT, n REAL)")
    conn.executemany("INSERT INTO visits VALUES (?, ?, ?)", [
        (site, str(pd.Timestamp("2024-01-01") + pd.Timedelta(days=d))[:10],
         50 + 30 * s + 10 * math.sin(2 * math.pi * d / 7) + (d % 3))
        for s, site in enumerate(("a", "b")) for d in range(70)])
    conn.commit()
    conn.close()
    env = migrated_sqlite_env(tmp, sqlite_template, QUARRY_DEMO_PATH=f"{session_dir}/demo.db",
                              QUARRY_DATA_SOURCES=f'{{"tsdb": "sqlite:///{tmp}/ts.db"}}')
    with serving(env, tmp) as server:
        yield server.url


def test_forecasting_model_with_timeseries_options(ts_url):
    project = mindsdb_sdk.connect(ts_url).projects.create("sdk_ts")
    model = project.models.create(
        "visits_m", predict="n", query="SELECT site, day, n FROM visits", database="tsdb",
        timeseries_options={"order": "day", "group": "site", "window": 14, "horizon": 5},
        options={"join_learn_process": True, "time_budget_s": 10})
    assert model.data["status"] == "complete", model.data
    info = model.describe("info")
    assert info.loc[0, "problem"] == "forecasting"
    accuracies = info.loc[0, "accuracies"]
    assert accuracies["mase"] <= accuracies["seasonal_naive"]["mase"]
    # LATEST per group: the JOIN the client sends, with its WHERE.
    rows = project.query("SELECT m.site, m.day, m.n, m.n_lower, m.n_upper "
                         "FROM tsdb.visits AS t JOIN sdk_ts.visits_m AS m "
                         "WHERE t.day > LATEST AND t.site = 'b'").fetch()
    assert len(rows) == 5 and set(rows.site) == {"b"}
    assert list(rows.day.astype(str).str[:10]) == [
        "2024-03-11", "2024-03-12", "2024-03-13", "2024-03-14", "2024-03-15"]
    assert ((rows.n_lower <= rows.n) & (rows.n <= rows.n_upper)).all()
