"""Messages a newcomer can act on: syntax errors in SQL words (line, column, token), numbers
too large, and statements that name no data source (issue 9 §3)."""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode

from ..helpers import assert_problem

# What no message may show: the parsers' own insides.
INTERNALS = ("<class", "sqlglot", "Expecting", "expressions.", "Token", "Traceback", "^^^",
             "SENTINEL", "None")

# (statement, context db, line, column, token named — None: the end of the statement,
#  words the reason must hold). Columns count characters from 1, where the token starts.
CORPUS = [
    # keywords mistyped
    ("SELEC * FROM demo.iris", None, 1, 1, "SELEC", ["did you mean SELECT?"]),
    ("SELEC species", None, 1, 1, "SELEC", ["did you mean SELECT?"]),
    ("SELECT * FORM demo.iris", None, 1, 15, "demo", ["did you mean FROM", "'FORM'",
                                                      "column 10"]),
    ("SELECT * FROM demo.iris WHRE species = 'setosa'", None, 1, 30, "species",
     ["did you mean WHERE"]),
    ("SELECT * FROM demo.iris LIMT 3", None, 1, 30, "3", ["did you mean LIMIT"]),
    ("UPDTE items SET name = 'x'", "lite", 1, 1, "UPDTE", ["cannot start with"]),
    # unclosed quotes, comments and parentheses
    ("SELECT species FROM demo.iris WHERE species = 'setosa", None, 1, 47, "'setosa",
     ["string", "never closed"]),
    ('SELECT "species FROM demo.iris', None, 1, 8, '"species', ["never closed"]),
    ("SELECT `name FROM items", "maria", 1, 8, "`name", ["never closed"]),
    ("SELECT * FROM demo.iris /* a note", None, 1, 25, "/* a note", ["comment",
                                                                     "never closed"]),
    ("SELECT count(* FROM demo.iris", None, 1, 16, "FROM",
     ["')' is missing", "'(' at line 1, column 13"]),
    ("SELECT * FROM (SELECT * FROM demo.iris", None, 1, 35, "iris",
     ["')' is missing", "column 15"]),
    ("SELECT * FROM demo.iris WHERE (species = 'x'", None, 1, 42, "'x'", ["')' is missing"]),
    # trailing commas and dangling words
    ("SELECT species, FROM demo.iris", None, 1, 15, ",", ["trailing comma", "'FROM'"]),
    ("SELECT * FROM demo.iris WHERE species IN ('setosa',)", None, 1, 51, ",",
     ["trailing comma", "')'"]),
    ("SELECT name, price, FROM items", "pg", 1, 19, ",", ["trailing comma"]),
    ("SELECT species,", None, 1, 15, ",", ["trailing comma", "the end"]),
    ("SELECT * FROM demo.iris GROUP BY", None, 1, 25, "GROUP BY", ["at least one column"]),
    ("SELECT * FROM demo.iris AS a JOIN demo.wine AS b ON", None, 1, 50, "ON",
     ["join condition"]),
    # stray and missing tokens
    ("SELECT * FROM demo.iris)", None, 1, 24, ")", ["does not fit"]),
    ("SELECT 1 2 3", None, 1, 10, "2", ["does not fit"]),
    ("SELECT * FROM demo.iris WHERE", None, 1, 25, "WHERE", ["needs a condition"]),
    ("SELECT * FROM demo.iris LIMIT", None, 1, 25, "LIMIT", ["needs a number"]),
    ("SELECT sepal_length + FROM demo.iris", None, 1, 23, "FROM", ["a value is missing"]),
    ("SELECT * FROM demo.iris WHERE sepal_length BETWEEN 1", None, 1, 52, "1",
     ["BETWEEN low AND high"]),
    ("SELECT CASE WHEN species = 'setosa' THEN 1 FROM demo.iris", None, 1, 42, "1",
     ["END"]),
    ("SELECT CAST(sepal_length AS) FROM demo.iris", None, 1, 28, ")", ["TYPE"]),
    ("SELECT * FROM items JOIN", "pg", 1, 21, "JOIN", ["table name"]),
    ("WITH t AS SELECT 1 SELECT * FROM t", None, 1, 11, "SELECT", ["'(' is missing"]),
    # the error on line 3 of a multi-line statement
    ("SELECT species,\n       count(*) AS n\nFROM demo.iris WHERE n = = 1 GROUP BY species",
     None, 3, 26, "=", ["a value is missing"]),
    ("SELECT *\n  FROM items\n  WHERE id = 1 ORDR BY id", "maria", 3, 16, "ORDR",
     ["does not fit", "did you mean ORDER?"]),
    # unicode: columns count characters, not bytes
    ("SELECT 'ünïcödé', naïve FROM demo.iris WHERE ö = 'ß", None, 1, 50, "'ß",
     ["never closed"]),
    ("SELECT 'ünïcödé' ü ö FROM demo.iris", None, 1, 20, "ö", ["does not fit"]),
    # MindsDB statements (mindsdb_sql_parser) read the same way
    ("CREATE MODEL mindsdb.m FROM demo (SELECT * FROM iris) PREDICT", None, 1, 62, None,
     ["ends too early", "a name"]),
    ("CREATE MODEL mindsdb.m\nFROM demo\n(SELECT * FROM iris)\nPREDICTT species", None,
     4, 1, "PREDICTT", ["did you mean PREDICT?"]),
    ("CREATE MODEL mindsdb.m FROM demo (SELECT 'x FROM iris) PREDICT y", None, 1, 42, "'x",
     ["never closed"]),
    ("DROP SKILL", None, 1, 11, None, ["ends too early"]),
    ("SHOW MODELS FROM", None, 1, 17, None, ["ends too early"]),
    ("DESCRIBE mindsdb.m WHERE", None, 1, 20, "WHERE", ["does not fit"]),
]


