"""Small answers MindsDB's clients expect: a constant's column name, and the error of a
JOIN with a model that does not exist."""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode


@pytest.mark.parametrize(("sql", "columns", "row"), [
    ("SELECT 'a'", ["a"], ["a"]),
    ('SELECT "a"', ["a"], ["a"]),
    ("SELECT 'a', \"b\", 1", ["a", "b", "1"], ["a", "b", 1]),
    ("SELECT 'x y' AS named", ["named"], ["x y"]),
    ("SELECT 'a' UNION ALL SELECT 'b'", ["a"], ["a"]),
])
def test_a_constant_string_names_its_column_as_in_mindsdb(query, sql, columns, row):
    body = query(sql)
    assert body["type"] == "table", body
    assert body["column_names"] == columns and body["data"][0] == row, body


@pytest.mark.parametrize("sql", [
    "SELECT t.id, m.x FROM lite.items AS t JOIN mindsdb.nosuch AS m",
    "SELECT m.x FROM mindsdb.nosuch AS m JOIN lite.items AS t",
    "SELECT t.id, m.x FROM (SELECT id FROM lite.items) AS t JOIN mindsdb.nosuch.2 AS m",
])
def test_a_join_with_a_model_that_does_not_exist_names_it(query, sql):
    body = query(sql)
    assert body["type"] == "error" and body["error_code"] == ErrorCode.NOT_FOUND, body
    assert "Model 'nosuch" in body["error_message"], body
    assert "does not exist in project 'mindsdb'" in body["error_message"], body


def test_a_join_with_a_view_is_still_data(query):
    assert query("CREATE VIEW mindsdb.some_items AS (SELECT id, name FROM lite.items)"
                 )["type"] == "ok"
    try:
        body = query("SELECT t.id, v.name FROM lite.items AS t JOIN mindsdb.some_items AS v "
                     "ON v.id = t.id ORDER BY t.id")
        assert body["data"] == [[1, "apple"], [2, "pear"], [3, "fig"]], body
    finally:
        query("DROP VIEW mindsdb.some_items")
