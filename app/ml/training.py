"""Training: type the columns, try several scikit-learn pipelines, keep the best, describe it.

Everything ``describe`` answers is measured here, on rows the candidate never saw: the
held-out score of each candidate, the permutation importance of each input column and,
for regression, the spread of held-out residuals that gives predictions their interval.
The selected pipeline is then refit on every row before it is stored.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import Any

import joblib
import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.inspection import permutation_importance
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import balanced_accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from .columns import NUMERIC, ColumnInfo, DatetimeParts, infer_column, normalise
from .errors import METRICS, PROBLEMS, TrainingError
from .threads import one_openmp_thread

ARTIFACT_FORMAT = 1
MIN_ROWS = 10
# An integer target with at most this many distinct values is read as classes.
CLASS_MAX_DISTINCT = 20
# Random forests draw at most this many rows per tree: past it more rows add time, not skill.
FOREST_MAX_SAMPLES = 20_000
# Permutation importance is measured on at most this many held-out rows.
IMPORTANCE_MAX_ROWS = 2_000
# One-hot columns per categorical input; rarer categories share one "infrequent" column.
MAX_CATEGORIES = 30
_SCORERS = {"classification": "balanced_accuracy", "regression": "r2"}
_ENCODERS = {
    "integer": "SimpleImputer(median) + StandardScaler",
    "float": "SimpleImputer(median) + StandardScaler",
    "categorical": "SimpleImputer(constant) + OneHotEncoder",
    "binary": "SimpleImputer(most_frequent)",
    "datetime": "DatetimeParts + SimpleImputer(median) + StandardScaler",
}


@dataclass
class TrainResult:
    artifact: bytes          # joblib bytes of the fitted pipeline and what predict needs
    accuracy: float          # held-out score of the selected candidate
    description: dict[str, Any]  # {"info": {...}, "features": [...], "model": [...]}
    problem: str
    training_rows: int


def train(frame: pd.DataFrame, target: str, *, problem: str | None = None,
          validation_fraction: float = 0.2, random_state: int = 0) -> TrainResult:
    """Train a model predicting ``target`` from the other columns of ``frame``."""
    with one_openmp_thread():
        return _train(frame, target, problem, validation_fraction, random_state)


@dataclass
class _Target:
    """The PREDICT column, cleaned: its name in the frame, its values, and the problem."""

    name: str
    values: np.ndarray   # labels (classification) or floats (regression)
    base: str            # normalise()'s base type: bool | int | float | string | datetime
    problem: str


@dataclass
class _Selection:
    """The candidate estimators tried, and the best one, fitted on the training part only."""

    tried: list[dict[str, Any]]
    pipeline: Pipeline
    score: float


def _train(frame: pd.DataFrame, target: str, problem: str | None, validation_fraction: float,
           random_state: int) -> TrainResult:
    _check_request(frame, problem, validation_fraction)
    frame, goal = _target(frame, target, problem)
    columns = [infer_column(name, *normalise(frame[name]))
               for name in frame.columns if name != goal.name]
    used = _inputs(columns, goal.name)
    X = prepare_frame(frame, used)  # noqa: N806 - scikit-learn's naming
    X_fit, X_held, y_fit, y_held = _split(X, goal.values, goal.problem,  # noqa: N806
                                          validation_fraction, random_state)
    selection = _select(used, goal.problem, X_fit, y_fit, X_held, y_held, random_state)
    importances = _importances(selection.pipeline, X_held, y_held, goal.problem, random_state)
    interval = _residual_interval(selection.pipeline, X_held, y_held) \
        if goal.problem == "regression" else None
    # Measured on held-out rows; the model that is stored learns from every row.
    final = clone(selection.pipeline).fit(X, goal.values)
    _single_threaded(final)
    accuracy = round(float(selection.score), 4)
    description = _describe(final, goal, columns, used, selection.tried, accuracy,
                            importances, training_rows=len(X), validation_rows=len(X_held))
    return TrainResult(artifact=_artifact(final, goal, used, interval), accuracy=accuracy,
                       description=description, problem=goal.problem,
                       training_rows=int(len(X)))


def _check_request(frame: pd.DataFrame, problem: str | None,
                   validation_fraction: float) -> None:
    if problem is not None and problem not in PROBLEMS:
        raise TrainingError(f"problem must be one of {', '.join(PROBLEMS)}, not {problem!r}")
    if not 0.0 < validation_fraction < 1.0:
        raise TrainingError("validation_fraction must be between 0 and 1 (exclusive), "
                            f"not {validation_fraction!r}")
    if frame.shape[0] == 0:
        raise TrainingError("The training query returned no rows")


def _target(frame: pd.DataFrame, target: str, problem: str | None
            ) -> tuple[pd.DataFrame, _Target]:
    """The rows that have a target value, and the target: enough rows, more than one value."""
    target = _find_column(frame, target)
    y_raw, y_base = normalise(frame[target])
    keep = y_raw.notna().to_numpy()
    frame, y_raw = frame.loc[keep], y_raw[keep]
    if len(y_raw) < MIN_ROWS:
        raise TrainingError(f"Too few rows to train: {len(y_raw)} with a value of "
                            f"'{target}' (at least {MIN_ROWS} are needed)")
    if y_raw.nunique() < 2:
        raise TrainingError(f"The target column '{target}' is constant "
                            f"({y_raw.iloc[0]!r} in every row): there is nothing to predict")
    problem = _problem(target, y_raw, y_base, problem)
    y = _labels(y_raw, y_base) if problem == "classification" else y_raw.to_numpy(float)
    return frame, _Target(target, y, y_base, problem)


def _inputs(columns: list[ColumnInfo], target: str) -> list[ColumnInfo]:
    """The input columns that are used; TrainingError saying why when none is."""
    used = [c for c in columns if c.used]
    if not used:
        reasons = "; ".join(f"{c.name}: {c.reason}" for c in columns) or "no other columns"
        raise TrainingError(f"No usable input column to predict '{target}' from ({reasons})")
    return used


def _select(used: list[ColumnInfo], problem: str, X_fit, y_fit, X_held, y_held,  # noqa: N803
            random_state: int) -> _Selection:
    """Fit every candidate on the training part, score it on the held-out part, keep the best."""
    tried: list[dict[str, Any]] = []
    best: tuple[float, Pipeline, str] | None = None
    for name, estimator in _candidates(problem, len(X_fit), random_state):
        pipeline = _pipeline(used, estimator)
        started = time.perf_counter()
        record = {"name": name, "performance": None, "training_time": None, "selected": 0,
                  "accuracy_functions": [METRICS[problem]]}
        tried.append(record)
        try:
            pipeline.fit(X_fit, y_fit)
            score = _score(problem, y_held, pipeline.predict(X_held))
        except (ValueError, TypeError, MemoryError) as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            continue
        finally:
            record["training_time"] = round(time.perf_counter() - started, 3)
        record["performance"] = round(score, 4)
        if best is None or score > best[0]:
            best = (score, pipeline, name)
    if best is None:
        raise TrainingError("Every candidate estimator failed: "
                            + "; ".join(f"{t['name']}: {t['error']}" for t in tried))
    score, pipeline, chosen = best
    for record in tried:
        record["selected"] = int(record["name"] == chosen)
    return _Selection(tried, pipeline, score)


def _artifact(final: Pipeline, goal: _Target, used: list[ColumnInfo],
              interval: tuple[float, float] | None) -> bytes:
    """The stored model: the fitted pipeline and what predict needs besides (joblib bytes)."""
    bundle = {
        "format": ARTIFACT_FORMAT,
        "pipeline": final,
        "target": goal.name,
        "problem": goal.problem,
        "columns": [(c.name, c.kind) for c in used],
        "target_kind": _target_kind(goal.base, goal.problem),
        "interval": interval,
    }
    buffer = io.BytesIO()
    joblib.dump(bundle, buffer, compress=3)
    return buffer.getvalue()


def _describe(final: Pipeline, goal: _Target, columns: list[ColumnInfo],
              used: list[ColumnInfo], tried: list[dict[str, Any]], accuracy: float,
              importances: dict[str, float], *, training_rows: int,
              validation_rows: int) -> dict[str, Any]:
    """What describe answers: {"info": {...}, "features": [...], "model": [...]}."""
    problem = goal.problem
    info = {
        "accuracies": {METRICS[problem]: accuracy},
        "column_importances": importances,
        "inputs": [c.name for c in used],
        "outputs": [goal.name],
        "model": pipeline_string(final),
        "problem": problem,
        "training_rows": int(training_rows),
        "validation_rows": int(validation_rows),
        "ignored_columns": {c.name: c.reason for c in columns if not c.used},
    }
    features = [
        {"column": c.name, "type": c.kind, "encoder": _ENCODERS.get(c.kind),
         "role": "feature" if c.used else "ignored",
         **({"reason": c.reason} if c.reason else {})}
        for c in columns
    ]
    features.append({"column": goal.name, "type": _target_kind(goal.base, problem),
                     "encoder": "LabelEncoder" if problem == "classification" else "identity",
                     "role": "target"})
    return {"info": info, "features": features, "model": tried}


def prepare_frame(frame: pd.DataFrame, used: list[ColumnInfo]) -> pd.DataFrame:
    """The input columns of a training frame, each normalised to the dtype of its kind."""
    out = {}
    for column in used:
        values, _ = normalise(frame[column.name])
        out[column.name] = values
    return pd.DataFrame(out, index=frame.index)


def pipeline_string(pipeline: Pipeline) -> str:
    """The fitted pipeline's components, in order, joined by ' --> '."""
    parts = []
    for _, step in pipeline.steps:
        if isinstance(step, ColumnTransformer):
            inner = []
            for name, transformer, _cols in step.transformers_:
                if name == "remainder":
                    continue
                steps = transformer.steps if isinstance(transformer, Pipeline) \
                    else [(name, transformer)]
                inner.append(f"{name}: " + " + ".join(type(s).__name__ for _, s in steps))
            parts.append(f"ColumnTransformer[{'; '.join(inner)}]")
        else:
            parts.append(type(step).__name__)
    return " --> ".join(parts)


