"""A statement sent again is read again: the MindsDB parser's trees are kept per text
(mindsdb/parser.parse_sql_cached), and a JOIN prediction changes its tree while it runs
(the OFFSET goes to the data source, the WHERE is split), so each use needs its own copy."""

from __future__ import annotations

from tests.models.conftest import IRIS_SQL, create


def test_a_join_prediction_answers_the_same_when_sent_again(p1):
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    query = ("SELECT t.sepal_length, m.species FROM demo.iris AS t JOIN p1.m AS m "
             "WHERE t.sepal_length > 7 LIMIT 2 OFFSET 3")
    answers = [p1.post("/api/sql/query", json={"query": query}).get_json()
               for _ in range(3)]
    assert answers[0]["type"] == "table" and len(answers[0]["data"]) == 2, answers[0]
    assert [a["data"] for a in answers[1:]] == [answers[0]["data"]] * 2
    everything = p1.post("/api/sql/query", json={"query": query.replace(
        " LIMIT 2 OFFSET 3", "")}).get_json()
    assert answers[0]["data"] == everything["data"][3:5]
