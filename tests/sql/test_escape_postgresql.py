"""PostgreSQL escape corpus: functions, quoting and session tricks against the allow-list.

Every attempt runs twice, through the SELECT-only role (``pg``) and through the superuser
(``pgsuper``), on an app whose pools hold one connection each (so "the connection the next
request gets" is the one the attempt used). After each attempt the raw driver reads back:
the canary's rows, the sequence, the schema's objects, large objects, files, the locks of
every other session on the database, a victim session that must still be alive, and,
through Quarry itself, the session state of its pooled connection (prepared statements,
settings, listened channels, temporary objects).

A list of ordinary queries (string, math, date/time, JSON, arrays, aggregates, windows …)
must still answer ``type: table``, so the allow-list does not break real use.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import psycopg
import pytest
from flask import Flask

from app import create_app
from app.sql.errors import ErrorCode

from ..conftest import _dispose
from .conftest import PID, RO_ROLE, SRC_DB, _pg_admin

SCHEMA = "quarry_escape"
EVIL = f"/tmp/quarry_pg_evil_{PID}"
DSN = f"dbname={SRC_DB} user=postgres host=127.0.0.1"

SETUP = f"""
DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;
CREATE SCHEMA {SCHEMA};
CREATE EXTENSION IF NOT EXISTS dblink SCHEMA {SCHEMA};
CREATE TABLE {SCHEMA}.canary (id int PRIMARY KEY, v text);
INSERT INTO {SCHEMA}.canary VALUES (1, 'one'), (2, 'two'), (3, 'three');
CREATE SEQUENCE {SCHEMA}.seq;
-- The owner's objects an attacker may try to reach: a volatile function that writes, a
-- "stable" one that runs any text it is given, one taking the canary's row (so c.f calls
-- it), and a domain whose CHECK calls a volatile function.
CREATE FUNCTION {SCHEMA}.evil_delete() RETURNS int LANGUAGE plpgsql VOLATILE
  SECURITY DEFINER AS $$ BEGIN DELETE FROM {SCHEMA}.canary; RETURN 1; END $$;
CREATE FUNCTION {SCHEMA}.evil_exec(q text) RETURNS int LANGUAGE plpgsql STABLE
  AS $$ BEGIN EXECUTE q; RETURN 1; END $$;
