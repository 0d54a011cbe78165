"""CSV of the row-by-row path (SQLite, MariaDB, PostgreSQL columns COPY leaves alone), written
column by column with Arrow's compute functions: the bytes must be the csv module's. And the
Arrow answer of a SQLite column whose values change type after the first batch.

The reference is built here, from the same rows read with sqlite3, by the csv module with the
documented value rules (NULL and '' as an empty field, bytes as base64, numbers and text as
Python writes them), and compared byte for byte with what Quarry streams over HTTP, for a
corpus of awkward values of every SQLite storage class, mixed columns included.
"""

from __future__ import annotations

import base64
import csv
import io
import random
import shutil
import sqlite3
import string
import struct
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.ipc
import pytest
from flask import Flask

from app import create_app
from app.sql import formats
from app.sql.errors import SqlError

from ..conftest import _dispose

ROWS = 25_000  # more than two batches of 10 000: the later batches go through it too
AWKWARD_TEXT = ["", " ", "a,b", 'say "hi"', '"', '""', "line\nbreak", "cr\rreturn", "\r\n",
                "Zürich ✓", "日本語", "tab\there", " lead", "trail ", "\\N", "NULL", "=1+1",
                "\u2028", "\x0b\x0c", "🙂", "a" * 300]
AWKWARD_FLOAT = [0.0, -0.0, 1.0, -1.0, 0.1, 0.25, 1e-4, 9.999999999999999e-05, 1.5e-05,
                 1e-7, 2.5e-07, 5e-324, 1e10, 1e15, 1234567890123456.0, 1e16, 1.5e16, 1e22,
                 9007199254740993.0, 0.30000000000000004, 1.7976931348623157e308,
                 123456789.123, float("inf"), float("-inf"), 100.0, -1234.5]


def _float(rng: random.Random) -> float:
    pick = rng.random()
    if pick < 0.3:  # any bit pattern but NaN (SQLite stores NaN as NULL)
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        return value if value == value else 0.5
    if pick < 0.6:
        return rng.uniform(-1e6, 1e6)
    if pick < 0.8:
        return rng.random() * 10.0 ** rng.randint(-30, 30)
    return rng.choice(AWKWARD_FLOAT)


def _text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(AWKWARD_TEXT)
    alphabet = string.printable + 'é✓",\r\n'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def _corpus(path: str) -> None:
    rng = random.Random(13)
    makers = {
        "i": lambda: rng.choice([0, -1, 1, 2**63 - 1, -2**63, rng.getrandbits(40)]),
        "f": lambda: _float(rng),
        "t": lambda: _text(rng),
        "b": lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 9))),
        # SQLite keeps each value's own type: one column may hold all of them.
        "m": lambda: rng.choice([makers["i"], makers["f"], makers["t"], makers["b"]])(),
    }
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE corpus (n INTEGER PRIMARY KEY, i, f, t, b, m)")
    conn.executemany("INSERT INTO corpus VALUES (?, ?, ?, ?, ?, ?)", (
        (n, *(None if rng.random() < 0.1 else makers[k]() for k in "iftbm"))
        for n in range(ROWS)))
    # Columns that are all integers (x, z) or text (y) in the first batches, then not.
    conn.execute("CREATE TABLE drift (n INTEGER PRIMARY KEY, x, y, z)")
    conn.executemany("INSERT INTO drift VALUES (?, ?, ?, ?)", (
        (n, n if n < 12_000 else f"v{n},", f"{n}" if n < 12_000 else n * 0.5,
         n if n < 12_000 else n + 0.5)
        for n in range(ROWS)))
    conn.commit()
    conn.close()


@pytest.fixture(scope="module")
def corpus_app(sqlite_template, tmp_path_factory) -> Iterator[tuple[Flask, str]]:
    folder = tmp_path_factory.mktemp("csv-corpus")
    path = str(folder / "corpus.db")
    _corpus(path)
    store = str(folder / "store.db")
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": str(folder),
                      "TESTING": True, "DATA_SOURCES": {"lite": f"sqlite:///{path}"},
                      "DEMO_SOURCE": False})
    yield app, path
    _dispose(app)


def _reference(path: str, sql: str) -> bytes:
    """The documented CSV of the statement, by the csv module."""
    conn = sqlite3.connect(path)
    try:
        cursor = conn.execute(sql)
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    finally:
        conn.close()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(names)
    writer.writerows([base64.b64encode(v).decode() if isinstance(v, bytes) else v
                      for v in row] for row in rows)
    return out.getvalue().encode("utf-8")


