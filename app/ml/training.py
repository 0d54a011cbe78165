"""Training: type the columns, compare candidates by cross-validation, keep the best, describe it.

Everything ``describe`` answers is measured on rows the model that scored them never saw:
the cross-validated score of each candidate (``selection.py``), and, from the chosen
candidate's out-of-fold predictions, the calibration of its probabilities, the coverage of
its prediction interval and the permutation importance of each input column
(``measures.py``). The chosen candidate is then refit on every row before it is stored.
"""

from __future__ import annotations

import io
import time
import warnings
from dataclasses import dataclass
from typing import Any

import joblib
import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from .columns import NUMERIC, ColumnInfo, DatetimeParts, infer_column, is_text, normalise
from .diagnostics import pictures
from .errors import METRICS, PROBLEMS, TrainingError
from .measures import (
    CalibratedModel,
    Calibration,
    Importances,
    Interval,
    ScoreInterval,
    calibrate,
    importances,
    residual_interval,
    score_interval,
)
from .names import find_column
from .selection import FOLDS, Folds, Run, Search, candidates, label, make_folds
from .threads import joblib_backend, one_native_thread

ARTIFACT_FORMAT = 1
MIN_ROWS = 10
# An integer target with at most this many distinct values is read as classes.
CLASS_MAX_DISTINCT = 20
# One-hot columns per categorical input; rarer categories share one "infrequent" column.
MAX_CATEGORIES = 30
# The default time budget of training, in seconds: BUDGET_SMALL_S up to BUDGET_SMALL_ROWS
# rows, growing in proportion to BUDGET_MAX_S at BUDGET_MAX_ROWS rows and beyond.
BUDGET_SMALL_S, BUDGET_SMALL_ROWS = 6.0, 10_000
BUDGET_MAX_S, BUDGET_MAX_ROWS = 45.0, 100_000
# Share of the budget that importances may take after the search (they are cheap: batched).
IMPORTANCE_SHARE = 0.1
# A candidate already started may run this share of the budget past the search's deadline
# rather than lose its folds (so training ends within about 1.2 x the budget).
SLACK_SHARE = 0.1
# describe's target feature lists at most this many of its classes.
MAX_LISTED_VALUES = 100
_ENCODERS = {
    "integer": "SimpleImputer(median, missing flag) + StandardScaler",
    "float": "SimpleImputer(median, missing flag) + StandardScaler",
    "categorical": "SimpleImputer(constant) + OneHotEncoder",
    "binary": "SimpleImputer(most_frequent, missing flag)",
    "datetime": "DatetimeParts + SimpleImputer(median, missing flag) + StandardScaler",
}


@dataclass
class TrainResult:
    artifact: bytes          # joblib bytes of the fitted pipeline and what predict needs
    accuracy: float          # cross-validated mean score of the selected candidate
    description: dict[str, Any]  # {"info": {...}, "features": [...], "model": [...]}
    problem: str
    training_rows: int


def train(frame: pd.DataFrame, target: str, *, problem: str | None = None,
          validation_fraction: float = 0.2, time_budget_s: float | None = None,
          random_state: int = 0) -> TrainResult:
    """Train a model predicting ``target`` from the other columns of ``frame``.

    ``validation_fraction`` is the share held out when the data is too large for k-fold
    (100 000 rows or more); ``time_budget_s`` bounds the whole training — the search, the
    refit of its leader and the measures — to about 1.2 times it (default: scaled to the
    rows, see ``default_budget``).
    """
    with one_native_thread(), joblib_backend():
        return _train(frame, target, problem, validation_fraction, time_budget_s, random_state)


def default_budget(rows: int, columns: int) -> float:
    """Seconds of training when USING time_budget_s does not say (``columns`` is unused:
    the search already scales with them, as fits take longer)."""
    grown = (rows - BUDGET_SMALL_ROWS) / (BUDGET_MAX_ROWS - BUDGET_SMALL_ROWS)
    return round(BUDGET_SMALL_S + (BUDGET_MAX_S - BUDGET_SMALL_S) * min(1.0, max(0.0, grown)),
                 1)


@dataclass
class _Target:
    """The PREDICT column, cleaned: its name in the frame, its values, and the problem."""

    name: str
    values: np.ndarray   # labels (classification) or floats (regression)
    # normalise()'s base type (bool | int | float | string | datetime), or "text": the
    # source's own strings, kept as they were so that predictions answer them unchanged
    base: str
    problem: str


@dataclass
class _Measures:
    """What the chosen candidate's out-of-fold predictions told."""

    best: Run
    runs: list[Run]
    folds: Folds
    importances: Importances
    calibration: Calibration | None
    interval: Interval | None
    score_interval: ScoreInterval
    budget_s: float
    search_s: float
    choice: dict[str, Any]
    training_s: float = 0.0


