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
import io
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa

from .encode import _dumps_stdlib, _orjson_default, iso_duration
from .errors import ErrorCode, SqlError
from .stream import TableStream

log = logging.getLogger(__name__)

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
        return str(value)
    if isinstance(value, timedelta):
        return iso_duration(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict | list):
        return dumps_rows(value).decode()
    return str(value)


_CSV_PLAIN = (int, float, str)


def csv_stream(stream: TableStream) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(stream.columns)
    converters: list[Callable[[Any], Any] | None] | None = None
    for batch in stream.batches():
        if converters is None:
            converters = _csv_converters(batch, len(stream.columns))
        if any(converters):
            # Column by column: only the columns that need it pay for a conversion.
            columns = list(zip(*batch, strict=True))
            for i, convert in enumerate(converters):
                if convert is not None:
                    columns[i] = [None if v is None else convert(v) for v in columns[i]]
            batch = zip(*columns, strict=True)
        writer.writerows(batch)
        yield buffer.getvalue().encode("utf-8")
        buffer.seek(0)
        buffer.truncate()
    if converters is None:  # no rows: the header alone
        yield buffer.getvalue().encode("utf-8")


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime | date | time) else _csv_text(value)


def _csv_converters(batch: list, width: int) -> list[Callable[[Any], Any] | None]:
    """Per column: None when the csv module writes its values as they are (numbers, text:
    the fast path), else the converter. Decided from the first batch; a later value of
    another type still goes through the converter's general rules."""
    converters: list[Callable[[Any], Any] | None] = []
    for i in range(width):
        kinds = {row[i].__class__ for row in batch if row[i] is not None}
        if kinds and all(k in _CSV_PLAIN for k in kinds) and bool not in kinds:
            converters.append(None)
        elif kinds and all(issubclass(k, datetime | date | time) for k in kinds):
            converters.append(_iso)
        else:
            converters.append(_csv_text)
    return converters


# ----------------------------------------------------------------------------------- Arrow

# PostgreSQL type OIDs -> Arrow types (numeric is decided with its precision).
_PG_ARROW = {16: pa.bool_(), 20: pa.int64(), 21: pa.int16(), 23: pa.int32(), 26: pa.int64(),
             700: pa.float32(), 701: pa.float64(), 25: pa.string(), 1043: pa.string(),
             1042: pa.string(), 19: pa.string(), 1082: pa.date32(),
             1114: pa.timestamp("us"), 1184: pa.timestamp("us", tz="UTC"),
             1083: pa.time64("us"), 17: pa.binary(), 1186: pa.duration("us")}
_PG_NUMERIC = 1700
# The system allocator: it gives a batch's memory back when the batch is dropped, where
# Arrow's default pool (jemalloc/mimalloc) keeps it for later, which reads as growth.
_POOL = pa.system_memory_pool()
# PyMySQL FIELD_TYPE codes -> Arrow types (text and blobs are told apart by their values).
_MYSQL_ARROW = {1: pa.int64(), 2: pa.int64(), 3: pa.int64(), 8: pa.int64(), 9: pa.int64(),
                13: pa.int64(), 4: pa.float32(), 5: pa.float64(), 10: pa.date32(),
                14: pa.date32(), 7: pa.timestamp("us"), 12: pa.timestamp("us"),
                11: pa.duration("us")}
_MYSQL_DECIMAL = (0, 246)


def _declared_type(dialect: str, spec: Any) -> pa.DataType | None:
    """The Arrow type for a column as the driver describes it; None: decide from values."""
    if not spec:
        return None
    code, precision, scale = spec
    if dialect == "postgresql":
        if code == _PG_NUMERIC:
            # numeric(p, s) is exact in a decimal; an unconstrained numeric may hold any
            # number of digits and goes out as its exact text.
            if precision and 0 < precision <= 38:
                return pa.decimal128(precision, scale or 0)
            return pa.string()
        return _PG_ARROW.get(code, pa.string())
    if code in _MYSQL_DECIMAL:
        # PyMySQL gives the display length (digits + sign + point): never below precision.
        digits = max(1, min(76, int(precision or 38)))
        return pa.decimal128(digits, scale or 0) if digits <= 38 else \
            pa.decimal256(digits, scale or 0)
    return _MYSQL_ARROW.get(code)


def _value_type(values: list) -> pa.DataType:
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


def _arrow_column(values: tuple, kind: pa.DataType, name: str) -> pa.Array:
    if kind == pa.string():
        values = [_arrow_text(v) for v in values]
    elif kind == pa.binary():
        values = [bytes(v) if isinstance(v, bytearray | memoryview) else v for v in values]
    try:
        return pa.array(values, type=kind, memory_pool=_POOL)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise SqlError(ErrorCode.QUERY_FAILED,
                       f"Column '{name}' has a value that is not {kind} ({exc}); CAST the "
                       f"column in the statement to one type") from None


def arrow_stream(stream: TableStream, metadata: dict[str, str]) -> Iterator[bytes]:
    sink = io.BytesIO()
    batches = stream.batches()
    first = next(batches, [])
    columns = list(zip(*first, strict=True)) if first else [() for _ in stream.columns]
    kinds = []
    for i in range(len(stream.columns)):
        spec = stream.types[i] if i < len(stream.types) else None
        declared = _declared_type(stream.dialect, spec)
        kinds.append(declared if declared is not None else _value_type(list(columns[i])))
    schema = pa.schema([pa.field(n, k) for n, k in zip(stream.columns, kinds, strict=True)],
                       metadata=metadata)
    with pa.ipc.new_stream(sink, schema) as writer:
        batch = first
        while True:
            if batch:
                arrays = [_arrow_column(col, k, n) for col, k, n in
                          zip(zip(*batch, strict=True), kinds, stream.columns, strict=True)]
                writer.write_batch(pa.record_batch(arrays, schema=schema))
                del arrays
            chunk = sink.getvalue()
            if chunk:
                yield chunk
                sink.seek(0)
                sink.truncate()
            batch = next(batches, None)
            if batch is None:
                break
    yield sink.getvalue()  # the end-of-stream marker
