"""Aggregates over predictions (``SELECT m.y, count(*) FROM t JOIN p.m AS m GROUP BY m.y``):
the engine runs the statement over the predicted rows; every answer is checked against the
plain JOIN's rows, aggregated here."""

from __future__ import annotations

from collections import Counter
from statistics import mean

import pytest

from tests.models.conftest import IRIS_SQL, create, wait_for


@pytest.fixture
def iris_model(p1):
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    assert wait_for(p1, "m")["status"] == "complete"
    return p1


def _sql(client, query: str) -> dict:
    return client.post("/api/sql/query", json={"query": query}).get_json()


def test_group_by_having_and_functions_over_predictions(iris_model):
    rows = _sql(iris_model, "SELECT t.sepal_length, t.species AS truth, m.species "
                            "FROM demo.iris AS t JOIN p1.m AS m")["data"]
    assert len(rows) == 150
    counts = Counter(r[2] for r in rows)
    body = _sql(iris_model, "SELECT m.species, count(*) AS n FROM demo.iris AS t "
                            "JOIN p1.m AS m GROUP BY m.species ORDER BY n DESC, m.species")
    assert body["type"] == "table", body
    assert body["column_names"] == ["species", "n"]
    assert body["data"] == sorted([[k, v] for k, v in counts.items()],
                                  key=lambda r: (-r[1], r[0]))
    # t.species and m.species stay apart; a bare name means the model's (as in a plain
    # JOIN); HAVING, round() and avg() of a table column per predicted class.
    body = _sql(iris_model, "SELECT species, t.species AS truth, count(*), "
                            "round(avg(t.sepal_length), 3) AS mean_length FROM demo.iris AS t "
                            "JOIN p1.m AS m GROUP BY species, t.species HAVING count(*) > 1 "
                            "ORDER BY species, truth")
    assert body["type"] == "table", body
    assert body["column_names"] == ["species", "truth", "count(*)", "mean_length"]
    pairs = Counter((r[2], r[1]) for r in rows)
    want = [[p, t, n, round(mean(r[0] for r in rows if (r[2], r[1]) == (p, t)), 3)]
            for (p, t), n in sorted(pairs.items()) if n > 1]
    assert body["data"] == want
    # An aggregate without GROUP BY, a WHERE on the table pushed down as before.
    body = _sql(iris_model, "SELECT count(*) AS n, count(DISTINCT m.species) AS classes "
                            "FROM demo.iris AS t JOIN p1.m AS m WHERE t.sepal_length > 7")
    assert body["data"] == [[sum(1 for r in rows if r[0] > 7),
                             len({r[2] for r in rows if r[0] > 7})]]


# Refused before the engine runs anything: one model serves the three (each trained model is
# seconds of CPU).
REFUSED = [
    ("SELECT current_setting('temp_directory') FROM demo.iris AS t JOIN p1.m AS m "
     "GROUP BY m.species", "CURRENT_SETTING() is not allowed"),
    ("SELECT m.species, count(*) FROM demo.iris AS t JOIN p1.m AS m GROUP BY m.species "
     "HAVING count(*) > (SELECT count(*) FROM demo.wine)", "joined rows"),
    ("SELECT m.nothing, count(*) FROM demo.iris AS t JOIN p1.m AS m GROUP BY m.nothing",
     "Column not found"),
]


def test_what_the_engine_may_not_run_over_predictions_is_refused(iris_model):
    for query, words in REFUSED:
        body = _sql(iris_model, query)
        assert body["type"] == "error" and words in body["error_message"], (query, body)
