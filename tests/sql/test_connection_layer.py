"""The second read-only layer on its own: statements that skip the parser gate are still
refused by the connection (SQLite authorizer + mode=ro, READ ONLY transactions)."""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode, SqlError
from app.sql.execute import run_statement
from app.sql.sources import current_sources

from .test_readonly_corpus import mysql_fingerprint, pg_fingerprint, sqlite_fingerprint

BYPASS = {
    "pgsuper": ["DELETE FROM items", "INSERT INTO items (id) VALUES (77)",
                "SELECT nextval('items_seq')",
                "WITH d AS (DELETE FROM items RETURNING *) SELECT * FROM d"],
    "maria": ["DELETE FROM items", "INSERT INTO items (id) VALUES (77)",
              "UPDATE items SET name = 'x'"],
    "lite": ["DELETE FROM items", "INSERT INTO items (id) VALUES (77)",
             "ATTACH DATABASE '{folder}/bypass.db' AS x", "PRAGMA query_only = 0",
             "PRAGMA writable_schema = 1", "SELECT load_extension('x')",
             "CREATE TABLE evil (a)"],
}
CASES = [(db, s) for db, statements in BYPASS.items() for s in statements]


@pytest.mark.parametrize(("db", "statement"), CASES)
def test_connection_refuses_writes_without_the_gate(sql_app, lite_source, db, statement):
    fingerprint = {"pgsuper": pg_fingerprint, "maria": mysql_fingerprint,
                   "lite": sqlite_fingerprint}[db]
    before = fingerprint(lite_source)
    with sql_app.app_context():
        source = current_sources().require(db)
        with pytest.raises(SqlError) as caught:
            run_statement(source, statement.format(folder=lite_source["folder"]), None, [],
                          timeout_s=2, max_rows=10)
    assert caught.value.code in (ErrorCode.READ_ONLY, ErrorCode.QUERY_FAILED,
                                 ErrorCode.SYNTAX), caught.value
    assert fingerprint(lite_source) == before
    with sql_app.app_context():
        result = run_statement(current_sources().require(db), "SELECT count(*) FROM items",
                               None, [], timeout_s=2, max_rows=10)
    assert [tuple(r) for r in result.rows] == [(3,)]


def test_pg_write_is_refused_by_the_read_only_transaction(sql_app):
    with sql_app.app_context(), pytest.raises(SqlError) as caught:
        run_statement(current_sources().require("pgsuper"), "SELECT nextval('items_seq')", None, [],
                      timeout_s=2, max_rows=10)
    assert caught.value.code == ErrorCode.READ_ONLY
    assert "read-only transaction" in caught.value.message