def _find_column(frame: pd.DataFrame, target: str) -> str:
    if target in frame.columns:
        return target
    # Databases fold unquoted names (PostgreSQL to lower case): accept the same name in any case.
    matches = [c for c in frame.columns if str(c).lower() == target.lower()]
    if len(matches) == 1:
        return matches[0]
    raise TrainingError(f"Column '{target}' (the PREDICT target) is not in the training "
                        f"data; its columns are: {', '.join(map(str, frame.columns))}")


def _problem(target: str, y: pd.Series, base: str, requested: str | None) -> str:
    if base == "datetime":
        raise TrainingError(f"The target column '{target}' holds dates; predicting a date "
                            "is not supported")
    if requested == "regression":
        if base not in ("int", "float"):
            raise TrainingError(f"problem = 'regression' needs a numeric target, but "
                                f"'{target}' holds text or booleans")
        return "regression"
    if requested == "classification":
        return "classification"
    if base in ("string", "bool"):
        return "classification"
    if base == "int" and y.nunique() <= CLASS_MAX_DISTINCT:
        return "classification"
    return "regression"


def _labels(y: pd.Series, base: str) -> np.ndarray:
    if base == "bool":
        return y.map({1.0: True, 0.0: False}).to_numpy(dtype=bool)
    if base == "int":
        return y.to_numpy().astype(np.int64)
    if base == "float":
        return y.to_numpy(dtype=float)
    return y.to_numpy(dtype=object)