def _csv(app: Flask, sql: str) -> bytes:
    response = app.test_client().post("/api/sql/query", json={
        "query": sql, "context": {"db": "lite"}, "response_format": "csv"})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    return response.get_data()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM corpus ORDER BY n",
    "SELECT i, f FROM corpus ORDER BY n",
    "SELECT t FROM corpus ORDER BY n",      # one column: an empty field is written ""
    "SELECT m FROM corpus ORDER BY n",
    "SELECT x, y, z FROM drift ORDER BY n",
    "SELECT f, t, NULL AS z FROM corpus WHERE n < 50 ORDER BY n",
    # Floats Arrow writes without an exponent (0.00001) where Python writes one (1e-05).
    "SELECT f FROM corpus WHERE abs(f) > 1e-6 AND abs(f) < 1.5 ORDER BY n",
    # No NULL, no exponent: numbers whose text orjson writes needs no second look.
    "SELECT n, n * 0.25 AS q, -n - 0.5 AS r FROM corpus ORDER BY n",
], ids=["all", "numbers", "one-text-column", "one-mixed-column", "types-change", "nulls",
        "small-floats", "plain-numbers"])
def test_csv_is_the_csv_modules_to_the_byte(corpus_app, sql):
    app, path = corpus_app
    answer, expected = _csv(app, sql), _reference(path, sql)
    if answer != expected:  # say where, not a wall of bytes
        got, want = answer.split(b"\r\n"), expected.split(b"\r\n")
        first = next(i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b)
        pytest.fail(f"line {first}: {got[first]!r} != {want[first]!r}")
    assert answer.count(b"\r\n") >= 50


def test_float_fields_are_pythons_repr():
    """The float column's text (orjson's digits, repr where its notation differs) against
    repr itself, for every bit pattern kind: NaN and ±inf too (PostgreSQL's floats)."""
    rng = random.Random(7)
    values = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
              for _ in range(20_000)]
    values += [rng.random() * 10.0 ** rng.randint(-8, 20) for _ in range(20_000)]
    values += AWKWARD_FLOAT + [float("nan"), None, -0.0, 1e-4, 9.999e-5, 1e16, 9.999e15]
    fields = formats._float_fields(values).to_pylist()
    assert fields == [None if v is None else repr(v) for v in values]
    # And integers: their decimal text, NULL as null.
    ints = [0, -1, 2**63 - 1, -2**63, 2**64 - 1, None, 10**12]
    assert formats._number_fields(ints)[0].to_pylist() == \
        [None if v is None else str(v) for v in ints]


def test_every_kind_of_awkward_value_is_in_the_corpus(corpus_app):
    """The corpus really holds what the test above claims to cover."""
    _, path = corpus_app
    conn = sqlite3.connect(path)
    try:
        kinds = {row[0] for row in conn.execute("SELECT typeof(m) FROM corpus")}
        texts = {row[0] for row in conn.execute("SELECT t FROM corpus")}
        floats = {row[0] for row in conn.execute("SELECT f FROM corpus")}
    finally:
        conn.close()
    assert kinds == {"integer", "real", "text", "blob", "null"}
    assert set(AWKWARD_TEXT) <= texts and set(AWKWARD_FLOAT) <= floats


def test_arrow_of_a_sqlite_column_that_changes_type_is_cut_not_rounded(corpus_app):
    """The type of a SQLite column comes from the first batch (1 000 rows). An integer
    column that later holds 12000.5 must not go out as 12000: the stream stops, naming
    the column (an HTTP client sees the body end before its last chunk)."""
    app, _ = corpus_app
    client = app.test_client()

    def arrow(sql: str) -> pa.Table:
        response = client.post("/api/sql/query", json={
            "query": sql, "context": {"db": "lite"}, "response_format": "arrow"})
        assert response.status_code == 200
        return pyarrow.ipc.open_stream(response.get_data()).read_all()

    with pytest.raises(SqlError, match="Column 'z' has a value that is not int64 .a float"):
        arrow("SELECT n, z FROM drift ORDER BY n")
    table = arrow("SELECT n, z FROM drift WHERE n < 12000 ORDER BY n")
    assert table.schema.field("z").type == pa.int64() and table.num_rows == 12_000
    assert table.column("z").to_pylist()[-1] == 11_999
    # Integers among reals: a float64 column, every value kept.
    floats = arrow("SELECT CASE WHEN n % 2 = 0 THEN n / 2 ELSE n * 0.5 END AS h "
                   "FROM drift ORDER BY n")
    assert floats.schema.field("h").type == pa.float64()
    assert floats.column("h").to_pylist()[:4] == [0.0, 0.5, 1.0, 1.5]
    assert floats.num_rows == ROWS
