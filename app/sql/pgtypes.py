"""PostgreSQL result types the native streams (``native.py``) can read as the row-by-row
path does, and the checks a stream makes before choosing one. Kept apart from ``native.py``
so that choosing needs no ADBC: that module is imported only when a native stream runs."""

from __future__ import annotations

from typing import Any

# PostgreSQL type OIDs.
BOOL, BYTEA, NAME, INT8, INT2, INT4, TEXT = 16, 17, 19, 20, 21, 23, 25
FLOAT4, FLOAT8, BPCHAR, VARCHAR, DATE, TIME = 700, 701, 1042, 1043, 1082, 1083
TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID = 1114, 1184, 1700, 2950
JSON, JSONB = 114, 3802

# Types ADBC reads into the same Arrow type as the row-by-row path (numeric: as text,
# cast here to the column's decimal).
ARROW_TYPES = frozenset({BOOL, BYTEA, NAME, INT8, INT2, INT4, TEXT, FLOAT4, FLOAT8,
                         BPCHAR, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ})
# Types whose CSV text PostgreSQL can write as the row-by-row path does. Not float4: its
# text read back as a double by PostgreSQL is not always the double Python reads.
CSV_TYPES = frozenset({BOOL, NAME, INT8, INT2, INT4, TEXT, FLOAT8, BPCHAR,
                       VARCHAR, DATE, TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID})
TEXTUAL = frozenset({NAME, TEXT, BPCHAR, VARCHAR})


def arrow_eligible(types: list[Any], params: Any) -> bool:
    """Whether ADBC can read this result: no parameters, every column of a known type
    (numeric only with a precision Arrow's decimal can hold)."""
    if params:
        return False
    for code, precision, _scale in types:
        if code == NUMERIC:
            if not (precision and 0 < precision <= 38):
                return False
        elif code not in ARROW_TYPES:
            return False
    return bool(types)


def csv_eligible(types: list[Any]) -> bool:
    return bool(types) and all(spec[0] in CSV_TYPES for spec in types)
