"""Encoders of a streamed result: JSON lines, server-sent events, CSV and Arrow IPC.

Each encoder turns a ``TableStream`` into an iterator of byte chunks, one per batch, so the
HTTP server writes a batch and the batch is dropped before the next is read.

- ``jsonlines`` (MindsDB's format): a header line ``{"type": "table", "column_names",
  "context", "query_id"}``, one line per batch (a JSON array of row arrays), then Quarry's
  last line ``{"type": "end", "row_count"}``, or ``{"type": "error", …}`` when the statement
  failed after the header, so a cut stream is told from a complete one.
- ``sse``: the same payloads, each as a ``data:`` event.
- ``csv``: RFC 4180 with a header row, UTF-8; ``arrow``: an Arrow IPC stream whose column
  types come from the database's description of the result. Neither has room for an error
  after the first bytes: a failure then closes the connection before the chunked body's
  end, which every HTTP client reports as an incomplete answer.
"""

from __future__ import annotations

import base64
import csv
import functools
import io
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from operator import itemgetter
from types import SimpleNamespace
from typing import Any

import orjson

from ..lazy import on_first_use
from .encode import _dumps_stdlib, _orjson_default, iso_duration
from .errors import ErrorCode, SqlError
from .stream import TableStream

log = logging.getLogger(__name__)



# pyarrow loads with the first Arrow or CSV stream (app/lazy.py says why).
pa = on_first_use("pyarrow")
pc = on_first_use("pyarrow.compute")


@functools.cache
def _arrow() -> SimpleNamespace:
    """The Arrow values this module writes with, made by the first stream that needs them."""
    return SimpleNamespace(
        # The system allocator of the Arrow and CSV arrays: it gives a batch's memory back
        # when the batch is dropped, where Arrow's default pool (mimalloc) keeps it, which
        # reads as growth.
        pool=pa.system_memory_pool(),
        quote=pa.scalar('"'), comma=pa.scalar(","), crlf=pa.scalar("\r\n"),
        empty=pa.scalar(""), null_text=pa.scalar("null"),
        # PostgreSQL type OIDs -> Arrow types (numeric is decided with its precision).
        pg_types={16: pa.bool_(), 20: pa.int64(), 21: pa.int16(), 23: pa.int32(),
                  26: pa.int64(), 700: pa.float32(), 701: pa.float64(), 25: pa.string(),
                  1043: pa.string(), 1042: pa.string(), 19: pa.string(), 1082: pa.date32(),
                  1114: pa.timestamp("us"), 1184: pa.timestamp("us", tz="UTC"),
                  1083: pa.time64("us"), 17: pa.binary(), 1186: pa.duration("us")},
        # PyMySQL FIELD_TYPE codes -> Arrow types (text and blobs are told apart by their
        # values).
        mysql_types={1: pa.int64(), 2: pa.int64(), 3: pa.int64(), 8: pa.int64(),
                     9: pa.int64(), 13: pa.int64(), 4: pa.float32(), 5: pa.float64(),
                     10: pa.date32(), 14: pa.date32(), 7: pa.timestamp("us"),
                     12: pa.timestamp("us"), 11: pa.duration("us")},
        value_kinds={pa.int64(): frozenset({int}), pa.float64(): frozenset({int, float}),
                     pa.bool_(): frozenset({bool}), pa.binary(): frozenset({bytes}),
                     pa.date32(): frozenset({date})})

# response_format -> media type of the answer.
MEDIA_TYPES = {
    "jsonlines": "application/jsonlines",
    "sse": "text/event-stream",
    "csv": "text/csv",
    "arrow": "application/vnd.apache.arrow.stream",
}
# Accept values that choose a format (the first listed by the client wins).
ACCEPTED = {
    "application/jsonlines": "jsonlines", "application/jsonl": "jsonlines",
    "application/x-ndjson": "jsonlines", "application/x-jsonlines": "jsonlines",
    "text/event-stream": "sse", "text/csv": "csv",
    "application/vnd.apache.arrow.stream": "arrow",
    "application/json": "json",
}
STREAMED = tuple(MEDIA_TYPES)


