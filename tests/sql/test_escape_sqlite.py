"""Escape attempts on SQLite: the file source (``lite``) and the in-memory source that runs
table-less SELECTs (no context). Each attempt must be refused, and afterwards the source
file must be byte for byte the same, its folder (and the working directory) must hold no new
file, and the pooled connection must behave as before.
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from app.sql.errors import ErrorCode, SqlError
from app.sql.execute import run_statement
from app.sql.functions.sqlite import SQLITE_FUNCTIONS
from app.sql.sources import current_sources, open_sqlite_readonly

from .conftest import PID, file_digest

STRAY = f"quarry_evil_{PID}.db"  # a relative path: would land in the working directory
TARGETS = {"file": "lite", "memory": None}

# {folder}: the source file's folder; {stray}: STRAY (a placeholder, so that the test ids
# are the same in every process: pytest-xdist's workers must collect the same tests).
ATTEMPTS = [
    # Other database files
    "ATTACH DATABASE '{folder}/evil.db' AS evil",
    "ATTACH '{folder}/evil2.db' AS e",
    "ATTACH 'file:{folder}/evil3.db?mode=rwc' AS e",
    "ATTACH 'file:{folder}/lite.db?mode=rw' AS rw",
    "ATTACH '{stray}' AS e",
    "ATTACH ':memory:' AS m",
    "ATTACH '{folder}/evil4.db' AS e; CREATE TABLE e.t (a)",
    "DETACH DATABASE main",
    "VACUUM",
    "VACUUM INTO '{folder}/copy.db'",
    "VACUUM main INTO '{folder}/copy2.db'",
    "VACUUM INTO '{stray}'",
    # Settings of the connection or the file
    "PRAGMA query_only = 0",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = WAL",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA user_version = 5",
    "PRAGMA application_id = 7",
    "PRAGMA schema_version = 99",
    "PRAGMA main.locking_mode = EXCLUSIVE",
    "PRAGMA wal_checkpoint(TRUNCATE)",
    "PRAGMA incremental_vacuum",
    "PRAGMA optimize",
    "PRAGMA case_sensitive_like = 1",
    "PRAGMA trusted_schema = 1",
    "PRAGMA temp_store_directory = '{folder}'",
    # Functions with effects, by every road to a call
    "SELECT load_extension('evil')",
    "SELECT load_extension('{folder}/evil.so', 'sqlite3_evil_init')",
    "SELECT LOAD_EXTENSION('evil')",
    "SELECT \"load_extension\"('evil')",
    "SELECT * FROM items, load_extension('evil')",
    "SELECT * FROM items WHERE id = 1 AND load_extension('evil') IS NULL",
    "SELECT (SELECT load_extension('evil'))",
    "WITH x AS (SELECT load_extension('evil') AS a) SELECT * FROM x",
    "SELECT id FROM items UNION ALL SELECT load_extension('evil')",
    "SELECT max(id) OVER (), load_extension('evil') FROM items",
    "SELECT coalesce(NULL, load_extension('evil'))",
    "SELECT CAST(load_extension('evil') AS TEXT)",
    "SELECT main.load_extension('evil')",
    "SELECT writefile('{folder}/evil.txt', 'x')",
    "SELECT readfile('/etc/hostname')",
    "SELECT quote(readfile('/etc/passwd'))",
    "SELECT edit('x', 'vi')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT fts3_tokenizer('evil', x'0000000000000000')",
    "SELECT sqlite_log(1, 'evil')",
    "SELECT optimize('evil')",
    "SELECT fts5('evil')",
    "SELECT * FROM sqlite_dbpage",
    "SELECT * FROM json_each('[1, 2]')",
    "SELECT * FROM main.json_each('[1, 2]')",
    "SELECT * FROM main.abs(1)",
    # Writes and schema changes
    "INSERT INTO items (id, name) VALUES (99, 'x')",
    "INSERT OR REPLACE INTO items (id, name) VALUES (1, 'x')",
    "REPLACE INTO items (id) VALUES (1)",
    "INSERT INTO items (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET name = 'x'",
    "UPDATE items SET name = 'x'",
    "UPDATE items SET name = 'x' WHERE id IN (SELECT id FROM items)",
    "DELETE FROM items",
    "DELETE FROM main.items",
    "WITH d AS (SELECT 1) DELETE FROM items",
    "WITH RECURSIVE r(n) AS (SELECT 1) INSERT INTO items (id) SELECT n + 100 FROM r",
    "DROP TABLE items",
    "DROP TABLE IF EXISTS big",
    "CREATE TABLE evil (a)",
    "CREATE TABLE temp.evil (a)",
    "CREATE TEMP TABLE evil AS SELECT 1 AS a",
    "CREATE TEMP VIEW evil AS SELECT 1 AS a",
    "CREATE VIEW evil AS SELECT 1 AS a",
    "CREATE INDEX evil_ix ON items (name)",
    "CREATE TRIGGER evil AFTER INSERT ON items BEGIN DELETE FROM items; END",
    "CREATE VIRTUAL TABLE evil USING fts5(a)",
    "ALTER TABLE items RENAME TO evil",
    "ALTER TABLE items ADD COLUMN evil",
    "ALTER TABLE items DROP COLUMN name",
    "REINDEX",
    "ANALYZE",
    # Transactions and stacked statements
    "BEGIN IMMEDIATE",
    "BEGIN EXCLUSIVE; DELETE FROM items",
    "SAVEPOINT s1",
    "RELEASE s1",
    "COMMIT",
    "SELECT 1; DELETE FROM items",
    "SELECT 1 /* ; */ ; DROP TABLE items",
    "EXPLAIN DELETE FROM items",
]

# Ordinary reads on the file source: each must answer a table, as SQLite itself does.
LEGIT = [
    "SELECT id, name FROM items ORDER BY id",
    "SELECT upper(name), lower(name), length(name), substr(name, 2, 2), "
    "substring(name, 1, 1) FROM items",
    "SELECT trim('  ' || name || '  '), ltrim(name, 'a'), rtrim(name, 'e'), "
    "replace(name, 'p', 'P') FROM items",
    "SELECT instr(name, 'p'), name LIKE 'p%', name GLOB '*g', hex(raw), quote(name) FROM items",
    "SELECT ifnull(f, 0), coalesce(f, id), nullif(id, 2), iif(f > 1, 'big', 'small') FROM items",
    "SELECT CASE WHEN f IS NULL THEN '?' WHEN f > 1 THEN 'big' ELSE 'small' END FROM items",
    "SELECT CAST(id AS TEXT), CAST(f AS INTEGER), typeof(f), typeof(raw) FROM items",
    "SELECT round(f, 1), abs(-id), max(id, 2), min(id, 2), sign(id - 2) FROM items",
    "SELECT sqrt(x), pow(y, 2), floor(x), ceil(x), ln(n), log10(n), pi() FROM big LIMIT 5",
    "SELECT printf('%05.1f', x), format('%d-%s', n, label) FROM big LIMIT 5",
    "SELECT date('2024-02-28', '+1 day'), time('13:45:30'), datetime('2024-02-29 10:00', "
    "'-1 hour'), julianday('2024-01-01'), unixepoch('2024-01-01'), strftime('%Y', "
    "'2024-02-29')",
    "SELECT date('now') IS NOT NULL, CURRENT_TIMESTAMP IS NOT NULL, CURRENT_DATE IS NOT NULL",
    "SELECT y, count(*), sum(x), avg(x), total(x), min(n), max(n) FROM big GROUP BY y "
    "HAVING count(*) > 30 ORDER BY y",
    "SELECT group_concat(name, ';'), count(DISTINCT name) FROM items",
    "SELECT n, row_number() OVER (PARTITION BY y ORDER BY n) FROM big ORDER BY n LIMIT 20",
    "SELECT n, rank() OVER (ORDER BY y), dense_rank() OVER (ORDER BY y), "
    "ntile(4) OVER (ORDER BY n) FROM big ORDER BY n LIMIT 10",
    "SELECT n, lag(x) OVER (ORDER BY n), lead(x, 1, 0) OVER (ORDER BY n), "
    "sum(x) OVER (ORDER BY n ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM big LIMIT 10",
    "SELECT first_value(label) OVER (PARTITION BY y ORDER BY n), "
    "percent_rank() OVER (ORDER BY n), cume_dist() OVER (ORDER BY n) FROM big LIMIT 10",
    "SELECT json_object('id', id, 'name', name), json_array(id, f) FROM items",
    "SELECT json_extract('{\"a\": [1, 2]}', '$.a[1]'), '{\"a\": 1}' -> '$.a', "
    "'{\"a\": 1}' ->> '$.a', json_valid('[1]'), json_type('[1]')",
    "SELECT json_group_array(name), json_group_object(name, id) FROM items",
    "SELECT i.name, b.label FROM items AS i JOIN big AS b ON b.n = i.id ORDER BY i.id",
    "SELECT i.name, b.label FROM items AS i LEFT JOIN big AS b ON b.n = i.id + 1000",
    "WITH cheap AS (SELECT * FROM items WHERE f < 1) SELECT name FROM cheap",
    "WITH RECURSIVE c(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM c WHERE k < 10) "
    "SELECT sum(k) FROM c",
    "SELECT name FROM items WHERE id IN (SELECT n FROM big WHERE y = 1) "
    "OR EXISTS (SELECT 1 FROM big WHERE n = items.id + 100)",
    "SELECT id FROM items UNION SELECT n FROM big WHERE n < 5 ORDER BY 1",
    "SELECT sqlite_version() IS NOT NULL, typeof(random()), length(randomblob(4)), "
    "length(zeroblob(4))",
    "SELECT unicode(name), char(65, 66), soundex(name), likely(1), unlikely(0) FROM items",
    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    "SELECT id, name FROM items ORDER BY f DESC NULLS LAST LIMIT 2 OFFSET 1",
    "SELECT degrees(pi()), radians(180), exp(0), mod(7, 3), trunc(2.7), atan2(1, 1)",
]


def test_corpus_sizes():
    assert len(set(ATTEMPTS)) == len(ATTEMPTS) >= 60
    assert len(set(LEGIT)) == len(LEGIT) >= 30


def fingerprint(lite_source) -> tuple:
    folder = lite_source["folder"]
    return (file_digest(lite_source["path"]), sorted(os.listdir(folder)),
            os.path.exists(STRAY))


def behaviour(query, db) -> list:
    """How the pooled connection answers: LIKE is case-insensitive unless a PRAGMA changed it,
    and the connection still reads."""
    body = query("SELECT 'a' LIKE 'A', 'a' GLOB 'A', json_valid('[1]')", db=db)
    assert body["type"] == "table", body
    return body["data"]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("statement", ATTEMPTS)
def test_escape_attempt_is_refused_and_changes_nothing(query, lite_source, target, statement):
    db = TARGETS[target]
    before = fingerprint(lite_source)

    body = query(statement.format(folder=lite_source["folder"], stray=STRAY), db=db)

    assert body["type"] == "error", (statement, body)
    assert isinstance(body["error_code"], int) and body["error_message"]
    assert "[SQL:" not in body["error_message"]
    assert fingerprint(lite_source) == before, statement
    assert behaviour(query, db) == [[1, 0, 1]]
    if target == "file":
        assert query("SELECT count(*) FROM items", db=db)["data"] == [[3]]


@pytest.mark.parametrize("target", list(TARGETS))
def test_functions_are_refused_by_name_before_they_run(query, target):
    for statement, name in [("SELECT load_extension('evil')", "LOAD_EXTENSION"),
                            ("SELECT sqlite_log(1, 'x')", "SQLITE_LOG"),
                            ("SELECT writefile('x', 'y')", "WRITEFILE"),
                            ("SELECT my_udf(1)", "MY_UDF")]:
        body = query(statement, db=TARGETS[target])
        assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, body
        assert f"Function {name}() is not allowed" in body["error_message"], body


@pytest.mark.parametrize("statement", LEGIT)
def test_ordinary_queries_still_answer(query, lite_source, statement):
    body = query(statement, db="lite")
    assert body["type"] == "table", (statement, body)
    with sqlite3.connect(lite_source["path"]) as raw:
        cursor = raw.execute(statement)
        rows = cursor.fetchall()
    assert len(body["data"]) == len(rows)
    assert len(body["column_names"]) == len(cursor.description)


def test_table_less_queries_run_on_the_in_memory_source(query):
    body = query("SELECT abs(-2), upper('a'), json_array(1, 2), sqlite_version() IS NOT NULL")
    assert body["data"] == [[2, "A", "[1,2]", 1]]


# The authorizer on its own: statements that skip the gate still cannot call a function
# that is not on the list, while listed ones run.

@pytest.mark.parametrize("sql", ["SELECT sqlite_log(1, 'x')", "SELECT fts3_tokenizer('simple')",
                                 "SELECT load_extension('evil')", "SELECT optimize('x')"])
def test_the_authorizer_denies_unlisted_functions_without_the_gate(sql_app, sql):
    with sql_app.app_context(), pytest.raises(SqlError) as caught:
        run_statement(current_sources().require("lite"), sql, None, [], timeout_s=2,
                      max_rows=10)
    assert caught.value.code == ErrorCode.READ_ONLY, caught.value
    assert "not authorized" in caught.value.message


def test_the_authorizer_denies_functions_an_application_registered(lite_source):
    conn = open_sqlite_readonly(lite_source["path"])
    try:
        conn.create_function("quarry_udf", 0, lambda: 1)
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            conn.execute("SELECT quarry_udf()")
        assert conn.execute("SELECT abs(-1)").fetchall() == [(1,)]
    finally:
        conn.close()


def test_every_listed_function_is_known_to_sqlite_or_newer_than_it():
    with sqlite3.connect(":memory:") as conn:
        known = {row[0] for row in conn.execute("PRAGMA function_list")}
    # Listed but absent: only the built-ins that SQLite versions after 3.40 added.
    newer = {"concat", "concat_ws", "if", "octet_length", "string_agg", "timediff", "unhex",
             "unistr", "unistr_quote", "median", "percentile", "percentile_cont",
             "percentile_disc", "json_pretty", "json_error_position", "json_array_insert"}
    missing = SQLITE_FUNCTIONS - known
    assert {name for name in missing if not name.startswith("jsonb")} <= newer, missing


# The allow-list against SQLite itself: calls of many built-ins, a family per statement, pass
# both the gate and the authorizer on the file source and on the in-memory one.
FAMILIES = {
    "core": "changes(), char(65, 66), format('%d', 5), glob('a*', 'abc'), "
            "last_insert_rowid(), like('a%', 'abc'), likelihood(1 = 1, 0.5), ltrim('  a'), "
            "printf('%05d', 3), sqlite_compileoption_get(0), "
            "sqlite_compileoption_used('THREADSAFE'), sqlite_source_id(), subtype(1), "
            "total_changes(), zeroblob(4), nullif(1, 1), quote('a'), instr('abc', 'b')",
    "math": "acos(1), acosh(1), asin(0), asinh(0), atan(0), atanh(0), ceiling(1.2), cos(0), "
            "cosh(0), log(100), log2(8), power(2, 3), sin(0), sinh(0), tan(0), tanh(0)",
    "json": "json(' [1] '), json_array_length('[1, 2]'), json_insert('{}', '$.a', 1), "
            "json_patch('{}', '{\"a\": 1}'), json_quote('a'), "
            "json_remove('{\"a\": 1}', '$.a'), json_replace('{\"a\": 1}', '$.a', 2), "
            "json_set('{}', '$.a', 1)",
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_built_in_functions_of_every_family_run(query, target, family):
    body = query(f"SELECT {FAMILIES[family]}", db=TARGETS[target])
    assert body["type"] == "table", (family, body)
    assert len(body["data"][0]) > 5
