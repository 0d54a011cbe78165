"""Streamed answers of POST /api/sql/query: jsonlines, sse, csv, arrow, on every dialect."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import threading
import time
from datetime import date, datetime
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pyarrow.ipc
import pytest

from app import create_app

from ..conftest import _dispose

# One table of the four kinds of the issue, plus decimals, booleans and dates, per dialect.
TYPED = {
    "pg": "SELECT id, name, price, f, ok, d, tstz FROM items ORDER BY id",
    "maria": "SELECT id, name, price, f, d, ts FROM items ORDER BY id",
    "lite": "SELECT id, name, f, raw FROM items ORDER BY id",
}


@pytest.fixture
def post(sql_app):
    client = sql_app.test_client()

    def run(sql: str, fmt: str | None = None, db: str | None = None, **extra):
        body = {"query": sql, **extra}
        if fmt:
            body["response_format"] = fmt
        if db:
            body["context"] = {"db": db}
        return client.post("/api/sql/query", json=body, headers=extra.pop("headers", None))

    return run


def jsonl(response) -> list:
    text = response.get_data(as_text=True)
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_jsonlines_is_mindsdbs_stream_with_an_end_line(post, query, db):
    response = post("SELECT n, label, x FROM big ORDER BY n", "jsonlines", db)
    assert response.status_code == 200 and response.mimetype == "application/jsonlines"
    lines = jsonl(response)
    header, *batches, end = lines
    assert header == {"type": "table", "column_names": ["n", "label", "x"],
                      "context": {"db": db}, "query_id": response.headers["X-Query-Id"]}
    rows = [row for batch in batches for row in batch]
    assert rows == query("SELECT n, label, x FROM big ORDER BY n", db=db)["data"]
    assert end == {"type": "end", "row_count": 250}
    assert response.headers["X-Accel-Buffering"] == "no"


def test_batches_hold_at_most_ten_thousand_rows_and_the_first_is_small(post):
    response = post("SELECT g FROM generate_series(1, 25000) g", "jsonlines", "pg")
    header, *batches, end = jsonl(response)
    sizes = [len(b) for b in batches]
    assert sum(sizes) == 25000 == end["row_count"]
    assert sizes[0] == 1000 and max(sizes) == 10_000


def test_batches_of_wide_rows_stay_near_a_megabyte(post):
    response = post("SELECT repeat('x', 5000) FROM generate_series(1, 2000)", "jsonlines", "pg")
    lines = response.get_data().splitlines()
    assert len(lines) > 4
    assert max(len(x) for x in lines[2:-1]) < 2 * 1024 * 1024


def test_sse_carries_the_same_payloads_as_data_events(post):
    plain = jsonl(post("SELECT n FROM big ORDER BY n", "jsonlines", "lite"))
    response = post("SELECT n FROM big ORDER BY n", "sse", "lite")
    assert response.mimetype == "text/event-stream"
    events = response.get_data(as_text=True).split("\n\n")
    assert events[-1] == ""
    payloads = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert all(e.startswith("data: ") for e in events[:-1])
    for line in (payloads[0], plain[0]):
        line.pop("query_id")
    assert payloads == plain


@pytest.mark.parametrize("fmt", ["jsonlines", "sse"])
def test_a_statement_without_a_table_answers_its_usual_object_as_one_line(post, fmt):
    response = post("SHOW DATABASES", fmt)
    text = response.get_data(as_text=True)
    body = json.loads(text.removeprefix("data: "))
    assert body["type"] == "table" and ["demo"] in body["data"]
    assert body["query_id"] == response.headers["X-Query-Id"]
    error = post("SELECT * FROM nosuch.t", fmt)
    body = json.loads(error.get_data(as_text=True).removeprefix("data: "))
    assert body["type"] == "error" and body["error_code"] == 5


def test_an_error_after_the_header_ends_the_stream_with_an_error_line(post):
    response = post("SELECT g, 1 / (g - 5000) FROM generate_series(1, 9000) g",
                    "jsonlines", "pg")
    header, *batches, last = jsonl(response)
    assert header["type"] == "table"
    assert 1000 <= sum(len(b) for b in batches) < 5000
    assert last["type"] == "error" and last["error_code"] == 15
    assert "division by zero" in last["error_message"]


def test_an_error_before_the_first_row_is_a_plain_error_object(post):
    response = post("SELECT 1 / 0 FROM generate_series(1, 3)", "jsonlines", "pg")
    assert [line["type"] for line in jsonl(response)] == ["error"]


def test_the_stream_row_limit_cuts_and_says_so(sources, sqlite_template, tmp_path,
                                               session_dir):
    store = tmp_path / "store.db"
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": str(tmp_path),
                      "DEMO_PATH": f"{session_dir}/demo.db",
                      "TESTING": True, "DATA_SOURCES": {"pg": sources["pg"]},
                      "SQL_STREAM_MAX_ROWS": 2500, "SQL_MAX_ROWS": 10})
    try:
        client = app.test_client()
        response = client.post("/api/sql/query", json={
            "query": "SELECT g FROM generate_series(1, 100000) g", "context": {"db": "pg"},
            "response_format": "jsonlines"})
        *_, end = jsonl(response)
        assert end == {"type": "end", "row_count": 2500, "truncated": True}
        exact = client.post("/api/sql/query", json={
            "query": "SELECT g FROM generate_series(1, 2500) g", "context": {"db": "pg"},
            "response_format": "jsonlines"})
        assert jsonl(exact)[-1] == {"type": "end", "row_count": 2500}
        # The buffered answer keeps its own cap.
        assert client.post("/api/sql/query", json={
            "query": "SELECT g FROM generate_series(1, 100) g",
            "context": {"db": "pg"}}).get_json()["truncated"] is True
    finally:
        _dispose(app)


def test_the_time_limit_covers_the_whole_stream(post):
    # Each row is quick; together they pass the 1 s limit. SQLite checks its deadline
    # while it steps the statement, between the batches too. Without the limit the
    # statement never ends: the error line (code 9, time limit) is the proof; the clock
    # only guards against a limit that applied per batch, with room for a loaded machine.
    started = time.monotonic()
    slow_row = ("(WITH RECURSIVE d(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM d "
                "WHERE j < 3000) SELECT count(*) FROM d)")
    response = post("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) "
                    f"SELECT i, {slow_row} FROM c", "jsonlines", "lite", timeout_s=1)
    last = jsonl(response)[-1]
    assert last["type"] == "error" and last["error_code"] == 9, last
    assert "time limit" in last["error_message"]
    assert time.monotonic() - started < 30


# ------------------------------------------------------------------------------ CSV, Arrow


@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_csv_has_a_header_row_and_the_rows(post, query, db):
    response = post(TYPED[db], "csv", db)
    assert response.mimetype == "text/csv" and response.mimetype_params["charset"] == "utf-8"
    assert response.get_data().count(b"\r\n") == 4
    rows = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    plain = query(TYPED[db], db=db)
    assert rows[0] == plain["column_names"]
    assert [r[:2] for r in rows[1:]] == [[str(r[0]), r[1]] for r in plain["data"]]


def test_csv_quotes_as_rfc_4180_says_and_keeps_utf8(post):
    response = post("SELECT 'a,b' AS t, 'say \"hi\"' AS q, 'line\nbreak' AS n, 'Zürich ✓' AS u,"
                    " NULL AS z, true AS b, 1.50::numeric AS d", "csv", "pg")
    assert response.get_data().decode("utf-8").split("\r\n", 1)[1] == \
        '"a,b","say ""hi""","line\nbreak",Zürich ✓,,true,1.50\r\n'
    frame = pd.read_csv(io.BytesIO(response.get_data()))
    assert frame.loc[0, "u"] == "Zürich ✓" and frame.loc[0, "n"] == "line\nbreak"


