"""MindsDB objects Quarry does not have (ML engines, triggers, chatbots) say so in SQL
(UNSUPPORTED, 16) instead of "Table 'triggers' names no data source". Jobs are served
(tests/jobs/)."""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode

WORDS = ("ML_ENGINES", "TRIGGERS", "CHATBOTS")

STATEMENTS = [
    ("SHOW ML_ENGINES", "ML_ENGINES"),
    ("CREATE ML_ENGINE e1 FROM openai USING api_key = 'sk-x'", "ML_ENGINES"),
    ("DROP ML_ENGINE e1", "ML_ENGINES"),
    ("SHOW TRIGGERS", "TRIGGERS"),
    ("CREATE TRIGGER t1 ON demo.iris (SELECT 1)", "TRIGGERS"),
    ("CREATE TRIGGER t1 ON", "TRIGGERS"),  # unreadable, but clearly about a trigger
    ("DROP TRIGGER t1", "TRIGGERS"),
    ("SHOW CHATBOTS", "CHATBOTS"),
    ("CREATE CHATBOT c1 USING database = 'demo', agent = 'a1'", "CHATBOTS"),
    ("UPDATE CHATBOT c1 SET agent = 'a2'", "CHATBOTS"),
    ("DROP CHATBOT c1", "CHATBOTS"),
]

TABLES = [
    ("SELECT * FROM mindsdb.triggers", None, "TRIGGERS"),
    ("SELECT * FROM mindsdb.chatbots", None, "CHATBOTS"),
    ("SELECT * FROM information_schema.ml_engines", None, "ML_ENGINES"),
    ("SELECT * FROM information_schema.triggers", None, "TRIGGERS"),
    ("SELECT * FROM information_schema.chatbots", None, "CHATBOTS"),
    ("SELECT * FROM ml_engines", "information_schema", "ML_ENGINES"),
]


def _refused(body: dict, word: str) -> None:
    assert body["type"] == "error", body
    assert body["error_code"] == ErrorCode.UNSUPPORTED, body
    assert body["error_message"].startswith(f"{word} are not supported by Quarry"), body
    assert body["column_names"] == []


@pytest.mark.parametrize(("sql", "word"), STATEMENTS)
def test_statements_about_missing_objects_say_they_are_not_supported(query, sql, word):
    _refused(query(sql), word)
    _refused(query(sql, db="mindsdb"), word)


@pytest.mark.parametrize(("sql", "db", "word"), TABLES)
def test_tables_of_missing_objects_say_they_are_not_supported(query, sql, db, word):
    _refused(query(sql, db=db), word)


def test_every_missing_object_is_covered_by_statements_and_tables():
    assert {word for _sql, word in STATEMENTS} == set(WORDS)
    assert {word for *_rest, word in TABLES} == set(WORDS)
    for word in WORDS:
        assert any(sql.startswith("SHOW") for sql, w in STATEMENTS if w == word)
        assert any(sql.startswith("CREATE") for sql, w in STATEMENTS if w == word)
        assert any(sql.startswith("DROP") for sql, w in STATEMENTS if w == word)


def test_a_data_source_table_of_the_same_name_is_still_data(query, lite_source):
    # "jobs" in a data source is the source's business: the data path answers.
    body = query("SELECT * FROM lite.jobs")
    assert body["error_code"] == ErrorCode.UNKNOWN_TABLE, body
    assert "no such table: jobs" in body["error_message"]
    body = query("SELECT * FROM views", db="pg")
    assert body["error_code"] == ErrorCode.UNKNOWN_TABLE, body


@pytest.mark.parametrize("sql", ["ALTER KNOWLEDGE_BASE kb1 USING reranking_model = false",
                                 "EVALUATE KNOWLEDGE_BASE kb1 USING test_table = demo.t"])
def test_knowledge_base_statements_quarry_lacks_say_so(query, sql):
    body = query(sql)
    assert body["error_code"] == ErrorCode.UNSUPPORTED, body
    assert "is not supported" in body["error_message"]
