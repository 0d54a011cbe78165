"""Write and escape attempts, per dialect: each is refused and the data is unchanged after.

PostgreSQL runs the corpus twice: through the SELECT-only role (the recommended setup) and
through the superuser, which proves the gate and the READ ONLY transaction hold on their own.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from .conftest import PID, SRC_DB, _pg_admin, file_digest, mysql_connect

EVIL = f"/tmp/quarry_evil_{PID}"  # any file an attempt might create

COMMON = [
    "INSERT INTO items (id, name) VALUES (99, 'x')",
    "INSERT INTO items SELECT * FROM items",
    "UPDATE items SET name = 'x'",
    "UPDATE items SET name = (SELECT 'x') WHERE id = 1",
    "DELETE FROM items",
    "DELETE FROM items WHERE id IN (SELECT id FROM items)",
    "DROP TABLE items",
    "DROP TABLE IF EXISTS big",
    "CREATE TABLE evil (a int)",
    "CREATE TABLE evil AS SELECT * FROM items",
    "CREATE TEMPORARY TABLE evil AS SELECT 1 AS a",
    "CREATE VIEW evil AS SELECT 1 AS a",
    "CREATE INDEX evil_ix ON items (name)",
    "ALTER TABLE items ADD COLUMN evil int",
    "ALTER TABLE items RENAME TO evil",
    "TRUNCATE TABLE items",
    "SELECT 1; DELETE FROM items",
    "SELECT 1; DROP TABLE items",
    "select 1;delete from items;",
    "SELECT 1 UNION ALL SELECT 2; DELETE FROM items",
    "DeLeTe FrOm items",
    "/* harmless */ DELETE FROM items",
    "-- a comment\nDELETE FROM items",
    "SELECT 1 /* ; */ ; DELETE FROM items",
    "SELECT 1 -- ; \n; DELETE FROM items",
    "SELECT ';' AS a; DELETE FROM items",
    "\n\t delete\nfrom\titems ",
    "SELECT * INTO evil FROM items",
    "BEGIN; DELETE FROM items; COMMIT",
    "COMMIT",
    "ROLLBACK; DELETE FROM items",
    "GRANT ALL ON items TO PUBLIC",
    "REVOKE SELECT ON items FROM PUBLIC",
    "CALL evil()",
    "VACUUM",
    "ANALYZE items",
    "SELECT * FROM items FOR UPDATE",
    "EXPLAIN ANALYZE DELETE FROM items",
    "CREATE SCHEMA evil",
    "DROP SCHEMA IF EXISTS public CASCADE",
    "SAVEPOINT s1",
]

PG_ONLY = [
    "WITH d AS (DELETE FROM items RETURNING *) SELECT * FROM d",
    "WITH u AS (UPDATE items SET name = 'x' RETURNING 1) SELECT 1",
    "WITH i AS (INSERT INTO items (id) VALUES (100) RETURNING id) SELECT * FROM i",
    f"COPY items TO '{EVIL}'",
    f"COPY (SELECT 1) TO PROGRAM 'touch {EVIL}'",
    "COPY items FROM '/etc/hostname'",
    "SELECT set_config('search_path', 'evil', false)",
    "SELECT pg_catalog.set_config('statement_timeout', '0', false)",
    "SELECT * FROM set_config('search_path', 'evil', false)",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    "SELECT pg_cancel_backend(pg_backend_pid())",
    "SELECT pg_advisory_lock(42)",
    "SELECT pg_try_advisory_lock(42)",
    "SELECT lo_import('/etc/hostname')",
    "SELECT lo_create(0)",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_ls_dir('.')",
    "SELECT dblink_exec('dbname=postgres', 'CREATE TABLE evil (a int)')",
    "SELECT nextval('items_seq')",
    "SELECT setval('items_seq', 100)",
    "SELECT query_to_xml('DELETE FROM items RETURNING 1', true, true, '')",
    "SELECT pg_notify('evil', 'x')",
    "SELECT pg_reload_conf()",
    "SELECT * FROM items FOR SHARE",
    "DO $$ BEGIN DELETE FROM items; END $$",
    "PREPARE evil AS DELETE FROM items",
    "SET search_path = evil",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
    "RESET ALL",
    "DISCARD ALL",
    "LISTEN evil",
    "NOTIFY evil",
    "LOCK TABLE items IN ACCESS EXCLUSIVE MODE",
    "CHECKPOINT",
    "REINDEX TABLE items",
    "CLUSTER items",
    "CREATE FUNCTION evil() RETURNS int AS 'SELECT 1' LANGUAGE sql",
    "SELECT $$;$$ AS a; DELETE FROM items",
    "SELECT 1; COMMIT; DELETE FROM items",
    "MERGE INTO items USING big ON items.id = big.n WHEN MATCHED THEN DELETE",
]

MYSQL_ONLY = [
    f"SELECT * FROM items INTO OUTFILE '{EVIL}'",
    f"SELECT name FROM items LIMIT 1 INTO DUMPFILE '{EVIL}'",
    "SELECT LOAD_FILE('/etc/hostname')",
    "LOAD DATA INFILE '/etc/hostname' INTO TABLE items",
    "SELECT @a := 1",
    "SET @a = 1",
    "SELECT 1 INTO @a",
    "SELECT GET_LOCK('evil', 0)",
    "SELECT RELEASE_ALL_LOCKS()",
    "SELECT * FROM items LOCK IN SHARE MODE",
    "LOCK TABLES items WRITE",
    "UNLOCK TABLES",
    "HANDLER items OPEN",
    "DO SLEEP(0)",
    "FLUSH TABLES",
    "KILL 1",
    "SET GLOBAL max_connections = 1",
    "SET SESSION TRANSACTION READ WRITE",
    "CREATE USER evil",
    "RENAME TABLE items TO evil",
    "REPLACE INTO items (id) VALUES (1)",
    "INSERT IGNORE INTO items (id) VALUES (500)",
    "DELETE FROM `items`",
    "PREPARE evil FROM 'DELETE FROM items'",
    "EXECUTE evil",
    "XA START 'evil'",
    "OPTIMIZE TABLE items",
    "REPAIR TABLE items",
    "INSTALL SONAME 'evil'",
    "SELECT 1; SET @a = 1",
]

SQLITE_ONLY = [
    "ATTACH DATABASE '{folder}/evil.db' AS evil",
    "ATTACH '{folder}/evil2.db' AS e; CREATE TABLE e.t (a)",
    "DETACH DATABASE main",
    "PRAGMA query_only = 0",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA user_version = 5",
    "VACUUM INTO '{folder}/copy.db'",
    "SELECT load_extension('evil')",
    "SELECT writefile('{folder}/evil.txt', 'x')",
    "SELECT * FROM items, load_extension('evil')",
    "REINDEX",
    "INSERT OR REPLACE INTO items (id, name) VALUES (1, 'x')",
    "INSERT INTO items (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET name = 'x'",
    "CREATE TRIGGER evil AFTER INSERT ON items BEGIN DELETE FROM items; END",
    "CREATE VIRTUAL TABLE evil USING fts5(a)",
    "RELEASE s1",
    "BEGIN IMMEDIATE",
    "BEGIN EXCLUSIVE; DELETE FROM items",
    "WITH d AS (SELECT 1) DELETE FROM items",
]


def pg_fingerprint(_ctx) -> tuple:
    with _pg_admin(SRC_DB) as conn:
        tables = conn.execute(
            "SELECT string_agg(relname || ':' || relkind::text, ',' ORDER BY relname) "
            "FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')").fetchone()
        data = conn.execute(
            "SELECT (SELECT md5(string_agg(i::text, '|' ORDER BY id)) FROM items i),"
            " (SELECT md5(string_agg(b::text, '|' ORDER BY n)) FROM big b),"
            " (SELECT last_value FROM items_seq),"
            " (SELECT count(*) FROM pg_largeobject_metadata),"
            " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'),"
            " (SELECT count(*) FROM pg_proc WHERE proname = 'evil'),"
            " (SELECT count(*) FROM pg_database WHERE datname = 'evil')").fetchone()
    return tables, data, os.path.exists(EVIL)


def mysql_fingerprint(_ctx) -> tuple:
    with contextlib.closing(mysql_connect()) as conn, conn.cursor() as cur:
        cur.execute("CHECKSUM TABLE items, big EXTENDED")
        sums = cur.fetchall()
        cur.execute("SELECT GROUP_CONCAT(table_name ORDER BY table_name) "
                    "FROM information_schema.tables WHERE table_schema = %s", (SRC_DB,))
        tables = cur.fetchall()
        cur.execute("SELECT COUNT(*) FROM mysql.user WHERE user = 'evil'")
        users = cur.fetchall()
        cur.execute("SELECT @@global.max_connections")
        settings = cur.fetchall()
    return sums, tables, users, settings, os.path.exists(EVIL)


def sqlite_fingerprint(ctx) -> tuple:
    folder = ctx["folder"]
    return file_digest(ctx["path"]), sorted(os.listdir(folder))


CASES = ([("pg", s) for s in COMMON + PG_ONLY]
         + [("pgsuper", s) for s in COMMON + PG_ONLY]
         + [("maria", s) for s in COMMON + MYSQL_ONLY]
         + [("lite", s) for s in COMMON + SQLITE_ONLY])


def test_corpus_has_at_least_40_attempts_per_dialect():
    for extra in (PG_ONLY, MYSQL_ONLY, SQLITE_ONLY):
        assert len(set(COMMON + extra)) >= 40


@pytest.mark.parametrize(("db", "statement"), CASES,
                         ids=[f"{db}-{i}" for i, (db, _s) in enumerate(CASES)])
def test_write_attempt_is_refused_and_changes_nothing(query, lite_source, db, statement):
    fingerprint = {"pg": pg_fingerprint, "pgsuper": pg_fingerprint,
                   "maria": mysql_fingerprint, "lite": sqlite_fingerprint}[db]
    statement = statement.format(folder=lite_source["folder"])
    before = fingerprint(lite_source)

    body = query(statement, db=db)

    assert body["type"] == "error", (statement, body)
    assert isinstance(body["error_code"], int) and body["error_message"]
    assert "[SQL:" not in body["error_message"]
    assert fingerprint(lite_source) == before, statement
    # The source still answers reads afterwards (no poisoned pooled connection).
    assert query("SELECT count(*) FROM items", db=db)["data"] == [[3]]


@pytest.mark.parametrize("db", ["pg", "pgsuper", "maria", "lite"])
def test_qualified_write_through_source_name_is_refused(query, lite_source, db):
    fingerprint = {"pg": pg_fingerprint, "pgsuper": pg_fingerprint,
                   "maria": mysql_fingerprint, "lite": sqlite_fingerprint}[db]
    before = fingerprint(lite_source)
    body = query(f"DELETE FROM {db}.items")
    assert body["type"] == "error" and body["error_code"] == 3
    assert fingerprint(lite_source) == before


def test_read_only_role_cannot_read_what_it_was_not_granted(query, pg_source):
    with _pg_admin(SRC_DB) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS secret (a int)")
    body = query("SELECT * FROM secret", db="pg")
    assert body["type"] == "error" and body["error_code"] == 14, body
    assert "permission denied" in body["error_message"]
    assert query("SELECT count(*) FROM secret", db="pgsuper")["data"] == [[0]]
