"""CREATE VIEW v FROM src (SELECT …): the bracketed statement is src's own, as in MindsDB
(its dialect, its names: ``schema.table`` is a table of src's schema, not a data source),
still checked when the view is made (read-only, columns read with LIMIT 0, rights)."""

from __future__ import annotations

import pytest

from .conftest import CUSTOMERS, ORDERS, SPLIT_DB, _pg
from .test_views_sources import views  # noqa: F401 - a fixture


@pytest.fixture(scope="module")
def sales_schema(fed_sources):
    """A table in a PostgreSQL schema other than public."""
    with _pg(SPLIT_DB) as conn:
        conn.execute("DROP SCHEMA IF EXISTS sales CASCADE")
        conn.execute("CREATE SCHEMA sales")
        conn.execute("CREATE TABLE sales.deals (id integer, orders_id integer, label text)")
        conn.execute("INSERT INTO sales.deals VALUES (1, 2, 'big'), (2, 3, 'small')")
    yield
    with _pg(SPLIT_DB) as conn:
        conn.execute("DROP SCHEMA IF EXISTS sales CASCADE")


def test_a_postgresql_view_reads_a_table_of_another_schema(sales_schema, fquery,
                                                             views):  # noqa: F811
    views.append("deals")
    body = fquery("CREATE VIEW mindsdb.deals FROM pg (SELECT d.label, o.amount::text AS amount "
                  "FROM sales.deals d JOIN public.orders o ON o.id = d.orders_id)")
    assert body["type"] == "ok", body
    body = fquery("SELECT label, amount FROM mindsdb.deals ORDER BY label")
    amounts = {i: a for i, _, a, *_ in ORDERS}
    assert body["data"] == [["big", amounts[2]], ["small", amounts[3]]], body
    # Joined with another source, and described as the console does (LIMIT 0).
    body = fquery("SELECT v.label, c.name FROM mindsdb.deals v JOIN maria.customers c "
                  "ON c.id = 1 ORDER BY v.label")
    assert body["data"] == [["big", "Ada"], ["small", "Ada"]], body
    assert fquery("SELECT * FROM mindsdb.deals LIMIT 0")["column_names"] == ["label", "amount"]


def test_a_mariadb_view_speaks_mariadb(fquery, views):  # noqa: F811
    views.append("names")
    body = fquery(f"CREATE VIEW mindsdb.names FROM maria (SELECT `id`, `name` FROM "
                  f"`{SPLIT_DB}`.customers WHERE country = \"FR\" ORDER BY `id`)")
    assert body["type"] == "ok", body
    body = fquery("SELECT * FROM mindsdb.names")
    assert body["data"] == [[i, n] for i, n, c, *_ in CUSTOMERS if c == "FR"], body
    # A view made without FROM reads as the same statement written directly does.
    views.append("names2")
    body = fquery('CREATE VIEW mindsdb.names2 AS (SELECT id, name FROM maria.customers '
                  'WHERE country = "FR")')
    assert body["type"] == "ok", body
    direct = fquery('SELECT id, name FROM maria.customers WHERE country = "FR" ORDER BY id')
    assert fquery("SELECT * FROM mindsdb.names2 ORDER BY id")["data"] == direct["data"]


@pytest.mark.parametrize(("query", "named"), [
    ("SELECT * FROM sales.nosuch", "nosuch"),     # a schema of pg, not a data source
    ("SELECT nosuch FROM sales.deals", "nosuch"),
    ("DELETE FROM sales.deals", "DELETE"),
    ("SELECT pg_read_file('/etc/passwd') FROM sales.deals", "pg_read_file"),
])
def test_a_native_view_is_still_checked_when_made(sales_schema, fquery, fed_app, query,
                                                  named):
    body = fquery(f"CREATE VIEW mindsdb.bad FROM pg ({query})")
    assert body["type"] == "error" and named in body["error_message"], body
    assert fed_app.test_client().get("/api/projects/mindsdb/views/bad").status_code == 404