def dumps_rows(rows: list) -> bytes:
    """A JSON array of row arrays, with the value rules of the buffered answer."""
    try:
        return orjson.dumps(rows, default=_orjson_default)
    except (TypeError, orjson.JSONEncodeError):
        return _dumps_stdlib({"data": rows})[len(b'{"data":'):-1]


def line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def error_payload(error: SqlError) -> dict[str, Any]:
    return {"type": "error", "error_code": error.code, "error_message": error.message}


# ------------------------------------------------------------------------- JSON lines, SSE


def jsonlines(stream: TableStream, header: dict[str, Any]) -> Iterator[bytes]:
    yield line(header)
    rows = 0
    try:
        for batch in stream.batches():
            rows += len(batch)
            yield dumps_rows(batch) + b"\n"
    except SqlError as exc:
        yield line(error_payload(exc))
        return
    except Exception:  # a bug must still end the stream with an error line
        log.exception("stream %s failed", stream.statement.id)
        yield line(error_payload(SqlError(ErrorCode.QUERY_FAILED,
                                          "The stream failed on the server")))
        return
    end: dict[str, Any] = {"type": "end", "row_count": rows}
    if stream.truncated:
        end["truncated"] = True
    yield line(end)


def sse(stream: TableStream, header: dict[str, Any]) -> Iterator[bytes]:
    for piece in jsonlines(stream, header):
        yield b"data: " + piece + b"\n"


def sse_single(body: bytes) -> bytes:
    return b"data: " + body + b"\n\n"


# ------------------------------------------------------------------------------------- CSV


def _csv_text(value: Any) -> Any:
    """A value as CSV text: what the JSON answer shows, without the quotes."""
    if value.__class__ is bool:
        return "true" if value else "false"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")  # as the database writes it: 0.0000001, not 1E-7
    if isinstance(value, timedelta):
        return iso_duration(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict | list):
        return dumps_rows(value).decode()
    return str(value)


_CSV_PLAIN = frozenset({int, float, str})


def csv_stream(stream: TableStream) -> Iterator[bytes]:
    if stream.native == "csv":  # written by the database (native.py), header included
        yield from stream.batches()
        return
    header = io.StringIO()
    csv.writer(header, lineterminator="\r\n").writerow(stream.columns)
    yield header.getvalue().encode("utf-8")
    chunks = _Chunks()
    for batch in stream.batches():
        columns = columns_of(batch, len(stream.columns))
        del batch
        try:
            chunk = _csv_arrow(columns)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):  # UnicodeError too
            chunk = _csv_module(columns)  # e.g. an integer beyond 64 bits
        del columns
        if chunks.add(chunk):
            yield chunks.take()
        del chunk
    yield chunks.take()


# Bytes handed to the HTTP server at a time by the CSV and Arrow encoders of the row path,
# whose batches are small (COLUMNAR_BATCH_ROWS): one write per batch would be many small
# writes. The first batch goes out at once.
CHUNK_BYTES = 1024 * 1024


class _Chunks:
    """Encoded batches kept until about CHUNK_BYTES are ready (the first one at once)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._first = True

    def add(self, data: bytes) -> bool:
        """Keep ``data``; whether it is time to ``take()``."""
        self._parts.append(data)
        self._size += len(data)
        ready = self._first or self._size >= CHUNK_BYTES
        self._first = False
        return ready

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts, self._size = [], 0
        return data


def columns_of(batch: list, width: int) -> list[list]:
    """The batch's columns. Not ``zip(*batch)``: its one iterator per row are objects the
    garbage collector tracks, and 10 000 of them per batch set off collections that walk
    the whole process (a few times slower than the copy itself)."""
    return [list(map(itemgetter(i), batch)) for i in range(width)]


def _csv_module(columns: list[list]) -> bytes:
    """A batch as the csv module writes it: the reference the Arrow writer matches."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    for i, values in enumerate(columns):
        convert = _csv_converter(values)
        if convert is not None:  # only the columns that need it pay for a conversion
            columns[i] = [None if v is None else convert(v) for v in values]
    writer.writerows(zip(*columns, strict=True))
    return buffer.getvalue().encode("utf-8")