@pytest.mark.parametrize(("sql", "db", "line", "col", "near", "words"), CORPUS,
                         ids=[f"{i}" for i in range(len(CORPUS))])
def test_syntax_error_names_line_column_and_token(query, sql, db, line, col, near, words):
    body = query(sql, db=db)
    assert body["type"] == "error" and body["error_code"] == ErrorCode.SYNTAX, body
    message = body["error_message"]
    where = f"Syntax error at line {line}, column {col}"
    if near is None:
        where += " (the end of the statement)"
    else:  # a token holding a ' is shown between double quotes
        where += f' near "{near}' if "'" in near else f" near '{near}"
    assert message.startswith(where), (where, message)
    for word in words:
        assert word in message, (word, message)
    for internal in INTERNALS:
        assert internal not in message, (internal, message)


def test_the_corpus_is_broad():
    assert len(CORPUS) >= 15
    assert {line for _s, _d, line, *_ in CORPUS} >= {1, 3, 4}
    assert {db for _s, db, *_ in CORPUS} >= {None, "pg", "maria", "lite"}


def test_a_word_that_is_no_statement_is_named_by_the_read_only_refusal(query):
    # sqlglot reads LISTEN x as a column and its alias; the answer names the word.
    body = query("LISTEN evil", db="pg")
    assert body["error_code"] == ErrorCode.READ_ONLY
    assert "LISTEN is refused" in body["error_message"], body


def test_create_model_over_rest_reads_its_syntax_error_the_same_way(client):
    response = client.post("/api/projects/mindsdb/models", json={
        "query": "CREATE MODEL mindsdb.m\nFROM demo (SELECT * FROM iris)\nPREDICTT species"})
    body = assert_problem(response, 422)  # a body of the right shape; its text is no statement
    assert "Syntax error at line 3, column 1 near 'PREDICTT'" in body["detail"], body
    assert "did you mean PREDICT?" in body["detail"]
    assert not any(internal in body["detail"] for internal in INTERNALS), body


# --- numbers too large ----------------------------------------------------------------------

TOO_LARGE = "99999999999999999999999"


@pytest.mark.parametrize(("db", "table"), [("demo", "iris"), ("lite", "items"),
                                           ("pg", "items"), ("maria", "items")])
def test_limit_and_offset_beyond_64_bits_say_the_number_is_too_large(query, db, table):
    for sql, clause in ((f"SELECT * FROM {table} LIMIT {TOO_LARGE}", "LIMIT"),
                        (f"SELECT * FROM {table} LIMIT 1 OFFSET {TOO_LARGE}", "OFFSET"),
                        (f"SELECT * FROM {table} LIMIT 9223372036854775808", "LIMIT")):
        body = query(sql, db=db)
        assert body["type"] == "error" and body["error_code"] == ErrorCode.OUT_OF_RANGE, body
        assert f"in {clause} is too large" in body["error_message"], body
        assert "datatype mismatch" not in body["error_message"]
    # The largest 64-bit count is a count like any other.
    body = query(f"SELECT * FROM {table} LIMIT 9223372036854775807", db=db)
    assert body["type"] == "table" and len(body["data"]) >= 3, body


@pytest.mark.parametrize("db", ["lite", "pg", "maria"])
def test_a_limit_parameter_beyond_64_bits_is_too_large(query, db):
    body = query("SELECT * FROM items LIMIT :n", db=db, params={"n": 10**25})
    assert body["error_code"] == ErrorCode.OUT_OF_RANGE, body
    assert "Parameter :n" in body["error_message"] and "too large" in body["error_message"]
    assert query("SELECT * FROM items LIMIT :n", db=db, params={"n": 2})["data"].__len__() == 2


@pytest.mark.parametrize(("db", "sql", "words"), [
    ("lite", "SELECT abs(-9223372036854775807 - 1) FROM items", ["integer overflow"]),
    ("pg", "SELECT 9223372036854775807::bigint + 1 FROM items", ["bigint out of range"]),
    ("maria", "SELECT 9223372036854775807 + 1 FROM items", ["BIGINT", "out of range"]),
])
def test_arithmetic_overflow_in_the_database_is_out_of_range(query, db, sql, words):
    body = query(sql, db=db)
    assert body["type"] == "error" and body["error_code"] == ErrorCode.OUT_OF_RANGE, body
    assert body["error_message"].startswith(f"A number is too large on data source '{db}'")
    for word in words:
        assert word in body["error_message"], body


def test_an_integer_parameter_sqlite_cannot_hold_is_out_of_range(query):
    body = query("SELECT * FROM items WHERE id = :id", db="lite", params={"id": 10**20})
    assert body["error_code"] == ErrorCode.OUT_OF_RANGE, body
    assert "beyond 64 bits" in body["error_message"] and "Python" not in body["error_message"]


# --- statements that name no data source ------------------------------------------------------

def test_a_statement_without_a_table_says_so_not_data_source_empty(query):
    body = query("SELECT nosuch")
    assert body["error_code"] == ErrorCode.QUERY_FAILED, body
    message = body["error_message"]
    assert "data source ''" not in message and "''" not in message
    assert "no such column: nosuch" in message  # what was looked for
    assert "names no table" in message and "context.db" in message
    overflow = query("SELECT abs(-9223372036854775807 - 1)")
    assert overflow["error_code"] == ErrorCode.OUT_OF_RANGE, overflow
    assert "without a data source" in overflow["error_message"], overflow
    assert "''" not in overflow["error_message"]