def _train(frame: pd.DataFrame, target: str, problem: str | None, validation_fraction: float,
           time_budget_s: float | None, random_state: int) -> TrainResult:
    # The budget counts from here: reading the columns, the search, the refit and the measures.
    started = time.perf_counter()
    _check_request(frame, problem, validation_fraction)
    frame, goal = _target(frame, target, problem)
    # Each column is normalised once: on 100 000 rows that took seconds a column.
    normalised = {name: normalise(frame[name]) for name in frame.columns if name != goal.name}
    columns = [infer_column(name, *found, text=is_text(frame[name]))
               for name, found in normalised.items()]
    used = _inputs(columns, goal.name)
    X = pd.DataFrame({c.name: normalised[c.name][0] for c in used},  # noqa: N806
                     index=frame.index)
    budget = time_budget_s or default_budget(len(X), len(used))
    measures = _measure(used, X, goal, validation_fraction, budget, random_state, started)
    # Measured out of fold; the model that is stored learns from every row.
    fitted = _fit(_pipeline(used, clone(measures.best.candidate.estimator)), X, goal.values)
    _single_threaded(fitted)
    final = CalibratedModel(fitted, measures.calibration.temperature) \
        if measures.calibration else fitted
    interval = (measures.interval.low, measures.interval.high) if measures.interval else None
    measures.training_s = time.perf_counter() - started
    description = _describe(fitted, goal, columns, used, measures)
    return TrainResult(artifact=_artifact(final, goal, used, interval),
                       accuracy=round(measures.best.mean, 4), description=description,
                       problem=goal.problem, training_rows=int(len(X)))


def _measure(used: list[ColumnInfo], X: pd.DataFrame, goal: _Target,  # noqa: N803
             validation_fraction: float, budget: float, random_state: int,
             started: float) -> _Measures:
    """Compare the candidates on shared folds, then measure the winner out of fold."""
    search_started = time.perf_counter()
    y = goal.values
    folds = make_folds(y, goal.problem, random_state, validation_fraction)
    classes = np.unique(y) if goal.problem == "classification" else None
    # The search (with the leader's refit, which it keeps time for) may use what is left of
    # the budget but the importances' share.
    search = Search(lambda estimator: _pipeline(used, estimator), X, y, goal.problem,
                    classes, folds, started + budget * (1 - IMPORTANCE_SHARE),
                    slack=SLACK_SHARE * budget)
    try:
        best = search.run(candidates(goal.problem, len(X), random_state))
    except RuntimeError:
        raise TrainingError("Every candidate estimator failed: " + "; ".join(
            f"{r.candidate.family}: {r.error}" for r in search.runs if r.error)) from None
    search_s = time.perf_counter() - search_started
    scored = folds.scored
    calibration = interval = None
    if classes is not None:
        truth = np.searchsorted(classes, y[scored])
        calibration = calibrate(best.oof[scored], truth, random_state)
    else:
        interval = residual_interval(y[scored] - best.oof[scored], random_state)
    found = importances(best.models, X, y, folds, goal.problem,
                        max(0.0, min(IMPORTANCE_SHARE * budget,
                                     started + budget - time.perf_counter()
                                     - search.refit_reserve())), random_state)
    spread = score_interval(goal.problem, best.scores, y[scored],
                            search.predicted(best.oof[scored]),
                            round(len(scored) / folds.per_repeat), random_state,
                            folds.per_repeat)
    return _Measures(best, search.runs, folds, found, calibration, interval, spread, budget,
                     search_s, search.choice)


def _fit(pipeline: Pipeline, X: pd.DataFrame, y: np.ndarray) -> Pipeline:  # noqa: N803
    with warnings.catch_warnings():
        # The candidate was chosen by its score; a solver short of convergence still counts.
        warnings.simplefilter("ignore", ConvergenceWarning)
        return pipeline.fit(X, y)


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
    if is_text(frame[target]) and problem != "regression":
        # Classes are the source's own strings: 'yes'/'no', '007', '1'/'0' or a date written
        # as text come back from predictions exactly as the training rows held them (read
        # as booleans or numbers they came back as true/false, 7 or 1).
        source = frame[target]
        y_raw = pd.Series(source.to_numpy(dtype=object), index=source.index).where(
            source.notna().to_numpy(), None)
        y_base = "text"
    else:
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