# What makes the csv module quote a field (QUOTE_MINIMAL, lines ending in CRLF).
_CSV_SPECIAL = '[,"\r\n]'
_NONE = type(None)


def _csv_arrow(columns: list[list]) -> bytes:
    """A batch as the csv module writes it (``_csv_module``), byte for byte, built column by
    column with Arrow's compute functions (C++) instead of the csv module's per-field loop."""
    fields = [_csv_fields(values) for values in columns]
    if len(fields) == 1:  # the csv module writes a row of one empty field as ""
        lines = pc.coalesce(fields[0], _arrow().empty)
        lines = pc.if_else(pc.equal(lines, _arrow().empty), pa.scalar('""'), lines)
    else:  # NULL as an empty field
        lines = pc.binary_join_element_wise(*fields, _arrow().comma, null_handling="replace",
                                            null_replacement="", memory_pool=_arrow().pool)
    # All the lines as one text, each ended by CRLF.
    text = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()),
                                                   lines), _arrow().crlf, memory_pool=_arrow().pool)
    _, offsets, data = text.buffers()
    end = memoryview(offsets).cast("i")[1]  # int32: the one value's end in data
    return b"".join((memoryview(data)[:end], b"\r\n"))  # one copy


def _csv_fields(values: list) -> pa.Array:
    """One column of a batch as CSV fields: text, quoted where the csv module quotes,
    NULL as null."""
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if kinds == {int}:  # beyond 64 bits: orjson's TypeError, and the csv module's batch
        return _number_fields(values)[0]
    if kinds == {float}:
        return _float_fields(values)
    if not kinds <= {str}:  # the text of other values, as _csv_module writes it
        convert = _csv_converter(values) or str
        values = [v if v is None or v.__class__ is str else convert(v) for v in values]
    text = pa.array(values, pa.string(), memory_pool=_arrow().pool)
    if not _holds(text, b",", b'"', b"\r", b"\n"):  # the usual case: a scan of the bytes
        return text
    special = pc.match_substring_regex(text, _CSV_SPECIAL)
    quoted = pc.binary_join_element_wise(_arrow().quote, pc.replace_substring(text, '"', '""'),
                                         _arrow().quote, _arrow().empty)
    return pc.if_else(special, quoted, text)


def _holds(text: pa.Array, *needles: bytes) -> bool:
    """Whether any value of a string array may contain one of ``needles`` (the array's
    whole data buffer is searched: a false yes costs a closer look, never a wrong byte).
    A copy and memchr: many times faster than a regular expression over the buffer."""
    data = text.buffers()[2]
    if data is None:
        return False
    raw = data.to_pybytes()
    return any(needle in raw for needle in needles)


def _number_fields(values: list) -> tuple[pa.Array, bytes]:
    """Integers or floats as JSON numbers (orjson: one pass in C, about half the time of
    Arrow's conversion and cast), split into one field each, NULL as null; and that JSON."""
    text = orjson.dumps(values)
    if not values:
        return pa.array([], pa.string()), text
    fields = pc.list_flatten(pc.split_pattern(pa.array([text[1:-1].decode("ascii")]), ",",
                                              memory_pool=_arrow().pool))
    if b"null" in text:  # None (and NaN, ±inf: orjson writes them as null too)
        fields = pc.if_else(pc.equal(fields, _arrow().null_text), pa.scalar(None, pa.string()),
                            fields, memory_pool=_arrow().pool)
    return fields, text


