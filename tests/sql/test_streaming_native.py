"""PostgreSQL streams read without Python rows (app/sql/native.py): CSV by COPY, Arrow by ADBC.

Each is compared with the row-by-row path on the same statement: a column of a type the
native paths leave alone (an interval) sends the statement down the row-by-row path, and
the answers must agree to the byte (CSV) or to the value and type (Arrow).
"""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.ipc
import pytest

from app.sql.errors import ErrorCode, SqlError
from app.sql.running import Statement
from app.sql.sources import current_sources
from app.sql.stream import open_stream

from .conftest import SRC_DB, _pg_admin

PAD = ", NULL::interval AS pad"  # not a native type: the row-by-row path

AWKWARD = """SELECT * FROM (VALUES
 ('a,b'::text, 1.50::numeric, true, '2024-02-29'::date, '2024-02-29 13:45:30.25'::timestamp,
  '2024-02-29 13:45:30+02'::timestamptz, 9223372036854775807::int8, (-32768)::int2,
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'ab'::char(4), 'nm'::name, 7::int4),
 ('say "hi"', 0.0000001, false, 'infinity', '0099-01-01 00:00:00',
  '2024-01-01 00:00:00.000001+00', 0, 0, NULL, '', 'x', NULL),
 ('line' || chr(10) || 'break', -12345678901234567890.123456789, NULL, '0044-03-15 BC',
  'infinity', '10000-01-01 00:00+00', NULL, NULL, NULL, NULL, NULL, -1),
 ('', 'NaN', NULL, NULL, '2024-02-29 23:59:59.5', '-infinity', -1, 1, NULL, 'a"b', '\\.', 0),
 (NULL, 0.000, NULL, '2000-01-01', NULL, '1999-12-31 23:00:00.5-05:30', NULL, NULL, NULL,
  NULL, NULL, NULL),
 ('Zürich ✓', 100, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ' lead', 'trail ', NULL),
 ('quote"', -0.5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
) AS v(t, n, b, d, ts, tz, i8, i2, u, c, nm, i4)"""

# Floats around every threshold of the two notations, and many at every scale.
FLOATS = """SELECT x, -x AS y FROM (
  SELECT unnest(ARRAY[0.1, 1.0, -0.0, 1e15, 1234567890123456, 123456789012345.6, 1e16,
    2500000000000000.5, 9999999999999998, 1.5e-05, 0.0001, 0.00012345, 5e-324,
    1.7976931348623157e308, 0.30000000000000004, 1e22, 123.456, -1e-7, 9007199254740993,
    'NaN', 'Infinity', '-Infinity']::float8[]) AS x
  UNION ALL
  SELECT sin(g) * power(10, g % 44 - 22) FROM generate_series(1, 3000) g
  UNION ALL SELECT NULL) AS f"""


@pytest.fixture
def post(sql_app):
    client = sql_app.test_client()

    def run(sql: str, fmt: str, db: str = "pg"):
        response = client.post("/api/sql/query", json={
            "query": sql, "context": {"db": db}, "response_format": fmt})
        assert response.status_code == 200, response.get_data(as_text=True)
        return response

    return run


def _without_pad(generic: bytes) -> bytes:
    """The row-by-row CSV without its last column (the header's ',pad'; an empty field)."""
    head, rest = generic.split(b"\r\n", 1)
    assert head.endswith(b",pad")
    return head[:-4] + b"\r\n" + rest.replace(b",\r\n", b"\r\n")


@pytest.mark.parametrize("sql", [AWKWARD, FLOATS], ids=["awkward", "floats"])
def test_csv_written_by_copy_is_the_row_by_row_csv_to_the_byte(post, sql):
    native = post(sql, "csv").get_data()
    generic = post(f"SELECT *{PAD} FROM ({sql}) AS q", "csv").get_data()
    generic = _without_pad(generic)
    lines = list(zip(native.split(b"\r\n"), generic.split(b"\r\n"), strict=True))
    if sql is AWKWARD:
        assert native == generic
        assert b"line\nbreak" in native  # a line break in a field stays LF
    else:
        # PostgreSQL's float text is not always the shortest (a 17th digit, seen past
        # 1e16): such a value reads back as the very same double.
        cells = [(a, b) for x, y in lines if x != y
                 for a, b in zip(x.split(b","), y.split(b","), strict=True) if a != b]
        assert all(float(a) == float(b) for a, b in cells), cells[:5]
        assert len(cells) < 50
    assert native.count(b"\r\n") > 7
    rows = list(csv.reader(io.StringIO(native.decode("utf-8"), newline="")))
    assert len(rows[0]) == len(rows[1])