def _arrow(response) -> pa.Table:
    assert response.mimetype == "application/vnd.apache.arrow.stream"
    return pyarrow.ipc.open_stream(io.BytesIO(response.get_data())).read_all()


def test_arrow_keeps_the_column_types_of_postgresql(post):
    table = _arrow(post("SELECT id::bigint AS id, f, price, name, ok, d, tstz, id::int4 AS i4 "
                        "FROM items ORDER BY id", "arrow", "pg"))
    schema = dict(zip(table.column_names, table.schema.types, strict=True))
    assert schema == {"id": pa.int64(), "f": pa.float64(), "price": pa.decimal128(12, 2),
                      "name": pa.string(), "ok": pa.bool_(), "d": pa.date32(),
                      "tstz": pa.timestamp("us", tz="UTC"), "i4": pa.int32()}
    rows = table.to_pylist()
    assert rows[0]["price"] == Decimal("1.50") and rows[0]["d"] == date(2024, 2, 29)
    assert rows[0]["tstz"] == datetime.fromisoformat("2024-02-29T11:45:30+00:00")
    assert rows[1]["price"] is None and rows[2]["ok"] is None
    frame = table.to_pandas()
    assert str(frame["tstz"].dtype) == "datetime64[us, UTC]"
    assert frame["id"].tolist() == [1, 2, 3]
    assert table.schema.metadata[b"query_id"]


def test_arrow_keeps_the_column_types_of_mariadb_and_sqlite(post):
    maria = _arrow(post(TYPED["maria"], "arrow", "maria"))
    assert maria.schema.field("id").type == pa.int64()
    assert maria.schema.field("price").type.scale == 2
    assert maria.schema.field("ts").type == pa.timestamp("us")
    assert maria.column("price").to_pylist()[0] == Decimal("1.50")
    lite = _arrow(post(TYPED["lite"], "arrow", "lite"))
    assert [f.type for f in lite.schema] == [pa.int64(), pa.string(), pa.float64(),
                                             pa.binary()]
    assert lite.column("raw").to_pylist()[0] == b"\x00\xff\x10"