def _float_fields(values: list) -> pa.Array:
    """Floats as Python writes them (``repr``). orjson writes the same shortest digits in
    the same notation from 1e-4 up to (not including) 1e16, and 0.0 and -0.0 alike
    (``tests/sql/test_streaming_csv.py`` compares them); outside that range it writes an
    exponent ('1e16', '1e-5') or fixed notation below 1e-4 ('0.00001'), where Python writes
    '1e+16' and '1e-05', and NaN and ±inf as null. Those few take ``repr`` one by one."""
    fields, text = _number_fields(values)
    if b"e" in text or b"0.0000" in text or b"null" in text:
        size = pc.abs(pa.array(values, pa.float64(), memory_pool=_arrow().pool))
        plain = pc.or_(pc.and_(pc.greater_equal(size, 1e-4), pc.less(size, 1e16)),
                       pc.equal(size, 0.0))
        other = pc.invert(pc.coalesce(plain, True))  # None stays null, as written
        if pc.any(other).as_py():
            fields = pc.replace_with_mask(fields, other, pa.array(
                [repr(values[i]) for i in pc.indices_nonzero(other).to_pylist()],
                pa.string()))
    return fields


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime | date | time) else _csv_text(value)


def _csv_converter(values: list) -> Callable[[Any], Any] | None:
    """None when the csv module writes a column's values as they are (numbers, text: the
    fast path), else the function that makes their text."""
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if kinds <= _CSV_PLAIN:  # bool is not int here: the exact classes
        return None
    if all(issubclass(k, datetime | date | time) for k in kinds):
        return _iso
    return _csv_text


# ----------------------------------------------------------------------------------- Arrow

_PG_NUMERIC = 1700
_MYSQL_DECIMAL = (0, 246)


def declared_type(dialect: str, spec: Any) -> pa.DataType | None:
    """The Arrow type for a column as the driver describes it; None: decide from values."""
    if not spec:
        return None
    code, precision, scale = spec
    if dialect == "duckdb":  # the federation engine's answer declares only JSON columns
        return pa.string() if code == "JSON" else None
    if dialect == "postgresql":
        if code == _PG_NUMERIC:
            # numeric(p, s) is exact in a decimal; an unconstrained numeric may hold any
            # number of digits and goes out as its exact text.
            if precision and 0 < precision <= 38:
                return pa.decimal128(precision, scale or 0)
            return pa.string()
        return _arrow().pg_types.get(code, pa.string())
    if code in _MYSQL_DECIMAL:
        # PyMySQL gives the display length (digits + sign + point): never below precision.
        digits = max(1, min(76, int(precision or 38)))
        return pa.decimal128(digits, scale or 0) if digits <= 38 else \
            pa.decimal256(digits, scale or 0)
    return _arrow().mysql_types.get(code)


def value_type(values: list) -> pa.DataType:
    """The Arrow type of a column from its values (SQLite declares none)."""
    kinds = {v.__class__ for v in values if v is not None}
    if not kinds:
        return pa.string()
    if kinds == {bool}:
        return pa.bool_()
    if kinds <= {int}:
        return pa.int64()
    if kinds <= {int, float}:
        return pa.float64()
    if kinds <= {bytes}:
        return pa.binary()
    if kinds <= {datetime}:
        aware = any(v.tzinfo is not None for v in values if v is not None)
        return pa.timestamp("us", tz="UTC" if aware else None)
    if kinds <= {date}:
        return pa.date32()
    return pa.string()


def _arrow_text(value: Any) -> Any:
    if value is None or value.__class__ is str:
        return value
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    return _csv_text(value)


_PLAIN_TEXT = {str, type(None)}


