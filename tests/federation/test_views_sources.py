"""Views over PostgreSQL, MariaDB, SQLite and uploaded files: the statement is checked when
the view is created or changed (a write, a missing table or column, in any source, a view
that does not exist), without reading a row, and nothing is stored when it is refused."""

from __future__ import annotations

import pytest

from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD, make_auth_app  # noqa: F401 - a fixture

from .test_files_join import uploaded  # noqa: F401 - a fixture


@pytest.fixture
def views(fed_app):
    """The views a test makes in project mindsdb, dropped after it."""
    made: list[str] = []
    yield made
    client = fed_app.test_client()
    for name in made:
        client.post("/api/sql/query", json={"query": f"DROP VIEW IF EXISTS mindsdb.{name}"})


REFUSED = [
    ("SELECT * FROM pg.nope", "nope"),
    ("SELECT * FROM maria.nope", "nope"),
    ("SELECT * FROM lite.nope", "nope"),
    ("SELECT * FROM files.nope", "nope"),
    ("SELECT * FROM mindsdb.nope", "nope"),
    ("SELECT nosuch FROM pg.orders", "nosuch"),
    ("SELECT nosuch FROM maria.customers", "nosuch"),
    ("SELECT nosuch FROM lite.targets", "nosuch"),
    ("SELECT nosuch FROM files.fcustomers", "nosuch"),
    ("SELECT o.id, c.nosuch FROM pg.orders o JOIN maria.customers c ON c.id = o.customer_id",
     "nosuch"),
    ("SELECT f.id FROM files.fcustomers f JOIN pg.nope n ON n.id = f.id", "nope"),
    ("SELECT c.id, c2.id FROM maria.customers c JOIN maria.customers c2 ON c2.id = c.id",
     "Duplicate column"),
    ("DELETE FROM pg.orders", "DELETE"),
    ("INSERT INTO lite.targets VALUES ('XX', 1, 1.0)", "INSERT"),
    ("UPDATE maria.customers SET score = 1", "UPDATE"),
    ("SELECT * FROM nosource.t", "nosource"),
]


@pytest.mark.parametrize(("query", "named"), REFUSED)
def test_a_view_that_cannot_be_read_is_refused_when_created(uploaded, fquery, fed_app,  # noqa: F811
                                                            views, query, named):
    body = fquery(f"CREATE VIEW mindsdb.bad AS ({query})")
    assert body["type"] == "error" and named in body["error_message"], body
    client = fed_app.test_client()
    refused = client.post("/api/projects/mindsdb/views",
                          json={"view": {"name": "bad", "query": query}})
    assert refused.status_code == 422 and named in refused.get_json()["detail"], \
        refused.get_json()
    assert client.get("/api/projects/mindsdb/views/bad").status_code == 404
    # Changing a good view to it is refused too, and leaves the view as it was.
    views.append("good")
    assert fquery("CREATE VIEW mindsdb.good AS (SELECT 1 AS x)")["type"] == "ok"
    body = fquery(f"ALTER VIEW mindsdb.good AS ({query})")
    assert body["type"] == "error" and named in body["error_message"], body
    changed = client.put("/api/projects/mindsdb/views/good", json={"view": {"query": query}})
    assert changed.status_code == 422, changed.get_json()
    assert fquery("SELECT x FROM mindsdb.good")["data"] == [[1]]


def test_the_from_form_is_checked_in_its_data_source(fquery, views):
    body = fquery("CREATE VIEW mindsdb.bad FROM maria (SELECT nosuch FROM customers)")
    assert body["type"] == "error" and "nosuch" in body["error_message"], body
    body = fquery("CREATE VIEW mindsdb.bad FROM pg (SELECT * FROM customers)")
    assert body["type"] == "error" and "customers" in body["error_message"], body
    views.append("fr")
    assert fquery("CREATE VIEW mindsdb.fr FROM maria (SELECT id, name FROM customers "
                  "WHERE country = 'FR')")["type"] == "ok"
    assert fquery("SELECT name FROM mindsdb.fr ORDER BY id")["data"] == [["Ada"], ["Chloé"]]


