"""The federation engine (DuckDB) runs only the functions on its allow-list: none that reads
its settings, files or environment, whether the statement reads several data sources or an
uploaded file; the ordinary scalar, aggregate and window functions still work."""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode

from .test_files_join import uploaded  # noqa: F401 - a fixture

JOINED = " FROM pg.orders o JOIN maria.customers c ON c.id = o.customer_id"

REFUSED = [
    ("current_setting('temp_directory')", "current_setting"),
    ("getenv('HOME')", "getenv"),
    ("getvariable('x')", "getvariable"),
    ("version()", "version"),
    ("current_database()", "current_database"),
    ("(SELECT count(*) FROM duckdb_settings())", "duckdb_settings"),
    ("(SELECT count(*) FROM duckdb_extensions())", "duckdb_extensions"),
    ("(SELECT count(*) FROM duckdb_temporary_files())", "duckdb_temporary_files"),
    ("(SELECT count(*) FROM pragma_version())", "pragma_version"),
    ("(SELECT count(*) FROM pragma_platform())", "pragma_platform"),
    ("(SELECT count(*) FROM read_text('/etc/hostname'))", "read_text"),
    ("(SELECT count(*) FROM read_blob('/etc/hostname'))", "read_blob"),
    ("(SELECT count(*) FROM glob('/*'))", "glob"),
    ("(SELECT count(*) FROM query('SELECT 1'))", "query"),
    ("setseed(0.5)", "setseed"),
]


@pytest.mark.parametrize(("call", "name"), REFUSED)
def test_a_function_that_reads_the_engine_is_refused_naming_it(uploaded, fquery, call,  # noqa: F811
                                                               name):
    for sql in (f"SELECT {call} AS v, o.id{JOINED} LIMIT 1",
                f"SELECT {call} AS v FROM files.fcustomers LIMIT 1"):
        body = fquery(sql)
        assert body["type"] == "error", (sql, body)
        assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, body
        assert f"{name.upper()}()" in body["error_message"], body


def test_the_engine_temp_path_is_not_in_any_answer(uploaded, fquery, fed_app):  # noqa: F811
    body = fquery(f"EXPLAIN SELECT current_setting('temp_directory') AS t{JOINED}")
    assert body["error_code"] == ErrorCode.FORBIDDEN_FUNCTION, body
    assert "federation-spill" not in str(body)


ALLOWED = [
    "lower(c.name)", "upper(c.name)", "round(o.amount, 1)", "date_trunc('month', o.placed)",
    "coalesce(c.score, 0)", "cast(o.qty AS VARCHAR)", "o.qty::text", "ifnull(c.score, 1)",
    "nullif(c.score, 1)", "length(c.name)", "substr(c.name, 1, 2)", "concat(c.name, 'x')",
    "c.name || 'x'", "trim(c.name)", "replace(c.name, 'a', 'b')", "abs(o.amount)",
    "EXTRACT(year FROM o.placed)", "CASE WHEN o.paid THEN 1 ELSE 0 END", "IF(o.paid, 1, 0)",
    "greatest(o.id, 3)", "o.placed + INTERVAL 1 DAY", "regexp_replace(c.name, 'a', 'b')",
    "strftime(o.placed, '%Y')", "now() IS NOT NULL", "CURRENT_DATE IS NOT NULL",
    "TRY_CAST(c.name AS INT)", "power(o.id, 2)", "sqrt(o.id)", "floor(o.rate)",
    "row_number() OVER (ORDER BY o.id)", "lag(o.id) OVER (ORDER BY o.id)",
    "rank() OVER (PARTITION BY c.country ORDER BY o.id)",
]


def test_ordinary_functions_still_run(fquery):
    # One statement holding every scalar and window function: one federated run.
    columns = ", ".join(f"{call} AS v{i}" for i, call in enumerate(ALLOWED))
    body = fquery(f"SELECT {columns}{JOINED} ORDER BY o.id LIMIT 2")
    assert body["type"] == "table", body
    assert len(body["data"]) == 2 and len(body["data"][0]) == len(ALLOWED)
    first = dict(zip(ALLOWED, body["data"][0], strict=True))
    assert first["lower(c.name)"] == first["upper(c.name)"].lower()
    assert first["coalesce(c.score, 0)"] is not None
    body = fquery("SELECT c.country, sum(o.amount) AS s, count(*) AS n, avg(o.rate) AS a, "
                  "min(o.placed) AS lo, max(o.id) AS hi, count(DISTINCT o.id) AS d, "
                  "string_agg(c.name, ',') AS names, stddev(o.rate) AS sd, "
                  f"median(o.rate) AS me{JOINED} GROUP BY c.country ORDER BY c.country")
    assert body["type"] == "table" and len(body["data"]) > 2, body
    body = fquery("SELECT lower(name) AS n, count(*) AS k FROM files.fcustomers "
                  "GROUP BY lower(name) ORDER BY n LIMIT 1")
    assert body["data"] == [["ada", 1]], body