def arrow_column(values: list, kind: pa.DataType, name: str,
                  allowed: frozenset[type] | None = None) -> pa.Array:
    """``allowed``: for a type decided from the first batch's values (SQLite), the Python
    types a later value may have; pyarrow itself would write 2.5 into an int64 as 2."""
    if allowed is not None:
        kinds = set(map(type, values))
        kinds.discard(_NONE)
        if not kinds <= allowed:
            odd = sorted(k.__name__ for k in kinds - allowed)
            raise SqlError(ErrorCode.QUERY_FAILED,
                           f"Column '{name}' has a value that is not {kind} (a "
                           f"{', '.join(odd)}); CAST the column in the statement to one type")
    if kind == pa.string():
        if not set(map(type, values)) <= _PLAIN_TEXT:
            values = [_arrow_text(v) for v in values]
    elif kind == pa.binary():
        values = [bytes(v) if isinstance(v, bytearray | memoryview) else v for v in values]
    try:
        return pa.array(values, type=kind, memory_pool=_arrow().pool)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise SqlError(ErrorCode.QUERY_FAILED,
                       f"Column '{name}' has a value that is not {kind} ({exc}); CAST the "
                       f"column in the statement to one type") from None


def _allowed(kind: pa.DataType) -> frozenset[type] | None:
    """The Python types of a column whose Arrow type came from values (``value_type``);
    None: any (text: every value has one)."""
    if pa.types.is_timestamp(kind):
        return frozenset({datetime})
    return _arrow().value_kinds.get(kind)


def arrow_stream(stream: TableStream, metadata: dict[str, str]) -> Iterator[bytes]:
    sink = io.BytesIO()
    batches = stream.batches()
    first = next(batches, [])
    if stream.native == "arrow":  # record batches read by ADBC (native.py)
        yield from _native_arrow(stream, first, batches, metadata, sink)
        return
    columns = columns_of(first, len(stream.columns)) if first else \
        [[] for _ in stream.columns]
    kinds, allowed = [], []
    for i in range(len(stream.columns)):
        spec = stream.types[i] if i < len(stream.types) else None
        declared = declared_type(stream.dialect, spec)
        kinds.append(declared if declared is not None else value_type(columns[i]))
        allowed.append(None if declared is not None else _allowed(kinds[-1]))
    schema = pa.schema([pa.field(n, k) for n, k in zip(stream.columns, kinds, strict=True)],
                       metadata=metadata)
    with pa.ipc.new_stream(sink, schema) as writer:
        batch = first
        while True:
            if batch:
                arrays = [arrow_column(*column) for column in
                          zip(columns_of(batch, len(kinds)), kinds, stream.columns, allowed,
                              strict=True)]
                writer.write_batch(pa.record_batch(arrays, schema=schema))
                del arrays
            # The schema and first batch at once, then about CHUNK_BYTES at a time.
            if batch is first or sink.tell() >= CHUNK_BYTES:
                yield sink.getvalue()
                sink.seek(0)
                sink.truncate()
            batch = next(batches, None)
            if batch is None:
                break
    yield sink.getvalue()  # the end-of-stream marker


def _native_arrow(stream: TableStream, first: Any, batches: Iterator[Any],
                  metadata: dict[str, str], sink: io.BytesIO) -> Iterator[bytes]:
    """Every column's type is declared (``pgtypes.arrow_eligible``), but MariaDB's text,
    which ``native_mysql.py`` typed already as the row path does."""
    if stream.dialect == "postgresql":
        from .native import conform  # loaded already: these batches came from native.py
    else:
        def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
            return pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    schema = pa.schema([pa.field(n, declared_type(stream.dialect, spec) or pa.string())
                        for n, spec in zip(stream.columns, stream.types, strict=True)],
                       metadata=metadata)
    with pa.ipc.new_stream(sink, schema) as writer:
        batch = first
        while batch:
            writer.write_batch(conform(batch, schema))
            del batch
            yield sink.getvalue()
            sink.seek(0)
            sink.truncate()
            batch = next(batches, None)
    yield sink.getvalue()  # the schema alone when there is no row; the end-of-stream marker
