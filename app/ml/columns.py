"""Column typing: what each column of a training frame is, and how a value is made usable.

Rows arrive from any SQL database through the data path as Python values (ints, floats,
Decimals, strings, datetimes, None), so types are decided from the values, not only from
the dtype pandas guessed. The same conversions run at training and at prediction, so a row
sent to ``predict`` is read exactly the way the training rows were.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin

# Kinds a column can take; the first four are used as inputs, the rest are left out.
NUMERIC = ("integer", "float")
USED_KINDS = ("integer", "float", "categorical", "binary", "datetime")

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}"
                       r"([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")
_ID_NAME = re.compile(r"(^|_)(id|uuid|guid|key)$|^(id|uuid|guid)_|Id$|ID$")
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}
# Up to this many distinct strings a column is categorical whatever the row count.
CATEGORICAL_MAX_DISTINCT = 50


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    # integer|float|categorical|binary|datetime (used); text|identifier|constant|empty (left out)
    kind: str
    reason: str | None = None  # why the column is left out, when it is
    distinct: int | None = None  # distinct values at training (categorical columns)
    # Whether training rows lacked a value: a NULL at prediction is then a known case;
    # without gaps in training it is flagged as an unknown input.
    gaps: bool = True
    # The values training saw (categorical columns): any other is flagged as unknown.
    seen: frozenset[str] | None = None
    # "text" when the source held text that this kind was read from (numbers, true/false or
    # dates written as text): the column is still text, the model derives the value from it.
    source: str | None = None

    @property
    def used(self) -> bool:
        return self.kind in USED_KINDS


def normalise(series: pd.Series) -> tuple[pd.Series, str]:
    """The series converted to one clean dtype, and its base type.

    Base types: ``bool`` (float 0/1), ``int`` / ``float`` (float64), ``datetime``
    (naive UTC datetime64), ``string`` (object of str, NaN for missing).
    """
    if pd.api.types.is_bool_dtype(series):
        return series.astype("float64"), "bool"
    if pd.api.types.is_numeric_dtype(series):
        values = series.astype("float64")
        return values, "int" if _integral(values) else "float"
    if pd.api.types.is_datetime64_any_dtype(series):
        return _naive_utc(series), "datetime"
    present = series.dropna()
    if present.empty:
        return pd.Series(np.nan, index=series.index, dtype="float64"), "float"
    types = {type(v) for v in present}
    if types <= {bool, np.bool_}:
        return series.map(_bool_or_nan).astype("float64"), "bool"
    if all(issubclass(t, int | float | decimal.Decimal | np.number) for t in types) \
            and not types & {bool, np.bool_}:
        values = pd.to_numeric(series.map(_float_or_nan), errors="coerce").astype("float64")
        return values, "int" if _integral(values) else "float"
    if all(issubclass(t, dt.date) for t in types):
        return _naive_utc(pd.to_datetime(series, utc=True, errors="coerce")), "datetime"
    text = series if types <= {str} else series.map(
        lambda v: v if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    # The tests below look at each distinct value once: a column of 100 000 rows holds a
    # few hundred at most when it is a category or a date, and a Python call per row cost
    # seconds a column.
    distinct = pd.Series(text.dropna().unique(), dtype=object)
    numbers = pd.to_numeric(distinct, errors="coerce")
    if numbers.notna().all():
        values = pd.to_numeric(text, errors="coerce").astype("float64")
        return values, "int" if _integral(values) else "float"
    lowered = {v.strip().lower() for v in distinct}
    if lowered <= (_TRUE | _FALSE) and len(lowered) <= 2 and not lowered <= {"0", "1"}:
        return text.map(_bool_or_nan).astype("float64"), "bool"
    if distinct.map(lambda v: bool(_ISO_DATE.match(v.strip()))).all():
        parsed = pd.to_datetime(text, utc=True, errors="coerce", format="ISO8601")
        if parsed.notna().sum() == text.notna().sum():
            return _naive_utc(parsed), "datetime"
    return text.astype(object).where(text.notna(), np.nan), "string"


def is_text(series: pd.Series) -> bool:
    """Whether the source held text in this column (every present value a string)."""
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series) \
            or pd.api.types.is_datetime64_any_dtype(series):
        return False
    distinct = series.dropna().unique()
    return len(distinct) > 0 and all(isinstance(v, str) for v in distinct)


def infer_column(name: str, values: pd.Series, base: str, text: bool = False) -> ColumnInfo:
    """What an input column is and whether it is used (``values`` normalised; ``text``: the
    source held text, which a numeric, binary or date kind was read from)."""
    info = _infer(name, values, base)
    gaps = bool(values.isna().any())
    seen = frozenset(values.dropna().unique()) if info.kind == "categorical" else None
    source = "text" if text and info.kind in ("integer", "float", "binary", "datetime") else None
    return ColumnInfo(info.name, info.kind, info.reason, info.distinct, gaps, seen, source)


def _infer(name: str, values: pd.Series, base: str) -> ColumnInfo:
    present = values.dropna()
    if present.empty:
        return ColumnInfo(name, "empty", "left out: the column holds no values")
    distinct = present.nunique()
    if distinct <= 1:
        return ColumnInfo(name, "constant", "left out: the column holds a single value")
    if base == "bool":
        return ColumnInfo(name, "binary")
    if base == "datetime":
        return ColumnInfo(name, "datetime")
    if base in ("int", "float"):
        if distinct == 2 and set(present.unique()) == {0.0, 1.0}:
            return ColumnInfo(name, "binary")  # a boolean stored as 0/1, as SQL often does
        if base == "int" and distinct == len(present) and len(present) >= 20 \
                and (_ID_NAME.search(name) or _is_sequence(present)):
            return ColumnInfo(name, "identifier",
                              "left out: ID-like (integers, every value distinct)")
        return ColumnInfo(name, "integer" if base == "int" else "float")
    # Strings: few distinct values are categories; long distinct values are free text;
    # short values nearly all distinct are identifiers (codes, names, keys).
    ratio = distinct / len(present)
    if distinct <= CATEGORICAL_MAX_DISTINCT or ratio <= 0.1:
        return ColumnInfo(name, "categorical", distinct=distinct)
    words = present.map(lambda v: len(v.split())).mean()
    if words >= 3:
        return ColumnInfo(name, "text",
                          f"left out: free text ({distinct} distinct values, "
                          f"{words:.1f} words on average)")
    if ratio >= 0.9:
        return ColumnInfo(name, "identifier",
                          f"left out: ID-like ({distinct} distinct values in {len(present)} rows)")
    return ColumnInfo(name, "categorical", distinct=distinct)


class UnknownValue(Exception):
    """A value of a prediction row that the model cannot read as its column's kind, or has
    not seen in training: the row is still predicted, with the value taken as missing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def coerce_value(column: ColumnInfo, value: Any, limit: float | None = None) -> Any:
    """One value of a prediction row, converted as the training values were.

    Raises UnknownValue (saying why) when the value cannot be of the column's kind, or is a
    category or a NULL that training never had, or a number larger than ``limit``; the
    caller then predicts with it missing.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        if not column.gaps:
            raise UnknownValue("missing, and training had no missing values")
        return np.nan
    if isinstance(value, dict | list | tuple | set | bytes | bytearray | memoryview):
        raise _unreadable(column, value)
    kind = column.kind
    if kind in NUMERIC:
        if isinstance(value, bool):  # SQLite and MySQL store booleans as 0/1 integers
            return float(value)
        try:
            if isinstance(value, int | float | decimal.Decimal | np.number):
                number = float(value)
            elif isinstance(value, str):
                number = float(value.strip())
            else:
                raise _unreadable(column, value)
        except (ValueError, OverflowError):  # "rotary"; an integer beyond float's range
            raise _unreadable(column, value) from None
        if not math.isfinite(number):  # scikit-learn refuses infinities
            raise _unreadable(column, value)
        if limit is not None and abs(number) > limit:
            raise UnknownValue(f"{shown(value)} is too large to use")
        return number
    if kind == "binary":
        result = _bool_or_nan(value)
        if result is None:
            raise _unreadable(column, value)
        return result
    if kind == "datetime":
        if isinstance(value, dt.date):
            stamp = pd.Timestamp(value)
        elif isinstance(value, str) and _ISO_DATE.match(value.strip()):
            try:
                stamp = pd.Timestamp(value.strip())
            except ValueError:
                raise _unreadable(column, value) from None
        else:
            raise _unreadable(column, value)
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        return stamp
    # categorical: numbers and booleans are read as their text, as SQL results often are
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    else:
        text = str(value)
    if column.seen is not None and text not in column.seen:
        # The encoders read it as missing (or as the rare values' group); say so.
        raise UnknownValue(f"{shown(value)} was not seen in training")
    return text


def _unreadable(column: ColumnInfo, value: Any) -> UnknownValue:
    expected = {"integer": "a number", "float": "a number", "binary": "a boolean",
                "datetime": "an ISO 8601 date or timestamp",
                "categorical": "a category"}.get(column.kind, "a value")
    return UnknownValue(f"{shown(value)} is not {expected}")


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bool_or_nan(value: Any) -> float | None:
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, int | float) and value in (0, 1):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return 1.0
        if text in _FALSE:
            return 0.0
    return None


def _float_or_nan(value: Any) -> float:
    return np.nan if value is None else float(value)


def _integral(values: pd.Series) -> bool:
    present = values.dropna()
    return bool(len(present)) and bool(np.all(np.isfinite(present))) \
        and bool((present == np.round(present)).all())


def _is_sequence(values: pd.Series) -> bool:
    ordered = np.sort(values.to_numpy())
    return bool(np.all(np.diff(ordered) == 1))


def _naive_utc(series: pd.Series) -> pd.Series:
    if getattr(series.dt, "tz", None) is not None:
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    return series.astype("datetime64[ns]")


class DatetimeParts(BaseEstimator, TransformerMixin):
    """Datetime columns → year, month, day, weekday, hour and epoch days, as floats."""

    PARTS = ("year", "month", "day", "day_of_week", "hour")

    def fit(self, X, y=None):  # noqa: N803 - scikit-learn's naming
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):  # noqa: N803
        frame = pd.DataFrame(X)
        out = []
        for name in frame.columns:
            stamps = pd.to_datetime(frame[name], errors="coerce")
            for part in self.PARTS:
                out.append(getattr(stamps.dt, part).astype("float64").to_numpy())
            epoch = (stamps - pd.Timestamp("1970-01-01")) / pd.Timedelta(days=1)
            out.append(epoch.astype("float64").to_numpy())
        return np.column_stack(out) if out else np.empty((len(frame), 0))

    def get_feature_names_out(self, input_features=None):
        names = input_features if input_features is not None else []
        return np.array([f"{n}_{p}" for n in names for p in (*self.PARTS, "epoch_days")],
                        dtype=object)
