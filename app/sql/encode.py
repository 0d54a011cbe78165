"""Result values -> JSON, fast: the C encoder does the common types, a hook the rest.

API.md: numbers as numbers (NaN/±inf as null), Decimal as an exact number, date/time/
datetime as ISO 8601, intervals as ISO 8601 durations, bytes as base64, UUID as text,
JSON/JSONB and arrays as JSON; any other type as its text, never a 500.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
import re
import secrets
import uuid
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import orjson
from flask import Response, after_this_request, current_app

from ..malloc import release_free_memory
from .errors import ErrorCode


def iso_duration(value: timedelta) -> str:
    """timedelta -> ISO 8601 duration: P1DT2H3M4.5S (negative: -P…)."""
    if value < timedelta(0):
        return "-" + iso_duration(-value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = "P" + (f"{value.days}D" if value.days else "")
    clock = ""
    if hours:
        clock += f"{hours}H"
    if minutes:
        clock += f"{minutes}M"
    if seconds or value.microseconds or not (value.days or clock):
        frac = f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
        clock += f"{seconds}{frac}S"
    return text + ("T" + clock if clock else "")


def _finite(value: Any) -> Any:
    """Replace NaN/±inf floats (also inside arrays and JSON) with None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def dumps(body: dict[str, Any]) -> bytes:
    """Encode a response body (whose ``data`` holds raw driver values) to JSON bytes.

    orjson does the common types natively (NaN/±inf as null, dates and times as ISO 8601,
    UUIDs) several times faster; a Decimal goes in as its exact digits. What orjson refuses
    (integers beyond 64 bits, zone-aware times, non-string keys in JSON values) takes the
    standard encoder's path below, which handles everything.
    """
    try:
        return orjson.dumps(body, default=_orjson_default)
    except (TypeError, orjson.JSONEncodeError):
        return _dumps_stdlib(body)


def _orjson_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value)) if value.is_finite() else None
    if isinstance(value, datetime | date | time):
        raise TypeError("left to the standard encoder")  # e.g. a time with a zone
    return _convert(value)


def _convert(value: Any) -> Any:
    """JSON form of a value neither encoder knows (Decimal excepted)."""
    if isinstance(value, timedelta):
        return iso_duration(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID | ipaddress._BaseAddress | ipaddress._BaseNetwork):
        return str(value)
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, float):  # a float subclass the C encoder refused
        return _finite(float(value))
    return str(value)


def _dumps_stdlib(body: dict[str, Any]) -> bytes:
    marker = f"@@quarry-decimal-{secrets.token_hex(8)}@@"
    saw_decimal = False

    def convert(value: Any) -> Any:
        nonlocal saw_decimal
        if isinstance(value, Decimal):
            if not value.is_finite():
                return None
            saw_decimal = True
            return marker + str(value)  # spliced in as a bare number below
        if isinstance(value, datetime | date | time):
            return value.isoformat()
        return _convert(value)

    try:
        text = json.dumps(body, default=convert, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
    except ValueError:
        # A NaN or infinity somewhere: the slow path cleans every value once.
        body = {**body, "data": [_finite(list(row)) for row in body.get("data", [])]}
        text = json.dumps(body, default=convert, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
    if saw_decimal:
        text = re.sub('"' + re.escape(marker) + r'([-+0-9.Ee]+)"', r"\1", text)
    return text.encode("utf-8")


def sql_response(body: dict[str, Any]) -> Response:
    """The HTTP answer of /api/sql/query: always 200, the outcome is in ``type``."""
    payload = dumps(body)
    limit = current_app.config["SQL_MAX_RESPONSE_BYTES"]
    if len(payload) > limit:
        payload = dumps({
            "type": "error", "error_code": int(ErrorCode.RESPONSE_TOO_LARGE),
            "error_message": f"The result is {len(payload)} bytes of JSON, over the limit of "
                             f"{limit} bytes; select fewer rows or columns",
            "column_names": [], "context": body.get("context", {})})
    if len(payload) > LARGE_RESULT_BYTES:
        # The rows it was built from are freed by then: give that memory back, or a worker
        # would stay at its largest result's size.
        after_this_request(_release_memory)
    return Response(payload, status=200, mimetype="application/json")


LARGE_RESULT_BYTES = 1024 * 1024


def _release_memory(response: Response) -> Response:
    release_free_memory()
    return response
