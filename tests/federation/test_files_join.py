"""A file joins with PostgreSQL, MariaDB and SQLite tables in one statement (the file is
one more leg of the federated SELECT), with the same answer as one database."""

from __future__ import annotations

import io

import pytest

from .conftest import CUSTOMERS


@pytest.fixture(scope="module")
def uploaded(fed_app):
    client = fed_app.test_client()
    lines = ["id,name,country"] + [f"{i},{n},{c}" for i, n, c, *_ in CUSTOMERS]
    data = ("\n".join(lines) + "\n").encode()
    response = client.put("/api/files/fcustomers", query_string={"overwrite": "true"},
                          data={"file": (io.BytesIO(data), "customers.csv")},
                          content_type="multipart/form-data")
    assert response.status_code == 200, response.get_data(as_text=True)
    yield
    client.delete("/api/files/fcustomers")


def test_a_file_joins_a_postgresql_table(uploaded, fquery):
    joined = fquery("SELECT c.country, count(*) AS n, sum(o.amount) AS total "
                    "FROM pg.orders o JOIN files.fcustomers c ON o.customer_id = c.id "
                    "GROUP BY c.country ORDER BY c.country")
    expected = fquery("SELECT c.country, count(*) AS n, sum(o.amount) AS total "
                      "FROM orders o JOIN customers c ON o.customer_id = c.id "
                      "GROUP BY c.country ORDER BY c.country", db="one")
    assert joined["type"] == "table", joined
    assert joined["data"] == expected["data"] and len(joined["data"]) > 2


def test_a_file_joins_mariadb_and_sqlite(uploaded, fquery):
    body = fquery("SELECT f.name, t.goal FROM files.fcustomers f "
                  "JOIN maria.customers m ON m.id = f.id "
                  "JOIN lite.targets t ON t.country = m.country ORDER BY f.id")
    assert body["data"] == [["Ada", 500], ["Björn", 100], ["Chloé", 500], ["Émile", 250]]


def test_explain_shows_the_file_leg(uploaded, fquery):
    rows = fquery("EXPLAIN SELECT o.id FROM pg.orders o JOIN files.fcustomers c "
                  "ON o.customer_id = c.id")["data"]
    assert [r[1] for r in rows] == ["pg", "files", "duckdb"]