def test_a_float4_column_keeps_the_row_by_row_csv(post):
    sql = "SELECT (-9.301059501867617e+19::float8)::float4 AS f, 1 AS i"
    assert post(sql, "csv").get_data() == b"f,i\r\n-9.301059e+19,1\r\n"


def test_csv_of_one_column_writes_an_empty_field_as_python_does(post):
    sql = "SELECT t FROM (VALUES ('a'), (''), (NULL), ('x,y')) AS v(t)"
    expected = io.StringIO()
    csv.writer(expected, lineterminator="\r\n").writerows([["t"], ["a"], [""], [None],
                                                           ["x,y"]])
    assert post(sql, "csv").get_data().decode() == expected.getvalue()


def test_csv_by_copy_keeps_the_row_limit_and_an_empty_result(sql_app, post):
    assert post("SELECT n, label FROM big WHERE n < 0", "csv").get_data() == b"n,label\r\n"
    sql_app.config["SQL_STREAM_MAX_ROWS"] = 7
    try:
        body = post("SELECT n, label FROM big ORDER BY n", "csv").get_data()
    finally:
        sql_app.config["SQL_STREAM_MAX_ROWS"] = 10_000_000
    assert body.decode().split("\r\n")[1:] == [f"{n},row {n}" for n in range(1, 8)] + [""]


def _arrow(response) -> pa.Table:
    assert response.mimetype == "application/vnd.apache.arrow.stream"
    return pyarrow.ipc.open_stream(io.BytesIO(response.get_data())).read_all()


ARROW_TYPED = """SELECT * FROM (VALUES
 (1::int8, 2::int4, 3::int2, 0.1::float8, 0.1::float4, 1.50::numeric(12,2), 'a,b'::text,
  true, '2024-02-29'::date, '2024-02-29 13:45:30.25'::timestamp,
  '2024-02-29 13:45:30+02'::timestamptz, '\\x00ff10'::bytea, '13:45:30.5'::time,
  'ab'::char(4), 'v'::varchar(9)),
 (NULL, NULL, NULL, 'NaN', 'Infinity', NULL, '', false, NULL, NULL, NULL, '\\x'::bytea, NULL,
  NULL, ''),
 (-9223372036854775808, -1, -1, -0.0, 1e30, -9999999999.99, 'Zürich ✓', NULL,
  '0001-01-01', '2000-01-01 00:00:00.000001', '1970-01-01 00:00+00', NULL, '00:00',
  NULL, NULL)
) AS v(i8, i4, i2, f8, f4, n, t, b, d, ts, tz, raw, tm, c, vc)"""


def test_arrow_read_by_adbc_equals_the_row_by_row_arrow(post):
    native = _arrow(post(ARROW_TYPED, "arrow"))
    generic = _arrow(post(f"SELECT *{PAD} FROM ({ARROW_TYPED}) AS q", "arrow"))
    assert generic.column_names[-1] == "pad"
    generic = generic.drop_columns(["pad"])
    assert native.schema.equals(generic.schema)
    assert native.to_pylist()[0]["n"] == generic.to_pylist()[0]["n"]
    assert native.equals(generic) or str(native.to_pylist()) == str(generic.to_pylist())
    assert native.schema.metadata[b"query_id"]


def test_arrow_by_adbc_keeps_the_row_limit(sql_app, post):
    sql_app.config["SQL_STREAM_MAX_ROWS"] = 123
    try:
        table = _arrow(post("SELECT g::int8 AS g FROM generate_series(1, 100000) g", "arrow"))
    finally:
        sql_app.config["SQL_STREAM_MAX_ROWS"] = 10_000_000
    assert table.column("g").to_pylist() == list(range(1, 124))


def test_an_error_of_the_adbc_session_is_the_usual_error(post):
    body = post("SELECT 1 / 0 AS x FROM generate_series(1, 3)", "arrow").get_json()
    assert body["type"] == "error" and body["error_code"] == 15
    assert "division by zero" in body["error_message"]