def _target_kind(base: str, problem: str) -> str:
    if base == "bool":
        return "binary"
    if base == "string":
        return "categorical"
    return "integer" if base == "int" else "float"


def _split(X, y, problem, fraction, random_state):  # noqa: N803
    stratify = None
    if problem == "classification":
        _, counts = np.unique(y, return_counts=True)
        held = int(np.ceil(len(y) * fraction))
        if counts.min() >= 2 and held >= len(counts) and len(y) - held >= len(counts):
            stratify = y
    try:
        return train_test_split(X, y, test_size=fraction, random_state=random_state,
                                stratify=stratify)
    except ValueError as exc:
        raise TrainingError(f"Cannot hold out {fraction:.0%} of {len(y)} rows: {exc}") from exc


def _candidates(problem: str, rows: int, random_state: int) -> list[tuple[str, Any]]:
    max_samples = min(1.0, FOREST_MAX_SAMPLES / max(rows, 1))
    max_samples = None if max_samples >= 1.0 else max_samples
    if problem == "classification":
        return [
            ("LogisticRegression", LogisticRegression(max_iter=2000)),
            ("RandomForestClassifier", RandomForestClassifier(
                n_estimators=60, max_samples=max_samples, min_samples_leaf=1, n_jobs=2,
                random_state=random_state)),
            ("HistGradientBoostingClassifier", HistGradientBoostingClassifier(
                max_iter=100, random_state=random_state)),
        ]
    return [
        ("Ridge", Ridge(alpha=1.0)),
        ("RandomForestRegressor", RandomForestRegressor(
            n_estimators=60, max_samples=max_samples, min_samples_leaf=2, n_jobs=2,
            random_state=random_state)),
        ("HistGradientBoostingRegressor", HistGradientBoostingRegressor(
            max_iter=100, random_state=random_state)),
    ]


