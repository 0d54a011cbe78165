"""Escape attempts on a MariaDB source, as root and as a SELECT-only account.

Each attempt must be refused, and afterwards the raw driver must find nothing changed: the
canary tables and the sequence, the routines, the accounts and grants, global settings, no
user lock held, no file written, the bystander connection that KILL attempts aim at still
alive, and no state left in the session of the (single) pooled connection.

Root can do everything the attempts try, so on that source only the gate and the READ ONLY
transaction stand in the way; the SELECT-only account shows the recommended set-up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator

import pymysql
import pytest
from flask import Flask

from app import create_app
from app.sql.errors import ErrorCode, SqlError
from app.sql.execute import run_statement
from app.sql.sources import current_sources

from ..conftest import _dispose
from .conftest import PID, RO_ROLE, SRC_DB, mysql_connect

LOCK = f"quarry_evil_{PID}"
EVIL = f"/tmp/quarry_evil_maria_{PID}"
EVIL_FILES = [EVIL, EVIL + ".csv", EVIL + ".dump"]
ROLES = {"root": "maria", "ro": "mariaro"}

# {evil}: a file path; {lock}: a user lock name; {victim}: another connection's id;
# {db}: the source database; {ro}: the SELECT-only account.
ATTEMPTS = [
    # Writes and schema changes
    "INSERT INTO items (id, name) VALUES (99, 'x')",
    "INSERT INTO items SELECT * FROM items",
    "INSERT IGNORE INTO items (id) VALUES (500)",
    "REPLACE INTO items (id) VALUES (1)",
    "INSERT INTO items (id) VALUES (1) ON DUPLICATE KEY UPDATE name = 'x'",
    "UPDATE items SET name = 'x'",
    "UPDATE items JOIN big ON items.id = big.n SET items.name = big.label",
    "DELETE FROM items",
    "DELETE items FROM items JOIN big ON items.id = big.n",
    "DELETE FROM `items` ORDER BY id LIMIT 1",
    "TRUNCATE TABLE items",
    "DROP TABLE items",
    "CREATE TABLE evil AS SELECT * FROM items",
    "CREATE TEMPORARY TABLE evil (a INT)",
    "CREATE OR REPLACE VIEW evil AS SELECT 1 AS a",
    "ALTER TABLE items ADD COLUMN evil INT",
    "RENAME TABLE items TO evil",
    "CREATE FUNCTION evil() RETURNS INT RETURN 1",
    "CREATE EVENT evil ON SCHEDULE EVERY 1 SECOND DO DELETE FROM items",
    "CREATE TRIGGER evil BEFORE INSERT ON items FOR EACH ROW SET NEW.name = 'x'",
    "CREATE USER evil",
    "GRANT ALL ON *.* TO '{ro}'@'%'",
    "SELECT 1; DELETE FROM items",
    "CALL mysql.evil()",
    "HANDLER items OPEN",
    "LOAD DATA INFILE '/etc/hostname' INTO TABLE items",
    "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE items",
    # Server files
    "SELECT * FROM items INTO OUTFILE '{evil}'",
    "SELECT name FROM items LIMIT 1 INTO DUMPFILE '{evil}.dump'",
    "SELECT name INTO OUTFILE '{evil}' FROM items",
    "SELECT * FROM (SELECT 1 AS a) t INTO OUTFILE '{evil}.csv' FIELDS TERMINATED BY ','",
    "SELECT 1 UNION SELECT 2 INTO OUTFILE '{evil}'",
    "SELECT LOAD_FILE('/etc/hostname')",
    "SELECT HEX(LOAD_FILE('/etc/passwd')) FROM items",
    "SELECT * FROM items WHERE name = LOAD_FILE('/etc/hostname')",
    "SELECT CONVERT(LOAD_FILE('/etc/hostname') USING utf8mb4)",
    # User locks, by every road to a function call
    "SELECT GET_LOCK('{lock}', 0)",
    "SELECT get_lock ('{lock}', 0)",
    "SELECT `GET_LOCK`('{lock}', 0)",
    "SELECT * FROM items WHERE GET_LOCK('{lock}', 0) = 1",
    "SELECT (SELECT GET_LOCK('{lock}', 0))",
    "SELECT * FROM (SELECT GET_LOCK('{lock}', 0) AS l) AS t",
    "WITH l AS (SELECT GET_LOCK('{lock}', 0) AS l) SELECT * FROM l",
    "SELECT 1 UNION ALL SELECT GET_LOCK('{lock}', 0)",
    "SELECT IF(id = 1, GET_LOCK('{lock}', 0), 0) FROM items",
    "SELECT BENCHMARK(1, GET_LOCK('{lock}', 0))",
    "SELECT JSON_OBJECT('a', GET_LOCK('{lock}', 0))",
    "SELECT SUM(GET_LOCK('{lock}', 0)) OVER () FROM items",
    "SELECT CAST(GET_LOCK('{lock}', 0) AS CHAR)",
    "SELECT COALESCE(NULL, GET_LOCK('{lock}', 0))",
    "SELECT GROUP_CONCAT(GET_LOCK('{lock}', 0)) FROM items",
    "SELECT RELEASE_LOCK('{lock}')",
    "SELECT RELEASE_ALL_LOCKS()",
    "SELECT IS_USED_LOCK('{lock}')",
    "SELECT IS_FREE_LOCK('{lock}')",
    "DO GET_LOCK('{lock}', 0)",
    # Stored functions (quarry_lock takes the user lock, quarry_wipe deletes every item)
    "SELECT quarry_lock()",
    "SELECT {db}.quarry_lock()",
    "SELECT `{db}`.`quarry_lock`()",
    "SELECT quarry_wipe()",
    "SELECT {db}.quarry_wipe() FROM items",
    "SELECT * FROM items WHERE id = quarry_wipe()",
    "SELECT mysql.quarry_wipe()",
    "SELECT * FROM {db}.quarry_wipe() AS t",
    "SELECT * FROM {db}.concat('a') AS t",
    # Row and table locks
    "SELECT * FROM items LOCK IN SHARE MODE",
    "SELECT * FROM items FOR UPDATE",
    "SELECT * FROM items FOR UPDATE SKIP LOCKED",
    "LOCK TABLES items WRITE",
    "FLUSH TABLES WITH READ LOCK",
    # Session state
    "SELECT @evil := 1",
    "SELECT @evil := LOAD_FILE('/etc/hostname')",
    "SET @evil = 1",
    "SELECT 1 INTO @evil",
    "SELECT id INTO @evil FROM items LIMIT 1",
    "SET SESSION sql_mode = 'ANSI'",
    "SET NAMES latin1",
    "SET autocommit = 1",
    "SET SESSION TRANSACTION READ WRITE",
    "SET STATEMENT max_statement_time = 0 FOR SELECT * FROM items",
    "SET max_statement_time = 0",
    "PREPARE evil FROM 'DELETE FROM items'",
    "EXECUTE evil",
    "XA START 'evil'",
    "SAVEPOINT s1",
    "COMMIT",
    "START TRANSACTION READ WRITE",
    "USE mysql",
    "SELECT LAST_INSERT_ID(42)",
    "SELECT NEXTVAL(quarry_seq)",
    "SELECT NEXT VALUE FOR quarry_seq",
    "SELECT SETVAL(quarry_seq, 1000)",
    "SELECT LASTVAL(quarry_seq)",
    # The server and other sessions
    "KILL {victim}",
    "KILL QUERY {victim}",
    "KILL CONNECTION {victim}",
    "SHUTDOWN",
    "SET GLOBAL max_connections = 1",
    "SET GLOBAL read_only = 1",
    "SET GLOBAL general_log = 1",
    "SELECT MASTER_POS_WAIT('mysql-bin.000001', 4, 1)",
    "SELECT MASTER_GTID_WAIT('0-1-1', 0.1)",
    "SELECT BINLOG_GTID_POS('mysql-bin.000001', 4)",
    "SELECT sys_exec('touch {evil}')",
    "SELECT sys_eval('id')",
    "INSTALL SONAME 'ha_connect'",
    "CREATE FUNCTION sys_exec RETURNS INTEGER SONAME 'lib_mysqludf_sys.so'",
    "SELECT NAME_CONST('a', 1)",
    "PURGE BINARY LOGS BEFORE NOW()",
    "CHANGE MASTER TO MASTER_HOST = 'evil'",
    "OPTIMIZE TABLE items",
]

# Text that the gate turns into something harmless rather than refusing: MySQL's executable
# comments are comments to the parser and never reach the server.
NEUTRALISED = [
    "SELECT 1 /*!, GET_LOCK('{lock}', 0) */",
    "SELECT id FROM items /*! WHERE GET_LOCK('{lock}', 0) = 1 */ ORDER BY id",
    "SELECT 1 /*!50000 ; DELETE FROM items */",
]

# Ordinary read queries, on the canary tables: each must answer a table, as the raw driver
# does for the same text.
LEGIT = [
    "SELECT CONCAT(name, '!'), CONCAT_WS('-', id, name) FROM items ORDER BY id",
    "SELECT SUBSTRING(name, 2, 3), SUBSTR(name, 1, 1), LEFT(name, 2), RIGHT(name, 2) FROM items",
    "SELECT UPPER(name), LOWER(name), LCASE(name), UCASE(name), LENGTH(name) FROM items",
    "SELECT TRIM(name), LTRIM(name), RTRIM(name), LPAD(name, 8, '.'), REPLACE(name, 'a', 'A') "
    "FROM items",
    "SELECT LOCATE('p', name), INSTR(name, 'p'), POSITION('p' IN name) FROM items",
    "SELECT IFNULL(price, 0), COALESCE(price, big, 0), NULLIF(id, 2), IF(ok, 'y', 'n') FROM items",
    "SELECT CASE WHEN price > 1.6 THEN 'dear' WHEN price IS NULL THEN '?' ELSE 'cheap' END "
    "FROM items",
    "SELECT CAST(price AS CHAR), CAST(id AS DECIMAL(6, 2)), CONVERT(name, CHAR) FROM items",
    "SELECT ROUND(price, 1), FLOOR(f), CEIL(price), ABS(big), TRUNCATE(price, 0), MOD(id, 2) "
    "FROM items",
    "SELECT POW(id, 2), SQRT(id), EXP(0), LN(id), LOG10(id), PI(), SIGN(big) FROM items",
    "SELECT NOW() IS NOT NULL, CURDATE() IS NOT NULL, CURRENT_TIMESTAMP IS NOT NULL, "
    "UTC_TIMESTAMP() IS NOT NULL",
    "SELECT DATE_FORMAT(d, '%Y-%m'), DATEDIFF(d, '2024-01-01'), DAYNAME(d), MONTH(d), YEAR(d) "
    "FROM items",
    "SELECT DATE_ADD(d, INTERVAL 1 DAY), DATE_SUB(ts, INTERVAL 2 HOUR), LAST_DAY(d), "
    "WEEKDAY(d) FROM items",
    "SELECT STR_TO_DATE('2024-03-01', '%Y-%m-%d'), UNIX_TIMESTAMP('2024-01-01 00:00:00'), "
    "FROM_UNIXTIME(0) IS NOT NULL",
    "SELECT TIMESTAMPDIFF(DAY, d, ts), EXTRACT(YEAR FROM d), TIME_TO_SEC(t), "
    "SEC_TO_TIME(3600) FROM items",
    "SELECT JSON_EXTRACT(doc, '$.k[1]'), JSON_UNQUOTE(JSON_EXTRACT(doc, '$.k')), "
    "JSON_LENGTH(doc) FROM items",
    "SELECT JSON_OBJECT('id', id, 'name', name), JSON_ARRAY(id, name), JSON_VALID(doc) "
    "FROM items",
    "SELECT JSON_ARRAYAGG(name), JSON_OBJECTAGG(name, id) FROM items",
    "SELECT GROUP_CONCAT(name ORDER BY id SEPARATOR ';'), COUNT(*), COUNT(DISTINCT ok) "
    "FROM items",
    "SELECT y, COUNT(*), SUM(x), AVG(x), MIN(n), MAX(n), STDDEV(x) FROM big GROUP BY y "
    "HAVING COUNT(*) > 30 ORDER BY y",
    "SELECT n, ROW_NUMBER() OVER (PARTITION BY y ORDER BY n) FROM big ORDER BY n LIMIT 20",
    "SELECT n, RANK() OVER (ORDER BY y), DENSE_RANK() OVER (ORDER BY y), "
    "NTILE(4) OVER (ORDER BY n) FROM big ORDER BY n LIMIT 10",
    "SELECT n, LAG(x) OVER (ORDER BY n), LEAD(x) OVER (ORDER BY n), "
    "SUM(x) OVER (ORDER BY n ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM big LIMIT 10",
    "SELECT FIRST_VALUE(label) OVER (PARTITION BY y ORDER BY n) FROM big LIMIT 10",
    "SELECT i.name, b.label FROM items AS i JOIN big AS b ON b.n = i.id ORDER BY i.id",
    "WITH cheap AS (SELECT * FROM items WHERE price < 2) SELECT name FROM cheap",
    "SELECT name FROM items WHERE id IN (SELECT n FROM big WHERE y = 1) "
    "OR EXISTS (SELECT 1 FROM big WHERE n = items.id + 100)",
    "SELECT MD5(name), SHA2(name, 256), HEX(raw), TO_BASE64(name), CRC32(name) FROM items",
    "SELECT GREATEST(id, 2), LEAST(id, 2), FIELD(name, 'pear', 'fig'), "
    "FIND_IN_SET(name, 'apple,fig') FROM items",
    "SELECT DATABASE(), VERSION() IS NOT NULL, CURRENT_USER() IS NOT NULL, "
    "CONNECTION_ID() > 0",
    "SELECT FORMAT(big, 2), CHAR_LENGTH(name), REVERSE(name), REPEAT('-', id), "
    "SPACE(2) FROM items",
    "SELECT name LIKE 'p%', REGEXP_REPLACE(name, 'p+', 'P'), REGEXP_SUBSTR(name, '[aeiou]') "
    "FROM items",
    "SELECT * FROM JSON_TABLE('[1, 2, 3]', '$[*]' COLUMNS (v INT PATH '$')) AS jt",
    "SELECT SLEEP(0), BENCHMARK(10, MD5('x'))",
    "SELECT @@version IS NOT NULL, @@session.max_statement_time > 0",
    "SELECT id, name FROM items ORDER BY price DESC, id LIMIT 2 OFFSET 1",
]

@pytest.fixture(scope="module")
def maria_objects(maria_source) -> Iterator[None]:
    """A sequence and two stored functions in the source database, as escape targets."""
    with contextlib.closing(mysql_connect()) as conn, conn.cursor() as cur:
        cur.execute("CREATE SEQUENCE quarry_seq")
        cur.execute(f"CREATE FUNCTION quarry_lock() RETURNS INT RETURN GET_LOCK('{LOCK}', 0)")
        cur.execute("CREATE FUNCTION quarry_wipe() RETURNS INT MODIFIES SQL DATA "
                    "BEGIN DELETE FROM items; RETURN 1; END")
    try:
        yield
    finally:
        with contextlib.closing(mysql_connect()) as conn, conn.cursor() as cur:
            cur.execute("DROP FUNCTION IF EXISTS quarry_lock")
            cur.execute("DROP FUNCTION IF EXISTS quarry_wipe")
            cur.execute("DROP SEQUENCE IF EXISTS quarry_seq")


@pytest.fixture(scope="module")
def bystander(maria_source) -> Iterator[pymysql.Connection]:
    """Another session on the server: the target of the KILL attempts."""
    conn = mysql_connect()
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()


@pytest.fixture(scope="module")
def maria_app(maria_source, maria_ro_source, maria_objects, sqlite_template,
              session_dir) -> Iterator[Flask]:
    """One pooled connection per source, so that every request reuses the session the
    previous one left behind (which must hold nothing)."""
    store = os.path.join(session_dir, "maria-escape-store.db")
    shutil.copy(sqlite_template, store)
    app = create_app({
        "DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir, "TESTING": True,
        "DEMO_SOURCE": False, "SQL_POOL_SIZE": 1, "SQL_TIMEOUT_S": 5.0,
        "DATA_SOURCES": {"maria": maria_source["url"], "mariaro": maria_ro_source["url"],
                         "mariatiny": {"url": maria_source["url"], "max_rows": 1}},
    })
    yield app
    _dispose(app)


@pytest.fixture
def ask(maria_app) -> Callable[..., dict]:
    client = maria_app.test_client()

    def run(sql: str, db: str, **extra) -> dict:
        response = client.post("/api/sql/query",
                               json={"query": sql, "context": {"db": db}, **extra})
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    return run


def _raw(sql: str) -> tuple:
    with contextlib.closing(mysql_connect()) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def fingerprint(bystander: pymysql.Connection) -> tuple:
    """What an escape would change, read back as root with the raw driver."""
    with contextlib.closing(mysql_connect()) as conn, conn.cursor() as cur:
        cur.execute("CHECKSUM TABLE items, big EXTENDED")
        sums = cur.fetchall()
        cur.execute("SELECT GROUP_CONCAT(table_name ORDER BY table_name) "
                    "FROM information_schema.tables WHERE table_schema = %s", (SRC_DB,))
        tables = cur.fetchall()
        cur.execute("SELECT GROUP_CONCAT(routine_name ORDER BY routine_name) "
                    "FROM information_schema.routines WHERE routine_schema = %s", (SRC_DB,))
        routines = cur.fetchall()
        cur.execute("SELECT next_not_cached_value FROM quarry_seq")
        sequence = cur.fetchall()
        cur.execute("SELECT IS_USED_LOCK(%s)", (LOCK,))
        lock = cur.fetchall()
        cur.execute("SELECT COUNT(*) FROM mysql.user WHERE user = 'evil'")
        users = cur.fetchall()
        cur.execute(f"SHOW GRANTS FOR '{RO_ROLE}'@'%'")
        grants = cur.fetchall()
        cur.execute("SELECT @@global.max_connections, @@global.read_only, "
                    "@@global.general_log, @@global.max_statement_time, @@global.sql_mode")
        settings = cur.fetchall()
    with bystander.cursor() as cur:  # raises if a KILL got through
        cur.execute("SELECT 1")
        alive = cur.fetchall()
    files = [path for path in EVIL_FILES if os.path.exists(path)]
    return sums, tables, routines, sequence, lock, users, grants, settings, alive, files


def session_leftovers(ask: Callable[..., dict], db: str) -> list:
    """The pooled session, read through the service: no variable, setting or counter left."""
    body = ask("SELECT @evil, @@session.sql_mode = @@global.sql_mode, "
               "@@session.character_set_client, @@session.autocommit, @@in_transaction",
               db)
    assert body["type"] == "table", body
    return body["data"]


def _fill(statement: str, bystander: pymysql.Connection) -> str:
    return statement.format(evil=EVIL, lock=LOCK, victim=bystander.thread_id(), db=SRC_DB,
                            ro=RO_ROLE)


# Refused by the gate, before anything reaches the server.
# UNSUPPORTED: a MindsDB object Quarry does not have (CREATE VIEW) is refused by name.
# NOT_FOUND: USE is Quarry's own statement (the answer's context), never sent to the server;
# "mysql" names no project or data source here.
REFUSED = (ErrorCode.SYNTAX, ErrorCode.MULTIPLE_STATEMENTS, ErrorCode.READ_ONLY,
           ErrorCode.FORBIDDEN_FUNCTION, ErrorCode.UNSUPPORTED, ErrorCode.NOT_FOUND)


def test_corpus_sizes():
    assert len(set(ATTEMPTS)) == len(ATTEMPTS) >= 60
    assert len(set(LEGIT)) == len(LEGIT) >= 30


@pytest.mark.parametrize("role", list(ROLES))
@pytest.mark.parametrize("statement", ATTEMPTS)
def test_escape_attempt_is_refused_and_changes_nothing(ask, bystander, role, statement):
    db = ROLES[role]
    before = fingerprint(bystander)
    clean = session_leftovers(ask, db)

    body = ask(_fill(statement, bystander), db)

    assert body["type"] == "error", (statement, body)
    assert body["error_code"] in REFUSED, body
    assert "[SQL:" not in body["error_message"]
    assert fingerprint(bystander) == before, statement
    assert session_leftovers(ask, db) == clean
    assert clean[0][0] is None  # no @evil


@pytest.mark.parametrize("role", list(ROLES))
@pytest.mark.parametrize("statement", NEUTRALISED)
def test_executable_comments_never_reach_the_server(ask, bystander, role, statement):
    before = fingerprint(bystander)
    body = ask(_fill(statement, bystander), ROLES[role])
    assert body["type"] in ("table", "error"), body
    assert fingerprint(bystander) == before


@pytest.mark.parametrize("role", list(ROLES))
def test_functions_are_refused_by_name(ask, role):
    db = ROLES[role]
    for statement, name in [("SELECT GET_LOCK('x', 0)", "GET_LOCK"),
                            ("SELECT load_file('/etc/hostname')", "LOAD_FILE"),
                            ("SELECT quarry_wipe()", "QUARRY_WIPE"),
                            ("SELECT NEXTVAL(quarry_seq)", "NEXTVAL")]:
        body = ask(statement, db)
        assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, body
        assert f"{name}()" in body["error_message"], body
    body = ask(f"SELECT {SRC_DB}.quarry_lock()", db)
    assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION
    assert "named with a database" in body["error_message"]


@pytest.mark.parametrize("role", list(ROLES))
@pytest.mark.parametrize("statement", LEGIT)
def test_ordinary_queries_still_answer(ask, role, statement):
    body = ask(statement, ROLES[role])
    assert body["type"] == "table", (statement, body)
    raw = _raw(statement)
    assert len(body["data"]) == len(raw) and len(body["column_names"]) == len(raw[0])


# D6: a statement cut by max_statement_time is never answered as a result.

@pytest.mark.parametrize("role", list(ROLES))
def test_benchmark_past_the_limit_is_the_time_limit_error(ask, role):
    started = time.monotonic()
    body = ask("SELECT BENCHMARK(2000000000, MD5('x'))", ROLES[role], timeout_s=2)
    assert body["type"] == "error" and body["error_code"] == ErrorCode.TIME_LIMIT, body
    assert "time limit of 2 s" in body["error_message"]
    assert time.monotonic() - started < 4
    assert ask("SELECT COUNT(*) FROM items", ROLES[role])["data"] == [[3]]


@pytest.mark.parametrize("statement", [
    "SELECT SLEEP(5)",
    "SELECT SLEEP(5) FROM items",
    "SELECT (SELECT BENCHMARK(2000000000, MD5('x')))",
    "SELECT BENCHMARK(2000000000, MD5('x')) UNION ALL SELECT 5",
    "SELECT 5 UNION ALL SELECT BENCHMARK(2000000000, MD5('x'))",
    "SELECT BENCHMARK(2000000000, MD5(id)) FROM items",
])
def test_statements_cut_by_the_limit_answer_the_time_limit_error(ask, statement):
    body = ask(statement, "maria", timeout_s=0.5)
    assert body["type"] == "error" and body["error_code"] == ErrorCode.TIME_LIMIT, body


def test_a_truncated_stream_that_took_the_whole_limit_is_not_trusted(ask):
    # max_rows 1: the second row makes the answer truncated and the connection is dropped
    # with the stream unread, so the server cannot be asked whether it cut the statement.
    body = ask("SELECT BENCHMARK(2000000000, MD5('x')) UNION ALL SELECT 1 UNION ALL SELECT 2",
               "mariatiny", timeout_s=0.5)
    assert body["error_code"] == ErrorCode.TIME_LIMIT, body
    fast = ask("SELECT 1 UNION ALL SELECT 2", "mariatiny", timeout_s=0.5)
    assert fast["data"] == [[1]] and fast["truncated"] is True


def test_a_statement_that_ends_just_inside_the_limit_is_a_result(ask):
    # Long enough that the server is asked whether it cut the statement (it did not).
    body = ask("SELECT SLEEP(1.85), 'done'", "maria", timeout_s=2)
    assert body["type"] == "table" and body["data"] == [[0, "done"]], body


# No session state outlives a request. The gate refuses every road to session state found so
# far, so these statements go straight to the execution layer (as a statement the gate does
# not yet know about would): whatever they leave must be gone by the next request, on the
# same pooled connection (pool of one, same CONNECTION_ID).

def _run(app: Flask, db: str, sql: str, timeout_s: float = 5.0) -> list:
    with app.app_context():
        result = run_statement(current_sources().require(db), sql, None, [],
                               timeout_s=timeout_s, max_rows=100)
    return [list(row) for row in result.rows]


@pytest.mark.parametrize("role", list(ROLES))
def test_a_user_lock_taken_in_a_request_is_released_after_it(maria_app, role):
    db = ROLES[role]
    (taken, connection_id), = _run(maria_app, db, f"SELECT GET_LOCK('{LOCK}', 0), "
                                                  f"CONNECTION_ID()")
    assert taken == 1
    # Read back from another session: nobody holds the lock any more…
    assert _raw(f"SELECT IS_USED_LOCK('{LOCK}')") == ((None,),)
    # …and the next request still runs on the very same connection: it was reset, not
    # replaced.
    assert _run(maria_app, db, "SELECT CONNECTION_ID()") == [[connection_id]]


@pytest.mark.parametrize("role", list(ROLES))
def test_variables_settings_and_prepared_statements_do_not_outlive_a_request(maria_app, role):
    db = ROLES[role]
    (connection_id,), = _run(maria_app, db, "SELECT CONNECTION_ID()")
    first = _run(maria_app, db, "SELECT @@session.sql_mode, @@session.character_set_client, "
                                "@@session.collation_connection, @@session.autocommit, "
                                "@@session.time_zone, 'é€😀'")
    _run(maria_app, db, "SELECT @quarry_v := 5")
    assert _run(maria_app, db, "SELECT @quarry_v") == [[None]]
    _run(maria_app, db, "SET SESSION sql_mode = 'ANSI_QUOTES'")
    _run(maria_app, db, "SET SESSION time_zone = '+05:00'")
    _run(maria_app, db, "PREPARE quarry_p FROM 'SELECT 1'")
    with pytest.raises(SqlError):
        _run(maria_app, db, "EXECUTE quarry_p")
    # Back to the settings the connection had right after connecting (PyMySQL's SET NAMES
    # and autocommit are made again after each reset).
    assert _run(maria_app, db, "SELECT @@session.sql_mode, @@session.character_set_client, "
                               "@@session.collation_connection, @@session.autocommit, "
                               "@@session.time_zone, 'é€😀'") == first
    assert _run(maria_app, db, "SELECT CONNECTION_ID()") == [[connection_id]]


def test_temporary_tables_cannot_even_be_made(maria_app):
    # MariaDB refuses them inside READ ONLY transactions (MySQL would allow them).
    with pytest.raises(SqlError) as caught:
        _run(maria_app, "maria", "CREATE TEMPORARY TABLE quarry_tmp AS SELECT 1 AS a")
    assert caught.value.code == ErrorCode.READ_ONLY


def test_the_time_limit_is_set_again_after_each_reset(maria_app):
    # The reset puts max_statement_time back to the server's default (no limit): the limit
    # must be set again every time, not remembered from before the reset.
    for limit in (0.7, 0.7, 1.5, 0.7):
        assert _run(maria_app, "maria", "SELECT @@session.max_statement_time",
                    timeout_s=limit) == [[limit]]
    for _ in range(2):
        started = time.monotonic()
        with pytest.raises(SqlError) as caught:
            _run(maria_app, "maria", "SELECT SLEEP(3)", timeout_s=0.5)
        assert caught.value.code == ErrorCode.TIME_LIMIT
        assert time.monotonic() - started < 2


# The allow-list against the real server: calls of many built-ins, a family per statement,
# pass the gate under the name sqlglot sends them as and run.
FAMILIES = {
    "string": "ascii('a'), bin(5), bit_length('a'), char(65), char_length('ab'), chr(65), "
              "concat('a', 'b'), concat_ws(',', 'a', 'b'), elt(1, 'a', 'b'), "
              "export_set(5, 'Y', 'N', ',', 4), field('b', 'a', 'b'), "
              "find_in_set('b', 'a,b'), format(1234.5, 1), from_base64('YQ=='), hex('a'), "
              "insert('abc', 2, 1, 'x'), instr('abc', 'b'), lcase('A'), left('abc', 2), "
              "length('abc'), lengthb('abc'), locate('b', 'abc'), lpad('a', 3, 'x'), "
              "make_set(1, 'a', 'b'), mid('abc', 2, 1), natural_sort_key('a1'), "
              "octet_length('a'), ord('a'), position('b' IN 'abc'), quote('a'), "
              "regexp_instr('abc', 'b'), regexp_substr('abc', 'b'), repeat('a', 3), "
              "reverse('abc'), rpad('a', 3, 'x'), sformat('{}', 1), soundex('Robert'), "
              "space(2), strcmp('a', 'b'), substring_index('a.b.c', '.', 2), "
              "to_base64('a'), trim(LEADING 'x' FROM 'xxa'), ucase('a'), unhex('61'), "
              "weight_string('a'), extractvalue('<a>1</a>', '/a'), "
              "updatexml('<a>1</a>', '/a', '<b/>')",
    "numeric": "abs(-1), acos(1), asin(0), atan(1), atan2(1, 2), bit_count(7), ceiling(1.2), "
               "conv(10, 10, 2), cos(0), cot(1), crc32c('a'), degrees(1), greatest(1, 2), "
               "least(1, 2), log(2, 8), log2(8), oct(8), power(2, 3), radians(1), rand(3), "
               "sign(-1), sin(0), tan(0), 7 DIV 2, 7 % 3",
    "datetime": "adddate('2024-01-01', 1), addtime('10:00:00', '01:00:00'), "
                "add_months('2024-01-31', 1), "
                "convert_tz('2024-01-01 00:00:00', '+00:00', '+01:00'), curtime(), "
                "date('2024-01-01 10:00:00'), dayofmonth('2024-01-02'), "
                "dayofweek('2024-01-02'), dayofyear('2024-01-02'), from_days(738000), "
                "get_format(DATE, 'ISO'), hour('10:11:12'), localtimestamp, "
                "makedate(2024, 32), maketime(1, 2, 3), microsecond('10:11:12.5'), "
                "minute('10:11:12'), monthname('2024-02-01'), now(3), "
                "period_add(202401, 2), period_diff(202403, 202401), quarter('2024-05-01'), "
                "second('10:11:12'), subdate('2024-01-02', 1), "
                "subtime('10:00:00', '01:00:00'), sysdate(), time('2024-01-01 10:11:12'), "
                "time_format('10:11:12', '%H'), timediff('10:00:00', '09:00:00'), "
                "timestamp('2024-01-01'), timestampadd(DAY, 1, '2024-01-01'), "
                "to_days('2024-01-01'), to_seconds('2024-01-01'), utc_time(), "
                "week('2024-01-09'), weekofyear('2024-01-09'), yearweek('2024-01-09')",
    "json": "json_array_append('[1]', '$', 2), json_array_insert('[1]', '$[0]', 2), "
            "json_compact('[1, 2]'), json_contains('[1]', '1'), "
            "json_contains_path('{\"a\": 1}', 'one', '$.a'), json_depth('[1]'), "
            "json_detailed('[1]'), json_equals('[1]', '[1]'), "
            "json_exists('{\"a\": 1}', '$.a'), json_insert('{}', '$.a', 1), "
            "json_keys('{\"a\": 1}'), json_loose('[1]'), json_merge('[1]', '[2]'), "
            "json_merge_patch('{}', '{\"a\": 1}'), json_merge_preserve('[1]', '[2]'), "
            "json_normalize('[1]'), json_overlaps('[1]', '[1]'), json_pretty('[1]'), "
            "json_query('{\"a\": [1]}', '$.a'), json_quote('a'), "
            "json_remove('[1, 2]', '$[0]'), json_replace('{\"a\": 1}', '$.a', 2), "
            "json_search('[\"a\"]', 'one', 'a'), json_set('{}', '$.a', 1), "
            "json_type('[1]'), json_value('{\"a\": 1}', '$.a')",
    "crypto": "aes_decrypt(aes_encrypt('a', 'k'), 'k'), uncompress(compress('a')), "
              "uncompressed_length(compress('a')), sha('a'), sha1('a'), encode('a', 'k'), "
              "decode('a', 'k'), length(random_bytes(8))",
    "info": "charset('a'), coercibility('a'), collation('a'), current_role(), schema(), "
            "found_rows(), row_count(), session_user(), system_user(), user(), "
            "length(uuid()), uuid_short() > 0, length(sys_guid())",
    "network": "inet_aton('1.2.3.4'), inet_ntoa(1), inet6_ntoa(inet6_aton('::1')), "
               "is_ipv4('1.2.3.4'), is_ipv4_compat(inet6_aton('::1.2.3.4')), "
               "is_ipv4_mapped(inet6_aton('::ffff:1.2.3.4')), is_ipv6('::1'), "
               "column_json(column_create('a', 1)), "
               "column_exists(column_create('a', 1), 'a'), "
               "column_list(column_create('a', 1)), column_check(column_create('a', 1))",
    "spatial": "st_astext(point(1, 2)), st_x(point(1, 2)), st_y(point(1, 2)), "
               "st_asgeojson(st_geomfromtext('POINT(1 2)')), "
               "st_distance(point(0, 0), point(3, 4)), "
               "st_contains(st_geomfromtext('POLYGON((0 0,0 2,2 2,2 0,0 0))'), point(1, 1)), "
               "mbrcontains(st_geomfromtext('POLYGON((0 0,0 2,2 2,2 0,0 0))'), point(1, 1)), "
               "st_srid(point(1, 2)), st_astext(linestring(point(0, 0), point(1, 1)))",
    "aggregate": "std(x), stddev_pop(x), stddev_samp(x), variance(x), var_pop(x), "
                 "var_samp(x), bit_and(n), bit_or(n), bit_xor(n)",
}


@pytest.mark.parametrize("role", list(ROLES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_built_in_functions_of_every_family_run(ask, role, family):
    source = "" if family != "aggregate" else " FROM big"
    body = ask(f"SELECT {FAMILIES[family]}{source}", ROLES[role])
    assert body["type"] == "table", (family, body)
    assert len(body["column_names"]) == len(body["data"][0]) > 5
