"""Prediction: rows in, the same rows out with the predicted column and its confidence."""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import Any

import joblib
import numpy as np
import pandas as pd

from . import forecast as forecasting
from .columns import NUMERIC, ColumnInfo, UnknownValue, coerce_value
from .errors import PredictionError
from .fastpath import FastModel, compile_model
from .threads import one_openmp_thread
from .training import ARTIFACT_FORMAT, TrainResult

# The nominal coverage of the regression interval (5th to 95th percentile of residuals).
INTERVAL_LEVEL = 0.9
# When a batch overflows (a value like 1e308, scaled), it is predicted again with every
# number beyond this size taken as unknown, rather than failing every row of the batch.
TOO_LARGE = 1e15


@dataclass
class LoadedModel:
    """An artifact unpacked once, so that repeated predictions skip joblib."""

    pipeline: Any
    target: str
    problem: str
    columns: list[ColumnInfo]
    interval: tuple[float, float] | None
    # The same model taking rows of floats, without pandas (fastpath.py); None: use the
    # whole pipeline on a frame.
    fast: FastModel | None = None


def train_forecast(frame: pd.DataFrame, target: str, options: dict[str, Any], *,
                   time_budget_s: float | None = None) -> TrainResult:
    """A forecasting model, in the result shape of tabular training."""
    artifact, accuracy, description = forecasting.train(frame, target, options,
                                                        time_budget_s=time_budget_s)
    return TrainResult(artifact=artifact, accuracy=accuracy, description=description,
                       problem="forecasting", training_rows=len(frame))


def load_model(artifact: bytes) -> LoadedModel | forecasting.Forecaster:
    """Unpack an artifact written by ``train`` or ``train_forecast``."""
    bundle = joblib.load(io.BytesIO(artifact))
    if isinstance(bundle, dict) and bundle.get("kind") == forecasting.KIND:
        return bundle["forecaster"]
    if not isinstance(bundle, dict) or bundle.get("format") != ARTIFACT_FORMAT:
        raise PredictionError("The stored model was written by an incompatible version; "
                              "retrain it")
    # (name, kind) in models trained before unknown inputs were flagged; (name, kind, more)
    # since: whether training had gaps, and the categories it saw.
    columns = [ColumnInfo(entry[0], entry[1]) if len(entry) == 2 else
               ColumnInfo(entry[0], entry[1], gaps=entry[2]["gaps"],
                          seen=frozenset(entry[2]["seen"]) if entry[2].get("seen") is not None
                          else None, source=entry[2].get("source"))
               for entry in bundle["columns"]]
    fast = None
    if all(c.kind in NUMERIC or c.kind == "binary" for c in columns):
        fast = compile_model(bundle["pipeline"], [c.name for c in columns])
    return LoadedModel(pipeline=bundle["pipeline"], target=bundle["target"],
                       problem=bundle["problem"], columns=columns,
                       interval=bundle["interval"], fast=fast)


def predict(artifact: bytes | LoadedModel | forecasting.Forecaster,
            rows: list[dict[str, Any]], *, whole_columns: bool = False
            ) -> list[dict[str, Any]]:
    """Each row plus ``<target>``, ``<target>_confidence`` and ``<target>_explain``.

    A value the model cannot read as its column's kind, a category it has not seen, or a
    missing value where training had none is unknown: the row is predicted with it missing,
    and ``<target>_explain`` lists it under ``unknown_inputs``. Keys the model does not know
    are kept in the answer but not used. ``whole_columns``: the rows are a table (a JOIN),
    so an input column that none of them has is a wrong shape, a PredictionError naming it.
    """
    model = artifact if isinstance(artifact, LoadedModel | forecasting.Forecaster) \
        else load_model(artifact)
    if isinstance(model, forecasting.Forecaster):
        # The rows are the history; the answer is the next HORIZON rows of each series.
        with one_openmp_thread():
            return forecasting.forecast(model, rows)
    if not rows:
        return []
    if whole_columns:
        _check_columns(model.columns, rows)
    with one_openmp_thread():
        # Finite but extreme inputs (1e308) overflow once scaled: the overflow raises instead
        # of feeding infinities to scikit-learn (a ValueError, so a 500), and the batch is
        # predicted again with such numbers unknown, so those rows are flagged, not failed.
        with np.errstate(over="raise"):
            try:
                return _predict(model, rows)
            except FloatingPointError:
                pass
            try:
                return _predict(model, rows, limit=TOO_LARGE)
            except FloatingPointError:
                raise PredictionError("The model cannot predict from these values: a "
                                      "number is too large") from None


def _check_columns(columns: list[ColumnInfo], rows: list[dict[str, Any]]) -> None:
    given = {str(k).lower() for row in rows[:1] if isinstance(row, dict) for k in row}
    absent = [c.name for c in columns if c.name.lower() not in given]
    if absent:
        raise PredictionError(
            f"The rows have no column {', '.join(repr(n) for n in absent)}, which the model "
            f"takes as input (its inputs: {', '.join(c.name for c in columns)})",
            column=absent[0])