def _artifact(final: Pipeline, goal: _Target, used: list[ColumnInfo],
              interval: tuple[float, float] | None) -> bytes:
    """The stored model: the fitted pipeline and what predict needs besides (joblib bytes)."""
    bundle = {
        "format": ARTIFACT_FORMAT,
        "pipeline": final,
        "target": goal.name,
        "problem": goal.problem,
        "columns": [(c.name, c.kind, {"gaps": c.gaps, "source": c.source,
                                      "seen": sorted(c.seen) if c.seen is not None else None})
                    for c in used],
        "target_kind": _target_kind(goal.base, goal.problem),
        "interval": interval,
    }
    buffer = io.BytesIO()
    joblib.dump(bundle, buffer, compress=3)
    return buffer.getvalue()


def _describe(fitted: Pipeline, goal: _Target, columns: list[ColumnInfo],
              used: list[ColumnInfo], m: _Measures) -> dict[str, Any]:
    """What describe answers: {"info": {...}, "features": [...], "model": [...]}."""
    problem = goal.problem
    metric = METRICS[problem]
    scores = np.asarray(m.best.scores)
    rows, scored = m.folds.rows, len(m.folds.scored)
    # One hold-out has no fold spread: the bootstrap spread of its score stands in.
    std = float(scores.std()) if len(scores) > 1 else m.score_interval.bootstrap_std
    se = m.best.standard_error(m.folds.test_share)
    info: dict[str, Any] = {
        "accuracies": {metric: round(m.best.mean, 4)},
        "column_importances": m.importances.share,
        "inputs": [c.name for c in used],
        "outputs": [goal.name],
        "model": pipeline_string(fitted),
        "problem": problem,
        "accuracy_std": {metric: round(std, 4)},
        # Where a new sample's score is expected to fall (SCORE_LEVEL of the time).
        "accuracy_interval": {metric: [round(m.score_interval.low, 4),
                                       round(m.score_interval.high, 4)]},
        # The standard error of the mean (None for one hold-out, see evaluation.interval).
        "accuracy_se": {metric: None if se is None else round(se, 4)},
        "folds": m.folds.per_repeat,
        "repeats": m.folds.repeats,
        "evaluation": {
            "method": m.folds.method,
            "metric": metric,
            "mean": round(m.best.mean, 4),
            "std": round(std, 4),
            "standard_error": None if se is None else round(se, 4),
            "standard_error_method": "s x sqrt(1/J + held-out rows / training rows of a "
                                     "fold), s the standard deviation (n-1) of the J fold "
                                     "scores (Nadeau and Bengio's correction: the folds "
                                     "share rows)",
            "folds": m.folds.per_repeat,
            "repeats": m.folds.repeats,
            "fold_scores": [round(float(v), 4) for v in scores],
            "rows_scored": scored,
            "interval": m.score_interval.describe(m.folds.per_repeat),
            "note": "every scored row was predicted by a model trained without it",
        },
        "final_model_rows": rows,
        "final_model_note": "the stored model was refit on all rows after the comparison",
        "column_importance_std": m.importances.spread,
        "importances": m.importances.describe(),
        "time_budget_s": m.budget_s,
        "search_time_s": round(m.search_s, 3),
        "training_time_s": round(m.training_s, 3),
        "search": _search_summary(m.runs, m.choice),
        "ignored_columns": {c.name: c.reason for c in columns if not c.used},
    }
    if m.calibration is not None:
        info["calibration"] = m.calibration.describe(scored)
        rare = _rare_classes(goal.values)
        if rare:
            info["rare_classes"] = {
                "classes": rare,
                "note": f"fewer rows than the {FOLDS} folds: these classes were trained "
                        "on but are seldom predicted right; their scores are unreliable"}
    if m.interval is not None:
        info["interval"] = m.interval.describe(scored)
    scored_rows = m.folds.scored
    info.update(pictures(problem, goal.values[scored_rows], m.best.oof[scored_rows],
                         np.unique(goal.values) if problem == "classification" else None))
    encoders = dict(_ENCODERS)
    if _native_categories(fitted.steps[-1][1]):
        encoders["categorical"] = "SimpleImputer(constant) + OrdinalEncoder (categories " \
                                  "split natively by the gradient boosting)"
    features = [
        {"column": c.name, "type": c.kind, "encoder": encoders.get(c.kind),
         "role": "feature" if c.used else "ignored",
         **({"reason": c.reason} if c.reason else {})}
        for c in columns
    ]
    # Every record has the same keys, so SQL's DESCRIBE …features equals REST's records.
    for feature, column in zip(features, columns, strict=True):
        # "text": the source held text, which this column's number, boolean or date is
        # read from (a value that cannot be is an unknown input at prediction).
        feature["source_type"] = column.source
        feature["values"] = None
    classes = problem == "classification"
    features.append({
        "column": goal.name, "type": _target_kind(goal.base, problem),
        "encoder": "LabelEncoder" if classes else "identity", "role": "target",
        "source_type": goal.base if classes else None,
        # The values predictions answer, exactly as the training rows held them.
        "values": [_plain(v) for v in np.unique(goal.values)[:MAX_LISTED_VALUES]]
        if classes else None})
    tried = [run.record(metric, run is m.best, m.folds) for run in m.runs]
    return {"info": info, "features": features, "model": tried}