CREATE FUNCTION {SCHEMA}.evil_row(c {SCHEMA}.canary) RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM pg_advisory_lock(4248); RETURN 1; END $$;
CREATE FUNCTION {SCHEMA}.evil_check(v int) RETURNS boolean LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM pg_advisory_lock(4249); RETURN true; END $$;
CREATE DOMAIN {SCHEMA}.evil_dom AS int CHECK ({SCHEMA}.evil_check(VALUE));
-- A harmless function of the owner's, for the allow_functions option.
CREATE FUNCTION {SCHEMA}.twice(n int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 2 * n';
-- A view the owner wrote that takes a session lock: the gate cannot see inside it, so it
-- shows that DISCARD ALL, not the gate, releases what a request left behind.
CREATE VIEW {SCHEMA}.lock_view AS SELECT pg_advisory_lock(4250)::text AS locked;
GRANT USAGE ON SCHEMA {SCHEMA} TO "{RO_ROLE}";
GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO "{RO_ROLE}";
"""

S = SCHEMA
LOCK = "pg_advisory_lock(4246)"
# Each attempt: the SQL ({victim} is the pid of a session that must survive) and the error
# code it must get (FORBIDDEN_FUNCTION for calls, READ_ONLY for statements that write, …).
F, R, Y, M = (ErrorCode.FORBIDDEN_FUNCTION, ErrorCode.READ_ONLY, ErrorCode.SYNTAX,
              ErrorCode.MULTIPLE_STATEMENTS)
ATTEMPTS: list[tuple[str, int]] = [
    # The five.
    ("SELECT * FROM ts_stat('SELECT to_tsvector(pg_read_file(''/etc/passwd''))')", F),
    (f"SELECT * FROM ts_stat('SELECT to_tsvector(x) FROM {S}.dblink(''{DSN}'', "
     f"''DELETE FROM {S}.canary RETURNING v'') AS t(x text)')", F),
    (f"SELECT * FROM ts_stat('SELECT to_tsvector({LOCK}::text)')", F),
    ("SELECT * FROM ts_stat('SELECT to_tsvector(pg_terminate_backend({victim})::text)')", F),
    (f"SELECT ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, to_tsquery({LOCK}::text)')", F),
    # Functions that run SQL text, spelled every way.
    ("SELECT * FROM pg_catalog.ts_stat('SELECT to_tsvector(''x'')')", F),
    ("SELECT * FROM \"ts_stat\"('SELECT to_tsvector(''x'')')", F),
    ("SELECT word FROM ts_stat($$SELECT to_tsvector(pg_read_file('/etc/passwd'))$$)", F),
    ("SELECT ts_rewrite('a'::tsquery, 'a'::tsquery, 'b'::tsquery)", F),
    (f"SELECT query_to_xml('DELETE FROM {S}.canary RETURNING 1', true, true, '')", F),
    (f"SELECT query_to_xml('SELECT {LOCK}', true, true, '')", F),
    ("SELECT query_to_xmlschema('SELECT 1', true, true, '')", F),
    ("SELECT cursor_to_xml('c', 1, true, true, '')", F),
    (f"SELECT table_to_xml('{S}.canary'::regclass, true, false, '')", F),
    (f"SELECT schema_to_xml('{S}', true, false, '')", F),
    ("SELECT database_to_xml(true, false, '')", F),
    (f"SELECT xpath('/row', query_to_xml('SELECT {LOCK}', true, false, ''))", F),
    # dblink: a second connection that is not read-only.
    (f"SELECT {S}.dblink_exec('{DSN}', 'DELETE FROM {S}.canary')", F),
    (f"SELECT * FROM {S}.dblink('{DSN}', 'DELETE FROM {S}.canary RETURNING v') AS t(v text)",
     F),
    (f"SELECT dblink_connect('evil', '{DSN}')", F),
    # Locks that would outlive the request on a pooled connection.
    (f"SELECT {LOCK}", F),
    ("SELECT pg_try_advisory_lock(4246)", F),
    ("SELECT pg_advisory_lock_shared(4246)", F),
    ("SELECT pg_advisory_xact_lock(4246)", F),
    (f"SELECT 1 FROM {S}.canary WHERE {LOCK} IS NOT NULL", F),
    (f"SELECT * FROM {S}.canary, LATERAL {LOCK} AS l", F),
    (f"SELECT * FROM ROWS FROM (generate_series(1, 2), {LOCK})", F),
    (f"SELECT count(*) FILTER (WHERE {LOCK} IS NULL) FROM {S}.canary", F),
    (f"SELECT 1 UNION ALL SELECT {LOCK}::int", F),
    (f"VALUES (({LOCK}))", F),
    (f"SELECT ARRAY[{LOCK}]", F),
    (f"SELECT (SELECT (SELECT {LOCK}))", F),
    (f"SELECT 1 ORDER BY {LOCK}", F),
    (f"SELECT 1 LIMIT (SELECT {LOCK})::int", F),
    (f"SELECT CAST({LOCK} AS text)::regclass", F),
    (f"SELECT row_to_json(t) FROM (SELECT {LOCK}) AS t", F),
    # Other sessions.
    ("SELECT pg_terminate_backend({victim})", F),
    ("SELECT pg_cancel_backend({victim})", F),
    ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = {victim}", F),
    ("SELECT pg_cancel_backend(p) FROM unnest(ARRAY[{victim}]) AS p", F),
    ("SELECT CASE WHEN random() < 2 THEN pg_terminate_backend({victim}) END", F),
    ("SELECT coalesce(NULL, pg_terminate_backend({victim}))", F),
    # Server files and programs.
    ("SELECT pg_read_file('/etc/passwd')", F),
    ("SELECT * FROM pg_read_file('/etc/passwd') AS f", F),
    ("SELECT pg_read_binary_file('/etc/passwd')", F),
    ("SELECT * FROM pg_catalog.pg_ls_dir('.')", F),
    ("SELECT pg_stat_file('/etc/passwd')", F),
    ("SELECT format('%s', pg_read_file('/etc/hostname'))", F),
    ("SELECT 'x' ~ pg_read_file('/etc/hostname')", F),
    ("SELECT lo_import('/etc/hostname')", F),
    (f"SELECT lo_export(lo_from_bytea(0, 'x'), '{EVIL}')", F),
    ("SELECT lo_create(0)", F),
    ("SELECT pg_catalog.lo_unlink(1)", F),
    (f"COPY {S}.canary TO '{EVIL}'", R),
    (f"COPY (SELECT 1) TO PROGRAM 'touch {EVIL}'", R),
    ("SELECT pg_file_write('x', 'y', false)", F),
    # Settings, sequences, transactions, notifications.
    ("SELECT set_config('statement_timeout', '0', false)", F),
    ("SELECT pg_catalog.set_config('role', 'postgres', false)", F),
    ("SELECT current_setting('search_path'), set_config('search_path', 'evil', false)", F),
    (f"SELECT nextval('{S}.seq')", F),
    (f"SELECT setval('{S}.seq', 100)", F),
    ("SELECT lastval()", F),
    ("SELECT txid_current()", F),
    ("SELECT pg_current_xact_id()", F),
    ("SELECT setseed(0.5)", F),
    ("SELECT pg_notify('evil', 'x')", F),
    ("SELECT pg_export_snapshot()", F),
    ("SELECT pg_reload_conf()", F),
    ("SELECT pg_rotate_logfile()", F),
    ("SELECT pg_switch_wal()", F),
    ("SELECT pg_create_restore_point('evil')", F),
    ("SELECT pg_stat_reset()", F),
    ("SELECT pg_logical_emit_message(true, 'evil', 'x')", F),
    ("SELECT pg_create_logical_replication_slot('evil', 'pgoutput')", F),
    ("SELECT pg_import_system_collations('pg_catalog')", F),
    # The owner's functions, types and field notation.
    (f"SELECT {S}.evil_delete()", F),
    ("SELECT evil_delete()", F),
    (f"SELECT {S}.evil_exec('SELECT {LOCK}')", F),
    (f"SELECT c.evil_row FROM {S}.canary AS c", F),
    (f"SELECT 1 FROM {S}.canary AS c WHERE c.evil_row > 0", F),
    (f"SELECT 1::{S}.evil_dom", F),
    (f"SELECT CAST(1 AS {S}.evil_dom)", F),
    # Quoting, comments and spelling tricks.
    (f"SELECT /* pg_sleep */ {LOCK}", F),
    ("SELECT pg_advisory_lock/**/(4246)", F),
    ("SELECT \"pg_advisory_lock\"(4246)", F),
    ("SELECT pg_catalog.\"pg_advisory_lock\"(4246)", F),
    ("SELECT \"pg_catalog\".\"pg_advisory_lock\"(4246)", F),
    ("SELECT PG_ADVISORY_LOCK(4246)", F),
    (f"SELECT E'\\'', {LOCK}", F),
    (f"SELECT $$ ' $$, {LOCK}", F),
    (f"SELECT $q$ $$ $q$, {LOCK}", F),
    (f"SELECT U&'\\0027', {LOCK}", F),
    (f"SELECT 1 AS pg_advisory_lock, {LOCK}", F),
    (f"WITH RECURSIVE pg_advisory_lock(x) AS (SELECT 1) SELECT {LOCK}", F),
    (f"WITH t AS (SELECT 1), pg_advisory_lock(x) AS (SELECT 2) SELECT {LOCK}", F),
    (f"SELECT 1 --\n; SELECT {LOCK}", M),
    (f"SELECT 1; SELECT {LOCK}", M),
    ("SELECT count(*) FROM items TABLESAMPLE system_rows (10)", F),
    # Statements, not functions.
    (f"WITH d AS (DELETE FROM {S}.canary RETURNING *) SELECT * FROM d", R),
    (f"SELECT * INTO TEMP evil FROM {S}.canary", R),
    (f"SELECT * FROM {S}.canary FOR UPDATE", R),
    (f"SELECT * FROM {S}.canary FOR KEY SHARE", R),
    (f"DO $$ BEGIN DELETE FROM {S}.canary; END $$", R),
    (f"PREPARE evil AS SELECT {LOCK}", R),
    ("DEALLOCATE ALL", R),
    ("SET ROLE postgres", R),
    ("SET SESSION AUTHORIZATION postgres", R),
    ("ALTER SYSTEM SET statement_timeout = 1", R),
    ("LISTEN evil", R),
    (f"EXPLAIN ANALYZE SELECT {LOCK}", R),
    (f"CREATE TEMP TABLE evil AS SELECT * FROM {S}.canary", R),
]


@pytest.fixture(scope="module")
def escape_objects(pg_source) -> Iterator[None]:
    with _pg_admin(SRC_DB) as conn:
        conn.execute(SETUP)
    try:
        yield
    finally:
        with _pg_admin(SRC_DB) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


@pytest.fixture(scope="module")
def escape_app(pg_source, escape_objects, sqlite_template, session_dir) -> Iterator[Flask]:
    """One connection per source: what a request leaves behind, the next one would get."""
    store = os.path.join(session_dir, "escape-store.db")
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir,
                      "TESTING": True, "DEMO_SOURCE": False, "SQL_POOL_SIZE": 1,
                      "SQL_TIMEOUT_S": 3.0,
                      "DATA_SOURCES": {"pg": pg_source["ro"], "pgsuper": pg_source["owner"]}})
    yield app
    _dispose(app)


@pytest.fixture(scope="module")
def victim(pg_source) -> Iterator[psycopg.Connection]:
    """A session the attempts try to kill or cancel; it must stay alive."""
    with _pg_admin(SRC_DB) as conn:
        yield conn


def ask(app: Flask, sql: str, db: str) -> dict:
    response = app.test_client().post("/api/sql/query",
                                      json={"query": sql, "context": {"db": db}})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def session_state(app: Flask, db: str) -> list:
    """What Quarry's pooled session holds, read through Quarry (pool of one connection).

    Quarry's own transaction sets statement_timeout, transaction_read_only and
    standard_conforming_strings (SET LOCAL): those are left out; anything else set for the
    session would show. The statement asking is itself a portal: unnamed (a buffered
    answer) or a cursor named quarry_… (a stream); those are left out too."""
    body = ask(app, "SELECT (SELECT count(*) FROM pg_prepared_statements),"
                    " (SELECT count(*) FROM pg_listening_channels()),"
                    " (SELECT string_agg(name, ',') FROM pg_settings WHERE source = 'session'"
                    "  AND name NOT IN ('statement_timeout', 'transaction_read_only',"
                    "                   'standard_conforming_strings')),"
                    " (SELECT count(*) FROM pg_cursors"
                    "  WHERE name NOT LIKE 'quarry%' AND name <> ''),"
                    " (SELECT count(*) FROM pg_class WHERE relpersistence = 't')", db)
    assert body["type"] == "table", body
    return body["data"]


def fingerprint(victim_conn: psycopg.Connection) -> tuple:
    """Data, objects, files and locks, read with the raw driver as the superuser."""
    with _pg_admin(SRC_DB) as conn:
        data = conn.execute(
            f"SELECT (SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM {S}.canary),"
            f" (SELECT md5(string_agg(i::text, '|' ORDER BY id)) FROM public.items i),"
            f" (SELECT last_value || ':' || is_called FROM {S}.seq),"
            " (SELECT last_value || ':' || is_called FROM public.items_seq),"
            " (SELECT count(*) FROM pg_largeobject_metadata),"
            " (SELECT count(*) FROM pg_class WHERE relpersistence = 't'),"
            " (SELECT count(*) FROM pg_replication_slots),"
            " (SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c"
            "  JOIN pg_namespace n ON n.oid = c.relnamespace"
            "  WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
            "  AND n.nspname NOT LIKE 'pg\\_%')").fetchone()
        # Locks held by any other session on this database (Quarry's idle pooled sessions
        # must hold none), and advisory locks anywhere on it.
        locks = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() "
            "  AND a.pid <> %s", (victim_conn.info.backend_pid,)).fetchone()
        advisory = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
    # The victim still answers (pg_terminate_backend would have closed it).
    alive = victim_conn.execute("SELECT 1").fetchone()
    return data, locks, advisory, alive, os.path.exists(EVIL)


CASES = [(db, i) for db in ("pg", "pgsuper") for i in range(len(ATTEMPTS))]


def test_corpus_has_at_least_60_attempts():
    assert len({sql for sql, _code in ATTEMPTS}) >= 60


@pytest.mark.parametrize(("db", "index"), CASES,
                         ids=[f"{db}-{i}" for db, i in CASES])
def test_escape_attempt_is_refused_and_leaves_nothing(escape_app, victim, db, index):
    sql, code = ATTEMPTS[index]
    sql = sql.format(victim=victim.info.backend_pid)
    before, state_before = fingerprint(victim), session_state(escape_app, db)
    assert before[1:] == ((0,), (0,), (1,), False), before  # a clean start

    body = ask(escape_app, sql, db)

    assert body["type"] == "error", (sql, body)
    assert body["error_code"] == code, (sql, body)
    assert fingerprint(victim) == before, sql
    assert session_state(escape_app, db) == state_before == [[0, 0, None, 0, 0]], sql


@pytest.mark.parametrize("db", ["pg", "pgsuper"])
def test_refusals_name_the_function(escape_app, db):
    body = ask(escape_app, "SELECT * FROM ts_stat('SELECT 1')", db)
    assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION
    assert "ts_stat()" in body["error_message"] and "SQL of its own" in body["error_message"]
    body = ask(escape_app, "SELECT pg_advisory_lock(1)", db)
    assert "pg_advisory_lock()" in body["error_message"]
    assert "volatile" in body["error_message"]
    body = ask(escape_app, "SELECT no_such_function_here(1)", db)
    assert "no_such_function_here()" in body["error_message"]
    assert "no function of that name" in body["error_message"]
    body = ask(escape_app, f"SELECT {S}.evil_delete()", db)
    assert "evil_delete()" in body["error_message"] and "built-in" in body["error_message"]


def test_a_lock_taken_inside_a_view_is_released_when_the_connection_goes_back(
        escape_app, victim):
    # The owner's view takes a session-level advisory lock inside the READ ONLY
    # transaction; the rollback keeps such a lock, DISCARD ALL releases it.
    for db in ("pg", "pgsuper"):
        body = ask(escape_app, f"SELECT * FROM {S}.lock_view", db)
        assert body["type"] == "table" and body["data"] == [[""]], body
        assert fingerprint(victim)[1:3] == ((0,), (0,))
    # The session itself is the same one (pool of one), so it was reset, not replaced.
    pids = {ask(escape_app, "SELECT pg_backend_pid()", "pg")["data"][0][0] for _ in range(3)}
    assert len(pids) == 1


def test_many_requests_on_one_connection_keep_working(escape_app):
    # psycopg would prepare a statement it has run five times (its ROLLBACK), and DISCARD
    # ALL would drop it on the server behind psycopg's back: the sixth ROLLBACK would fail
    # and the pool would replace the connection. It stays the same connection throughout.
    pids = set()
    for n in range(12):
        body = ask(escape_app, f"SELECT {n} AS n, count(*), pg_backend_pid() FROM {S}.canary",
                   "pg")
        assert body["data"][0][:2] == [n, 3], body
        pids.add(body["data"][0][2])
    assert len(pids) == 1
    assert session_state(escape_app, "pg") == [[0, 0, None, 0, 0]]


def test_allow_functions_lets_the_operator_allow_a_function(pg_source, escape_objects,
                                                           make_app):
    plain = make_app(DEMO_SOURCE=False, DATA_SOURCES={"pg": pg_source["ro"]})
    body = ask(plain, f"SELECT {S}.twice(21)", "pg")
    assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION and "twice()" in body[
        "error_message"]
    allowing = make_app(DEMO_SOURCE=False, DATA_SOURCES={"pg": {
        "url": pg_source["ro"], "allow_functions": ["twice", "ts_stat", "dblink"]}})
    assert ask(allowing, f"SELECT {S}.twice(21)", "pg")["data"] == [[42]]
    # The functions refused by name stay refused, whatever the option says.
    for sql in ("SELECT * FROM ts_stat('SELECT 1')",
                f"SELECT * FROM {S}.dblink('{DSN}', 'SELECT 1') AS t(a int)"):
        body = ask(allowing, sql, "pg")
        assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, (sql, body)


@pytest.mark.parametrize("db", ["pg", "pgsuper"])
def test_xml_functions_are_allowed_but_read_no_file(escape_app, db):
    # xpath and xmltable are immutable/stable built-ins; PostgreSQL's XML parser does not
    # load external entities, so a DTD naming a server file reads nothing.
    doc = ("'<!DOCTYPE f [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><f>&e;</f>'::xml")
    body = ask(escape_app, f"SELECT xpath('/f/text()', {doc})::text, "
                           f"(SELECT v FROM xmltable('/f' PASSING {doc} COLUMNS v text PATH '.'))",
               db)
    assert body["type"] == "table", body
    assert "root:" not in str(body["data"])


@pytest.fixture
def old_strings_role(pg_source) -> Iterator[str]:
    """A SELECT-only role whose sessions read backslashes in strings as escapes."""
    name = f"quarry_oldstr_{PID}"
    with _pg_admin(SRC_DB) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{name}"')
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute(f'ALTER ROLE "{name}" SET standard_conforming_strings = off')
        conn.execute(f'GRANT CONNECT ON DATABASE "{SRC_DB}" TO "{name}"')
    try:
        yield f"postgresql+psycopg://{name}@127.0.0.1:5432/{SRC_DB}"
    finally:
        with _pg_admin(SRC_DB) as conn:
            conn.execute(f'DROP OWNED BY "{name}"')
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')


def test_a_string_is_read_as_the_gate_read_it_whatever_the_role_sets(
        old_strings_role, make_app, victim):
    # sqlglot writes $$x\' , f() --$$ as 'x\'' , f() --' (standard strings: one literal).
    # With standard_conforming_strings off, PostgreSQL would end the string at \'' and
    # run pg_terminate_backend, which the gate never saw as a call.
    app = make_app(DEMO_SOURCE=False, DATA_SOURCES={"old": old_strings_role})
    sql = "SELECT $$x\\' , pg_terminate_backend({victim}) --$$ AS s"
    body = ask(app, sql.format(victim=victim.info.backend_pid), "old")
    assert body["type"] == "table", body
    assert body["data"] == [[f"x\\' , pg_terminate_backend({victim.info.backend_pid}) --"]]
    assert victim.execute("SELECT 1").fetchone() == (1,)


LEGIT = [
    # strings
    "SELECT lower(name), upper(name), initcap(name), length(name), char_length(name) "
    "FROM items",
    "SELECT substr(name, 1, 2), substring(name FROM 1 FOR 2), left(name, 2), right(name, 2) "
    "FROM items",
    "SELECT position('p' IN name), strpos(name, 'p'), replace(name, 'p', 'P'), "
    "translate(name, 'ae', 'AE') FROM items",
    "SELECT trim(name), btrim(name), ltrim(name, 'a'), rtrim(name), lpad(name, 8, '.'), "
    "rpad(name, 8) FROM items",
    "SELECT concat(name, '!'), concat_ws('-', name, id), name || '?', format('%s=%s', id, name) "
    "FROM items",
    "SELECT split_part('a,b,c', ',', 2), repeat('ab', 3), reverse(name), starts_with(name, 'a') "
    "FROM items",
    "SELECT regexp_replace(name, '[aeiou]', '_', 'g'), regexp_match(name, 'p+'), "
    "name ~ '^a', name ILIKE 'A%', name SIMILAR TO '(a|p)%' FROM items",
    "SELECT md5(name), encode(raw, 'hex'), decode('00ff', 'hex'), sha256('x'::bytea), "
    "quote_ident(name), quote_literal(name) FROM items",
    "SELECT string_agg(name, ',' ORDER BY name), array_agg(id ORDER BY id) FROM items",
    "SELECT to_char(ts, 'YYYY-MM-DD'), to_char(1234.5, '9999.9'), to_number('12.5', '99.9') "
    "FROM items",
    # math
    "SELECT abs(-f), round(price, 1), ceil(price), floor(price), trunc(price), sign(-1) "
    "FROM items WHERE id = 1",
    "SELECT sqrt(2), cbrt(27), power(2, 10), exp(1), ln(10), log(100), log(2, 8), pi()",
    "SELECT mod(7, 3), 7 % 3, div(7, 2), gcd(12, 18), lcm(4, 6), factorial(5), "
    "width_bucket(5, 0, 10, 5), greatest(1, 5, 3), least(1, 5, 3)",
    "SELECT degrees(pi()), radians(180), sin(0), cos(0), atan2(1, 1), random() < 1",
    # date / time
    "SELECT now() IS NOT NULL, current_timestamp IS NOT NULL, current_date IS NOT NULL, "
    "localtimestamp IS NOT NULL, clock_timestamp() IS NOT NULL",
    "SELECT date_trunc('month', ts), extract(year FROM ts), date_part('dow', ts), "
    "extract(epoch FROM span) FROM items WHERE id = 1",
    "SELECT age(timestamp '2024-02-29', timestamp '2020-01-01'), "
    "make_date(2024, 2, 29), make_interval(days => 3), justify_hours(interval '30 hours')",
    "SELECT to_date('2024-02-29', 'YYYY-MM-DD'), to_timestamp(0), "
    "date '2024-02-29' + 1, ts + interval '1 day', d - date '2024-01-01' FROM items "
    "WHERE id = 1",
    "SELECT date_bin('15 minutes', ts, timestamp '2001-01-01'), ts AT TIME ZONE 'UTC', "
    "isfinite(d) FROM items WHERE id = 1",
    "SELECT g::date FROM generate_series(timestamp '2024-01-01', timestamp '2024-01-05', "
    "interval '1 day') AS g",
    # JSON
    "SELECT doc -> 'k', doc ->> 'k', doc #> '{k,0}', doc #>> '{k,1}', jsonb_typeof(doc), "
    "js ->> 'j' FROM items WHERE id = 1",
    "SELECT jsonb_array_length(doc -> 'k'), jsonb_build_object('a', 1, 'b', name), "
    "json_build_array(1, 2), to_jsonb(name), row_to_json(i) IS NOT NULL FROM items AS i "
    "WHERE id = 1",
    "SELECT jsonb_agg(name ORDER BY id), json_object_agg(name, id), "
    "jsonb_set('{\"a\": 1}'::jsonb, '{a}', '2') FROM items",
    "SELECT k, v FROM items, jsonb_each(doc) AS e(k, v) WHERE id = 1",
    "SELECT jsonb_path_query_array(doc, '$.k[*]'), doc @> '{\"k\": [1]}', doc ? 'k' "
    "FROM items WHERE id = 1",
    # arrays
    "SELECT array_length(tags, 1), cardinality(nums), array_to_string(tags, ';'), "
    "array_position(tags, 'b'), tags[1], nums[2:3] FROM items WHERE id = 1",
    "SELECT array_append(nums, 4), array_cat(nums, nums), array_remove(nums, 2), "
    "string_to_array('a,b', ','), 2 = ANY(nums), nums @> ARRAY[1] FROM items WHERE id = 1",
    "SELECT unnest(tags) AS t FROM items WHERE id = 1",
    "SELECT tag, o FROM items, unnest(tags) WITH ORDINALITY AS u(tag, o) WHERE id = 1",
    # aggregates and windows
    "SELECT count(*), count(DISTINCT y), sum(x), avg(x), min(label), max(n), "
    "stddev(x), variance(x), bool_and(y > 0), every(n > 0), bit_or(y) FROM big",
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), mode() WITHIN GROUP (ORDER BY y), "
    "corr(x, y), regr_slope(x, y), count(*) FILTER (WHERE y = 1) FROM big",
    "SELECT y, count(*) FROM big GROUP BY ROLLUP (y) HAVING count(*) > 1 ORDER BY y",
    "SELECT n, row_number() OVER w, rank() OVER w, dense_rank() OVER w, ntile(4) OVER w, "
    "lag(n) OVER w, lead(n, 2) OVER w, first_value(n) OVER w, "
    "sum(x) OVER (PARTITION BY y ORDER BY n ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) "
    "FROM big WINDOW w AS (ORDER BY n) ORDER BY n LIMIT 5",
    # syntax that is not a function, and casts
    "SELECT coalesce(price, 0), nullif(name, 'fig'), CASE WHEN id > 1 THEN 'b' ELSE 'a' END, "
    "id BETWEEN 1 AND 2, name IN ('apple', 'fig'), price IS NULL FROM items",
    "SELECT CAST(id AS text), id::numeric(10, 2), '42'::int, '2024-01-01'::date, "
    "'items'::regclass::text, 'now'::regproc::text, uid::text, '1.5'::float8 FROM items "
    "WHERE id = 1",
    "SELECT ROW(1, 'a'), ARRAY[1, 2], ARRAY(SELECT n FROM big WHERE n < 3), "
    "EXISTS (SELECT 1 FROM big), (SELECT max(n) FROM big)",
    "WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM r WHERE k < 5) "
    "SELECT sum(k) FROM r",
    "WITH top AS MATERIALIZED (SELECT n FROM big ORDER BY n DESC LIMIT 3) SELECT * FROM top",
    "SELECT * FROM generate_series(1, 3) AS g(n), LATERAL (SELECT n * 2 AS twice) AS l",
    "SELECT count(*) FROM big TABLESAMPLE BERNOULLI (50) REPEATABLE (7)",
    "SELECT DISTINCT ON (y) y, n FROM big ORDER BY y, n",
    # the session and the catalog
    "SELECT version(), current_user, session_user, current_database(), current_schema, "
    "current_setting('TimeZone'), pg_backend_pid() > 0, pg_typeof(1)",
    "SELECT relname, pg_relation_size(oid) >= 0, pg_total_relation_size(oid) >= 0 "
    "FROM pg_class WHERE relname = 'items'",
    "SELECT tablename, has_table_privilege(tablename, 'SELECT') FROM pg_tables "
    "WHERE schemaname = 'public' ORDER BY tablename",
    "SELECT to_tsvector('english', 'quarries of stone') @@ to_tsquery('english', 'quarry'), "
    "ts_rank(to_tsvector('a b'), to_tsquery('a')), plainto_tsquery('x y')",
    "SELECT gen_random_uuid() IS NOT NULL, pg_sleep(0), num_nonnulls(1, NULL, 2), "
    "pg_size_pretty(1024::bigint), inet '10.0.0.1' << inet '10.0.0.0/8'",
]


def test_at_least_30_legitimate_queries():
    assert len(set(LEGIT)) >= 30


@pytest.mark.parametrize("index", range(len(LEGIT)))
def test_ordinary_query_still_answers(escape_app, index):
    body = ask(escape_app, LEGIT[index], "pg")
    assert body["type"] == "table", (LEGIT[index], body)
    assert body["data"], LEGIT[index]