def test_views_over_several_sources_files_and_views(uploaded, fquery, views):  # noqa: F811
    views.extend(["spend", "top"])
    body = fquery("CREATE VIEW mindsdb.spend AS (SELECT f.country, sum(o.amount) AS total "
                  "FROM pg.orders o JOIN files.fcustomers f ON f.id = o.customer_id "
                  "GROUP BY f.country)")
    assert body["type"] == "ok", body
    body = fquery("CREATE VIEW mindsdb.top AS (SELECT s.country, s.total, t.goal "
                  "FROM mindsdb.spend s JOIN lite.targets t ON t.country = s.country)")
    assert body["type"] == "ok", body
    read = fquery("SELECT country, goal FROM mindsdb.top ORDER BY country")
    assert read["data"] == [["BE", 250], ["FR", 500], ["SE", 100]], read
    # A view of the view may not be made to name a column it lacks.
    body = fquery("ALTER VIEW mindsdb.top AS (SELECT s.nosuch FROM mindsdb.spend s)")
    assert body["type"] == "error" and "nosuch" in body["error_message"], body


ORDERS_VIEW = ("CREATE VIEW mindsdb.vorders AS (SELECT o.qty, o.rate, c.score, o.amount "
               "FROM pg.orders o JOIN maria.customers c ON c.id = o.customer_id)")


def test_a_model_trains_from_a_view_and_joins_it(fquery, views):
    views.extend(["vorders", "vtargets"])
    assert fquery(ORDERS_VIEW)["type"] == "ok"
    rows = fquery("SELECT count(*) FROM mindsdb.vorders")["data"][0][0]
    # What mindsdb_sdk sends for models.create(query=project.views.get(…)) with and without
    # its database, and the MindsDB form FROM <project> (SELECT * FROM <view>).
    for name, statement in [
            ("vm1", "CREATE MODEL mindsdb.vm1 FROM mindsdb (SELECT * FROM vorders) "
                    "PREDICT amount USING join_learn_process = true, "
                    "time_budget_s = 1"),
            ("vm2", "CREATE MODEL mindsdb.vm2 FROM (SELECT * FROM mindsdb.vorders) "
                    "PREDICT amount USING join_learn_process = true, "
                    "time_budget_s = 1")]:
        body = fquery(statement)
        assert body["type"] == "table", body
        status = fquery(f"SELECT status, error FROM mindsdb.models WHERE name = '{name}'")
        assert status["data"] == [["complete", None]], status
    try:
        joined = fquery("SELECT t.qty, m.amount FROM mindsdb.vorders AS t "
                        "JOIN mindsdb.vm1 AS m WHERE t.qty > 10000000005")
        assert joined["type"] == "table", joined
        assert len(joined["data"]) == fquery(
            "SELECT count(*) FROM mindsdb.vorders WHERE qty > 10000000005")["data"][0][0] > 0
        assert all(isinstance(amount, float | int) for _, amount in joined["data"])
        limited = fquery("SELECT t.score, m.amount FROM (SELECT * FROM mindsdb.vorders "
                         "WHERE score IS NOT NULL) AS t JOIN mindsdb.vm2 AS m LIMIT 3")
        assert limited["type"] == "table" and len(limited["data"]) == 3, limited
        assert rows > 3
        # A view of one SQLite data source trains too (its data source: lite).
        assert fquery("CREATE VIEW mindsdb.vtargets AS (SELECT t.goal, u.ratio, t.country "
                      "FROM lite.targets t CROSS JOIN lite.targets u)")["type"] == "ok"
        body = fquery("CREATE MODEL mindsdb.vm3 FROM mindsdb (SELECT * FROM vtargets) "
                      "PREDICT goal USING join_learn_process = true, "
                      "time_budget_s = 1")
        assert body["type"] == "table", body
        source = fquery("SELECT status FROM mindsdb.models WHERE name = 'vm3'")
        assert source["data"] == [["complete"]], source
        predicted = fquery("SELECT m.goal FROM mindsdb.vtargets t JOIN mindsdb.vm3 m")
        assert len(predicted["data"]) == 16, predicted
    finally:
        for name in ("vm1", "vm2", "vm3"):
            fquery(f"DROP MODEL IF EXISTS mindsdb.{name}")


