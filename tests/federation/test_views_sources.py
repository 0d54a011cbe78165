"""Views over PostgreSQL, MariaDB, SQLite and uploaded files: the statement is checked when
the view is created or changed (a write, a missing table or column, in any source, a view
that does not exist), without reading a row, and nothing is stored when it is refused."""

from __future__ import annotations

import pytest

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