@pytest.mark.parametrize("fmt", ["csv", "arrow"])
def test_a_write_through_copy_or_adbc_is_impossible_even_past_the_gate(sql_app, fmt):
    """The gate refuses writes; were one to pass it, the session still cannot write: here
    a statement goes straight to open_stream (no gate), as the superuser, and nextval()
    (a write) is refused by the READ ONLY transaction of each native path."""
    with _pg_admin(SRC_DB) as admin:
        before = admin.execute("SELECT last_value, is_called FROM items_seq").fetchone()
    with sql_app.app_context():
        source = current_sources().require("pgsuper")
        statement = Statement(f"native_{fmt}", response_format=fmt, streamed=True)
        with pytest.raises(SqlError) as error:
            stream = open_stream(source, "SELECT nextval('items_seq') AS v", None, [],
                                 timeout_s=5, max_rows=0, statement=statement)
            try:
                list(stream.batches())
            finally:
                stream.close()
    assert error.value.code == ErrorCode.READ_ONLY, error.value.message
    with _pg_admin(SRC_DB) as admin:
        assert admin.execute("SELECT last_value, is_called FROM items_seq").fetchone() == before


@pytest.mark.parametrize("sql", [
    "COPY items TO STDOUT", "COPY items FROM STDIN", "COPY (SELECT 1) TO PROGRAM 'id'",
    "WITH d AS (DELETE FROM big RETURNING n) SELECT n FROM d",
    "SELECT 1 AS x; DELETE FROM big",
])
@pytest.mark.parametrize("fmt", ["csv", "arrow"])
def test_the_gate_still_refuses_writes_in_the_native_formats(sql_app, fmt, sql):
    client = sql_app.test_client()
    response = client.post("/api/sql/query", json={
        "query": sql, "context": {"db": "pgsuper"}, "response_format": fmt})
    body = response.get_json()
    assert body["type"] == "error", body
    with _pg_admin(SRC_DB) as admin:
        assert admin.execute("SELECT count(*) FROM big").fetchone()[0] == 250


def _arrow_in(sql_app, sql: str, **extra) -> dict:
    response = sql_app.test_client().post("/api/sql/query", json={
        "query": sql, "context": {"db": "pg"}, "response_format": "arrow", **extra})
    if response.mimetype != "application/vnd.apache.arrow.stream":
        return response.get_json()
    return _arrow(response).to_pylist()[0]


def test_an_adbc_session_is_reused_with_each_statement_s_own_time_limit(sql_app):
    """A stream read to its end puts its ADBC session back; the next one runs in it (the
    same backend), with its own time limit, and what a statement set is gone with it. The
    first statement goes straight to open_stream (the gate refuses set_config, a volatile
    function), as a statement that got past the gate would."""
    with sql_app.app_context():
        statement = Statement("native_reuse", response_format="arrow", streamed=True)
        stream = open_stream(current_sources().require("pg"),
                             "SELECT pg_backend_pid()::int8 AS pid, "
                             "set_config('statement_timeout', '0', false) AS t", None, [],
                             timeout_s=3, max_rows=0, statement=statement)
        try:
            first = pa.Table.from_batches(list(stream.batches())).to_pylist()[0]
        finally:
            stream.close()
    assert first["t"] == "0"
    second = _arrow_in(sql_app, "SELECT pg_backend_pid()::int8 AS pid, "
                       "current_setting('statement_timeout') AS t, "
                       "current_setting('transaction_read_only') AS ro", timeout_s=2)
    assert second == {"pid": first["pid"], "t": "2s", "ro": "on"}
    slow = _arrow_in(sql_app, "SELECT count(*)::int8 AS n FROM generate_series(1, 10000000) a, "
                     "generate_series(1, 1000) b", timeout_s=0.3)
    assert slow["type"] == "error" and slow["error_code"] == 9, slow
    # The session that failed is not put back; the next statement still runs read-only.
    after = _arrow_in(sql_app, "SELECT pg_backend_pid()::int8 AS pid, "
                      "current_setting('transaction_read_only') AS ro", timeout_s=2)
    assert after["ro"] == "on"


def test_a_session_left_mid_stream_is_not_reused(sql_app):
    sql_app.config["SQL_STREAM_MAX_ROWS"] = 10
    try:
        cut = _arrow(sql_app.test_client().post("/api/sql/query", json={
            "query": "SELECT pg_backend_pid()::int8 AS pid FROM generate_series(1, 200000) g",
            "context": {"db": "pg"}, "response_format": "arrow"})).to_pylist()
    finally:
        sql_app.config["SQL_STREAM_MAX_ROWS"] = 10_000_000
    assert len(cut) == 10
    again = _arrow_in(sql_app, "SELECT pg_backend_pid()::int8 AS pid")
    assert again["pid"] != cut[0]["pid"]
    with _pg_admin(SRC_DB) as admin:  # the cut session is gone from the server
        assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                             (cut[0]["pid"],)).fetchone()[0] == 0