def test_a_training_query_over_a_view_is_checked_before_anything_is_recorded(fquery, views):
    views.append("vorders")
    assert fquery(ORDERS_VIEW)["type"] == "ok"
    body = fquery("CREATE MODEL mindsdb.vbad FROM mindsdb (SELECT * FROM vorders) "
                  "PREDICT nosuch")
    assert body["type"] == "error" and "nosuch" in body["error_message"], body
    body = fquery("CREATE MODEL mindsdb.vbad FROM mindsdb (SELECT * FROM nope) PREDICT x")
    assert body["type"] == "error", body
    assert fquery("SELECT name FROM mindsdb.models WHERE name = 'vbad'")["data"] == []


def test_rights_hold_through_views_joins_and_training(make_auth_app, fed_sources):  # noqa: F811
    app = make_auth_app(DATA_SOURCES=fed_sources, SQL_TIMEOUT_S=10.0)
    client = app.test_client()
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        tokens = {n: auth_service.create_token(n, "t")[1] for n in ("root", "alice")}

    def sql(who: str, query: str) -> dict:
        response = client.post("/api/sql/query", json={"query": query},
                               headers={"Authorization": f"Bearer {tokens[who]}"})
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    assert sql("alice", "CREATE PROJECT pa")["type"] == "ok"
    assert sql("root", "GRANT query ON DATABASE pg TO alice")["type"] == "ok"
    assert sql("root", ORDERS_VIEW.replace("mindsdb.", "pa."))["type"] == "ok"
    body = sql("root", "CREATE MODEL pa.vm FROM pa (SELECT * FROM vorders) PREDICT amount "
                       "USING join_learn_process = true, "
                       "time_budget_s = 1")
    assert body["type"] == "table", body
    joined = sql("root", "SELECT t.qty, m.amount FROM pa.vorders t JOIN pa.vm m")
    assert joined["type"] == "table" and len(joined["data"]) > 3, joined
    # alice owns the project and may read pg, not maria: the view reads nothing for her,
    # through a SELECT, a JOIN with the model, a view of it, or training.
    for statement in ["SELECT * FROM pa.vorders",
                      "SELECT t.qty, m.amount FROM pa.vorders t JOIN pa.vm m",
                      "SELECT m.amount FROM (SELECT * FROM pa.vorders) t JOIN pa.vm m",
                      "CREATE VIEW pa.mine AS (SELECT qty FROM pa.vorders)",
                      "CREATE MODEL pa.m2 FROM pa (SELECT * FROM vorders) PREDICT amount",
                      "CREATE MODEL pa.m2 FROM (SELECT * FROM pa.vorders) PREDICT amount",
                      "RETRAIN pa.vm"]:
        answer = sql("alice", statement)
        assert answer["type"] == "error" and "maria" in answer["error_message"], \
            (statement, answer)
        assert "Ada" not in str(answer)
    assert [n for n, _ in sql("alice", "SHOW VIEWS FROM pa")["data"]] == ["vorders"]
    assert sql("alice", "SELECT name FROM pa.models")["data"] == [["vm"]]
    # A view of what she may read works for her, and trains.
    assert sql("alice", "CREATE VIEW pa.mine AS (SELECT qty, rate, amount FROM pg.orders)"
               )["type"] == "ok"
    assert sql("alice", "SELECT count(*) FROM pa.mine")["data"] == [[60]]
    body = sql("alice", "CREATE MODEL pa.m3 FROM pa (SELECT * FROM mine) PREDICT amount "
                        "USING join_learn_process = true, "
                        "time_budget_s = 1")
    assert body["type"] == "table", body
    # Creating or changing a view needs the right to change its project.
    assert sql("root", "CREATE PROJECT rootp")["type"] == "ok"
    assert sql("alice", "CREATE VIEW rootp.v AS (SELECT qty FROM pg.orders)")["type"] == "error"
    assert sql("root", "SHOW VIEWS FROM rootp")["data"] == []
