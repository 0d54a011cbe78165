"""EXPLAIN of a SELECT on one data source answers that source's own plan (read through the
gate and the read-only connection, as the SELECT would run); EXPLAIN ANALYZE, which runs the
statement, is refused."""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode

from .conftest import ORDERS


def test_postgresql_answers_its_own_plan(fquery):
    body = fquery("EXPLAIN SELECT id FROM pg.orders WHERE amount > 10")
    assert body["type"] == "table", body
    assert body["column_names"] == ["QUERY PLAN"]
    plan = "\n".join(row[0] for row in body["data"])
    assert "orders" in plan and "amount > " in plan, plan
    assert "actual time" not in plan  # not run: no ANALYZE
    # Parameters are bound as for the SELECT itself.
    body = fquery("EXPLAIN SELECT id FROM orders WHERE id = :n", db="pg", params={"n": 3})
    assert "orders_pkey" in "\n".join(row[0] for row in body["data"]), body


def test_mariadb_and_sqlite_answer_their_own_plans(fquery):
    body = fquery("EXPLAIN SELECT name FROM customers WHERE id = 2", db="maria")
    assert body["type"] == "table", body
    assert body["column_names"][:3] == ["id", "select_type", "table"]
    assert body["data"][0][2] == "customers"
    body = fquery("EXPLAIN SELECT * FROM lite.targets")
    assert body["column_names"] == ["id", "parent", "notused", "detail"], body
    assert "targets" in body["data"][0][3]


def test_the_select_is_gated_as_if_it_ran(fquery):
    body = fquery("EXPLAIN SELECT pg_read_file('/etc/passwd') FROM pg.orders")
    assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, body
    body = fquery("EXPLAIN SELECT * FROM nosuch.orders")
    assert body["error_code"] == ErrorCode.UNKNOWN_SOURCE, body
    body = fquery("EXPLAIN DELETE FROM pg.orders")
    assert body["error_code"] == ErrorCode.READ_ONLY, body


@pytest.mark.parametrize("sql", [
    "EXPLAIN ANALYZE SELECT id FROM pg.orders",
    "EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM pg.orders",
    "explain /* timed */ analyse SELECT id FROM pg.orders",
    "EXPLAIN ANALYZE SELECT name FROM maria.customers",
    "EXPLAIN ANALYZE SELECT o.id FROM pg.orders o JOIN maria.customers c ON c.id = o.id",
])
def test_explain_analyze_is_refused_naming_why(fquery, sql):
    body = fquery(sql)
    assert body["type"] == "error" and body["error_code"] == ErrorCode.READ_ONLY, body
    assert "EXPLAIN ANALYZE" in body["error_message"] and "runs" in body["error_message"]
    assert fquery("SELECT count(*) FROM pg.orders")["data"] == [[len(ORDERS)]]