def test_a_mariadb_arrow_answer_has_the_same_values_whichever_reader_reads_it(post):
    # Every column of the first is of a type connectorx reads (sql/native_mysql.py); the
    # second adds one of 12 decimal places (it would round them to 10) and a TIME, which
    # send the whole statement down PyMySQL's row path.
    native = _arrow(post(TYPED["maria"], "arrow", "maria"))
    rows = _arrow(post("SELECT id, name, price, f, d, ts, big, t FROM items ORDER BY id",
                       "arrow", "maria"))
    same = rows.select(native.column_names)
    assert [f.type for f in native.schema] == [f.type for f in same.schema]
    assert native.to_pylist() == same.to_pylist()
    assert native.column("name").to_pylist() == ["apple", "pear", "fig"]
    assert rows.column("big").to_pylist()[:2] == [
        Decimal("12345678901234567890.123456789012"), None]


def test_arrow_of_an_empty_result_is_a_schema_and_no_rows(post):
    table = _arrow(post("SELECT n, label FROM big WHERE n < 0", "arrow", "pg"))
    assert table.num_rows == 0 and table.column_names == ["n", "label"]


def test_the_accept_header_chooses_the_format(post):
    for accept, mimetype in [("text/csv", "text/csv"),
                             ("application/vnd.apache.arrow.stream",
                              "application/vnd.apache.arrow.stream"),
                             ("application/x-ndjson", "application/jsonlines"),
                             ("text/event-stream", "text/event-stream"),
                             ("*/*", "application/json")]:
        response = post("SELECT n FROM big", db="lite", headers={"Accept": accept})
        assert response.get_data() and response.mimetype == mimetype, accept


def test_an_unknown_format_is_refused(post):
    response = post("SELECT 1", "xml")
    assert response.status_code == 400
    assert "response_format" in response.get_json()["errors"]


# ---------------------------------------------------------------------- query ids, cancel


def test_every_answer_carries_its_query_id(post):
    first, second = post("SELECT 1"), post("SELECT 1")
    assert first.get_json()["query_id"] == first.headers["X-Query-Id"]
    assert len({first.headers["X-Query-Id"], second.headers["X-Query-Id"]}) == 2


def test_cancel_of_an_unknown_or_finished_query_is_404(sql_app, post):
    client = sql_app.test_client()
    done = post("SELECT 1").headers["X-Query-Id"]
    for query_id in (done, "nosuch"):
        response = client.delete(f"/api/sql/queries/{query_id}")
        assert response.status_code == 404
        assert query_id in response.get_json()["detail"]
    answer = post(f"SELECT query_cancel('{done}')").get_json()
    assert answer["type"] == "error" and answer["error_code"] == 17


@pytest.mark.parametrize("how", ["delete", "query_cancel"])
@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_a_running_statement_is_listed_and_cancelled(sql_app, db, how):
    slow = {"pg": "SELECT pg_sleep(20)", "maria": "SELECT SLEEP(20)",
            "lite": "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) "
                    "SELECT count(*) FROM c"}[db]
    client = sql_app.test_client()
    answers = []
    runner = threading.Thread(target=lambda: answers.append(client.post(
        "/api/sql/query", json={"query": slow, "context": {"db": db}, "timeout_s": 20})))
    runner.start()
    try:
        listed = _wait_listed(client, db)
        assert listed["rows_sent"] == 0 and listed["cancel_requested"] is False
        assert re.search("SLEEP|COUNT", listed["statement"].upper())
        started = time.monotonic()
        if how == "delete":
            response = client.delete(f"/api/sql/queries/{listed['query_id']}")
            assert response.status_code == 200
            assert response.get_json() == {"query_id": listed["query_id"],
                                           "cancel_requested": True}
        else:
            answer = client.post("/api/sql/query", json={
                "query": f"SELECT query_cancel('{listed['query_id']}')"}).get_json()
            assert answer["type"] == "ok"
        runner.join(10)
        assert time.monotonic() - started < 2
    finally:
        runner.join(30)
    body = answers[0].get_json()
    assert body["error_code"] == 22, body
    assert body["query_id"] == listed["query_id"]
    assert client.get("/api/sql/queries").get_json() == []


def _wait_listed(client, db: str) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        running = [q for q in client.get("/api/sql/queries").get_json() if q["source"] == db]
        if running:
            return running[0]
        time.sleep(0.05)
    raise AssertionError("the statement was never listed")


def test_a_mariadb_stream_may_pause_as_long_as_its_time_limit(post):
    # A reader that pauses between two batches (a slow client, a knowledge base embedding
    # a batch) is not dropped by the server after its default 60 s of net_write_timeout.
    lines = jsonl(post("SELECT @@session.net_write_timeout AS t", "jsonlines", db="maria",
                       timeout_s=120))
    assert [[int(v) for v in row] for row in lines[1]] == [[120]], lines