def _pipeline(used: list[ColumnInfo], estimator: Any) -> Pipeline:
    groups: dict[str, list[str]] = {}
    for column in used:
        group = "numeric" if column.kind in NUMERIC else column.kind
        groups.setdefault(group, []).append(column.name)
    transformers = []
    if "numeric" in groups:
        transformers.append(("numeric", Pipeline([
            ("impute", SimpleImputer(strategy="median")),
            ("scale", StandardScaler())]), groups["numeric"]))
    if "categorical" in groups:
        transformers.append(("categorical", Pipeline([
            ("impute", SimpleImputer(strategy="constant", fill_value="__missing__")),
            ("encode", OneHotEncoder(handle_unknown="infrequent_if_exist",
                                     max_categories=MAX_CATEGORIES, sparse_output=False))]),
            groups["categorical"]))
    if "binary" in groups:
        transformers.append(("binary", Pipeline([
            ("impute", SimpleImputer(strategy="most_frequent"))]), groups["binary"]))
    if "datetime" in groups:
        transformers.append(("datetime", Pipeline([
            ("parts", DatetimeParts()),
            ("impute", SimpleImputer(strategy="median")),
            ("scale", StandardScaler())]), groups["datetime"]))
    preprocess = ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0)
    return Pipeline([("preprocess", preprocess), ("estimator", estimator)])


def _score(problem: str, y_true, y_pred) -> float:
    if problem == "classification":
        return float(balanced_accuracy_score(y_true, y_pred))
    return float(r2_score(y_true, y_pred))


def _importances(model: Pipeline, X, y, problem: str, random_state: int) -> dict[str, float]:  # noqa: N803
    if len(X) > IMPORTANCE_MAX_ROWS:
        X, _, y, _ = train_test_split(X, y, train_size=IMPORTANCE_MAX_ROWS,  # noqa: N806
                                      random_state=random_state)
    repeats = 5 if len(X) * X.shape[1] <= 20_000 else 3
    result = permutation_importance(model, X, y, scoring=_SCORERS[problem],
                                    n_repeats=repeats, random_state=random_state)
    # A column whose shuffling does not hurt (or helps, by chance) gets 0; the most useful 1.
    raw = np.clip(np.nan_to_num(result.importances_mean), 0.0, None)
    top = raw.max()
    scaled = raw / top if top > 0 else raw
    return {name: round(float(v), 4) for name, v in zip(X.columns, scaled, strict=True)}


def _residual_interval(model: Pipeline, X, y) -> tuple[float, float]:  # noqa: N803
    residuals = np.asarray(y, dtype=float) - model.predict(X)
    low, high = np.quantile(residuals, [0.05, 0.95])
    return float(low), float(high)


def _single_threaded(pipeline: Pipeline) -> None:
    # Predictions are small and many: thread start-up would cost more than it saves.
    estimator = pipeline.steps[-1][1]
    if "n_jobs" in estimator.get_params():
        estimator.set_params(n_jobs=1)