def _search_summary(runs: list[Run], choice: dict[str, Any]) -> dict[str, Any]:
    """Which candidates ran (in the order tried), which were cut short or skipped, and why;
    how the kept one was chosen."""
    def name(run: Run) -> str:
        return label(run.candidate)

    return {
        "order": "cheap and strong first: gradient boosting, linear, random forest",
        "choice": choice,
        "ran": [name(r) for r in runs if r.scores and not r.stopped and not r.error],
        "reduced": {name(r): r.reduced for r in runs if r.reduced},
        "stopped_or_skipped": {name(r): r.stopped for r in runs if r.stopped},
        "failed": {name(r): r.error for r in runs if r.error},
    }


def _rare_classes(y: np.ndarray) -> dict[str, int]:
    labels, counts = np.unique(y, return_counts=True)
    return {str(_plain(label)): int(count)
            for label, count in zip(labels, counts, strict=True) if count < FOLDS}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


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
    found = find_column(frame.columns, target)
    if found is not None:
        return found
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
    if base in ("string", "bool", "text"):
        return "classification"
    # Few distinct integers are classes, unless there are so few rows that nearly every value
    # is its own class (linnerud's 20 weights): that is a quantity.
    if base == "int" and y.nunique() <= min(CLASS_MAX_DISTINCT, len(y) // 3):
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
    if base in ("string", "text"):
        return "categorical"
    return "integer" if base == "int" else "float"


def _pipeline(used: list[ColumnInfo], estimator: Any, native_categories: bool = True
              ) -> Pipeline:
    """The column preprocessing and ``estimator``; gradient boosting reads categories as
    codes unless ``native_categories`` is false (one-hot, as for every other estimator)."""
    groups: dict[str, list[str]] = {}
    for column in used:
        group = "numeric" if column.kind in NUMERIC else column.kind
        groups.setdefault(group, []).append(column.name)
    transformers = []
    # Grouping rare values costs a count of every value (seconds on 100 000 rows of text):
    # only asked for when a column has more distinct values than the encoders keep.
    wide = [c for c in used if c.kind == "categorical"
            and (c.distinct is None or c.distinct + 1 > MAX_CATEGORIES)]
    most = MAX_CATEGORIES if wide else None
    if "numeric" in groups:
        transformers.append(("numeric", Pipeline([
            ("impute", SimpleImputer(strategy="median", add_indicator=True)),
            ("scale", StandardScaler())]), groups["numeric"]))
    if "categorical" in groups:
        transformers.append(("categorical", Pipeline([
            ("impute", SimpleImputer(strategy="constant", fill_value="__missing__")),
            ("encode", OneHotEncoder(handle_unknown="infrequent_if_exist",
                                     max_categories=most, sparse_output=False))]),
            groups["categorical"]))
    if "binary" in groups:
        transformers.append(("binary", Pipeline([
            ("impute", SimpleImputer(strategy="most_frequent", add_indicator=True))]),
            groups["binary"]))
    if "datetime" in groups:
        transformers.append(("datetime", Pipeline([
            ("parts", DatetimeParts()),
            ("impute", SimpleImputer(strategy="median", add_indicator=True)),
            ("scale", StandardScaler())]), groups["datetime"]))
    if "categorical" in groups and native_categories and _native_categories(estimator):
        # Gradient boosting splits on categories itself: one column of codes per input
        # (first, so their positions are known) instead of up to 30 one-hot columns, which
        # made it three to four times slower on wide category columns, and no better.
        # A code of -1 (a category not seen in training) is read as missing.
        transformers = [("categorical", Pipeline([
            ("impute", SimpleImputer(strategy="constant", fill_value="__missing__")),
            ("encode", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                      max_categories=most))]),
            groups["categorical"])] + [t for t in transformers if t[0] != "categorical"]
        estimator.set_params(categorical_features=list(range(len(groups["categorical"]))))
    preprocess = ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0)
    return Pipeline([("preprocess", preprocess), ("estimator", estimator)])


def _native_categories(estimator: Any) -> bool:
    return isinstance(estimator, HistGradientBoostingClassifier | HistGradientBoostingRegressor)


def _single_threaded(pipeline: Pipeline) -> None:
    # Predictions are small and many: thread start-up would cost more than it saves.
    estimator = pipeline.steps[-1][1]
    if "n_jobs" in estimator.get_params():
        estimator.set_params(n_jobs=1)