def _predict(model: LoadedModel, rows: list[dict[str, Any]], limit: float | None = None
             ) -> list[dict[str, Any]]:
    # Row number -> {column: why its value was unknown}, for the rows that had one.
    unknown: dict[int, dict[str, str]] = {}
    if model.fast is not None:
        # The estimator alone, on the matrix the preprocessing would have made.
        matrix: Any = _float_rows(model.columns, rows, unknown, limit)
        predictor: Any = model.fast
    else:
        matrix, predictor = _frame(model.columns, rows, unknown, limit), model.pipeline
    target = model.target
    keys = (target, f"{target}_confidence", f"{target}_explain")
    out = []
    if model.problem == "classification":
        probabilities = predictor.predict_proba(matrix)
        classes = [_native(c) for c in model.pipeline.classes_]
        # The explanation is JSON text, as json.dumps writes it (tests compare the two).
        heads = [f'{{"predicted_value": {_json(c)}, "confidence": ' for c in classes]
        best = probabilities.argmax(axis=1)
        for row, index, probs in zip(rows, best.tolist(), probabilities, strict=True):
            confidence = round(float(probs[index]), 4)
            explain = f'{heads[index]}{_json(confidence)}, "anomaly": null, "truth": null}}'
            if unknown:
                explain = _flagged(explain, unknown.get(len(out)))
            out.append(_answer(row, keys, classes[index], confidence, explain))
        return out
    low, high = model.interval or (0.0, 0.0)
    level = _json(INTERVAL_LEVEL)
    for row, raw in zip(rows, predictor.predict(matrix), strict=True):
        value = _native(raw)
        lower, upper = _native(raw + low), _native(raw + high)
        explain = (f'{{"predicted_value": {_json(value)}, "confidence": {level}, '
                   f'"anomaly": null, "truth": null, "confidence_lower_bound": {_json(lower)}, '
                   f'"confidence_upper_bound": {_json(upper)}}}')
        if unknown:
            explain = _flagged(explain, unknown.get(len(out)))
        answer = _answer(row, keys, value, INTERVAL_LEVEL, explain)
        answer[f"{target}_min"] = lower
        answer[f"{target}_max"] = upper
        out.append(answer)
    return out


def _flagged(explain: str, reasons: dict[str, str] | None) -> str:
    """The explanation with ``"unknown_inputs": {column: why}`` added, when there are any."""
    if not reasons:
        return explain
    return f'{explain[:-1]}, "unknown_inputs": {json.dumps(reasons)}}}'


def _json(value: Any) -> str:
    """``json.dumps(value)`` of one value; for a float or an int, its repr (what json.dumps
    writes for them) without the encoder's set-up, which cost more than the rest of a row."""
    kind = type(value)
    return repr(value) if kind is float and math.isfinite(value) or kind is int \
        else json.dumps(value)


_INT_LIMIT = 2 ** 1000  # ints beyond are left to coerce_value (float() may overflow)


def _values(columns: list[ColumnInfo], row: Any, number: int,
            unknown: dict[int, dict[str, str]], limit: float | None = None) -> list[Any]:
    """The row's value of each input column, read for the column's type; a value that cannot
    be is missing (NaN), and recorded in ``unknown`` under the row's number."""
    if not isinstance(row, dict):
        raise PredictionError(f"Row {number + 1} is not an object of column values")
    folded = None
    values = []
    for column in columns:
        if column.name in row:
            value = row[column.name]
        else:
            if folded is None:
                folded = {str(k).lower(): v for k, v in row.items()}
            value = folded.get(column.name.lower())
        try:
            values.append(coerce_value(column, value, limit))
        except UnknownValue as exc:
            unknown.setdefault(number, {})[column.name] = exc.reason
            values.append(np.nan)
    return values


def _float_rows(columns: list[ColumnInfo], rows: list[dict[str, Any]],
                unknown: dict[int, dict[str, str]], limit: float | None = None
                ) -> list[list[float]]:
    names = [c.name for c in columns] \
        if limit is None and all(c.kind in NUMERIC for c in columns) else None
    out = []
    for number, row in enumerate(rows):
        plain = _plain_numbers(row, names) if names is not None and type(row) is dict else None
        out.append(plain if plain is not None else
                   [math.nan if v is None else float(v)
                    for v in _values(columns, row, number, unknown, limit)])
    return out


def _plain_numbers(row: dict[str, Any], names: list[str]) -> list[float] | None:
    """The common case without ``coerce_value``'s checks: every input column present under
    its own name as a finite float or an int — what ``coerce_value`` would turn into the
    same float. None: anything else, left to ``_values`` (and its errors)."""
    values = []
    for name in names:
        value = row.get(name)
        kind = type(value)
        if kind is float and math.isfinite(value):
            values.append(value)
        elif kind is int and -_INT_LIMIT < value < _INT_LIMIT:
            values.append(float(value))
        else:
            return None
    return values


def _frame(columns: list[ColumnInfo], rows: list[dict[str, Any]],
           unknown: dict[int, dict[str, str]], limit: float | None = None) -> pd.DataFrame:
    data: dict[str, list[Any]] = {c.name: [] for c in columns}
    for number, row in enumerate(rows):
        values = _values(columns, row, number, unknown, limit)
        for column, value in zip(columns, values, strict=True):
            data[column.name].append(value)
    frame = {}
    for column in columns:
        values = data[column.name]
        if column.kind in NUMERIC or column.kind == "binary":
            frame[column.name] = pd.Series(values, dtype="float64")
        elif column.kind == "datetime":
            frame[column.name] = pd.to_datetime(pd.Series(values, dtype=object)) \
                .astype("datetime64[ns]")
        else:
            frame[column.name] = pd.Series(values, dtype=object)
    return pd.DataFrame(frame)


def _answer(row: dict[str, Any], keys: tuple[str, str, str], value: Any, confidence: float,
            explain: str) -> dict[str, Any]:
    answer = dict(row)
    answer[keys[0]] = value
    answer[keys[1]] = confidence
    answer[keys[2]] = explain
    return answer


def _native(value: Any) -> Any:
    """A numpy scalar as a JSON-friendly Python value (non-finite floats as None)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
