"""Choosing the estimator: the folds, the candidates, and their cross-validated comparison.

Every candidate is scored on the same folds, so their scores differ by the estimator, not by
the luck of a split. Each row is scored by a model that never saw it; those out-of-fold
predictions are kept for the chosen candidate, because calibration, prediction intervals and
importances are all measured on them. Settings of one family (regularisation strength, tree
size) are compared by successive halving: all of them on the first folds, only the leader on
the rest. A time budget stops the search between folds, keeping back the time the leader's
refit on all rows will take; the first family always finishes (the first two on small
tables). The column preprocessing of a fold is fitted once and shared by every candidate that
uses the same preprocessing.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import joblib
import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import r2_score
from sklearn.pipeline import Pipeline

FOLDS = 5
# From this many rows on, one hold-out replaces k-fold: five fits would cost minutes.
HOLDOUT_FROM_ROWS = 100_000
# Settings of one family all run on this many folds before only the leader continues.
HALVING_FOLDS = 2
# Random forests draw at most this many rows per tree: past it more rows add time, not skill.
FOREST_MAX_SAMPLES = 20_000
COARSE_BINS = 63
# Up to this many rows, the first SURE_FAMILIES families finish whatever the budget.
SURE_FAMILIES, SURE_FAMILIES_UP_TO_ROWS = 2, 10_000


@dataclass
class Folds:
    """Row indices held out by each fold, and how they were drawn, in words."""

    tests: list[np.ndarray]
    method: str
    rows: int

    def train_index(self, fold: int) -> np.ndarray:
        mask = np.ones(self.rows, dtype=bool)
        mask[self.tests[fold]] = False
        return np.flatnonzero(mask)

    @property
    def scored(self) -> np.ndarray:
        """Every row that some fold holds out (all rows, except with a hold-out)."""
        return np.sort(np.concatenate(self.tests))


def make_folds(y: np.ndarray, problem: str, random_state: int = 0,
               holdout_fraction: float = 0.2) -> Folds:
    """k-fold (stratified for classes) below HOLDOUT_FROM_ROWS rows, one hold-out above.

    Rows of each class are dealt out round the folds in turn, carrying on where the previous
    class stopped: every fold gets its share of each class, and a class with fewer rows than
    folds still lands somewhere (scikit-learn's StratifiedKFold refuses such a class).
    """
    rows = len(y)
    rng = np.random.default_rng(random_state)
    groups = [np.flatnonzero(y == label) for label in _unique(y)] \
        if problem == "classification" else [np.arange(rows)]
    # A row's position in the deal: classes one after the other, each shuffled.
    position = np.empty(rows, dtype=np.int64)
    start = 0
    for members in groups:
        position[rng.permutation(members)] = start + np.arange(len(members))
        start += len(members)
    kind = "stratified " if problem == "classification" else ""
    if rows >= HOLDOUT_FROM_ROWS:
        # Every 1/fraction-th position is held out, so each class gives its share.
        held = np.floor((position + 1) * holdout_fraction) > np.floor(position * holdout_fraction)
        test = np.flatnonzero(held)
        return Folds([test], f"{kind}hold-out of {len(test) / rows:.0%} of the rows", rows)
    fold_of = position % FOLDS
    tests = [np.flatnonzero(fold_of == f) for f in range(FOLDS)]
    return Folds(tests, f"{kind}{FOLDS}-fold cross-validation", rows)


_BOOSTING = (HistGradientBoostingClassifier, HistGradientBoostingRegressor)


class _OutOfTime(Exception):
    """A candidate's fold would end past the time budget (the message says why)."""


@dataclass
class Candidate:
    family: str          # the estimator's class name, as describe's model names it
    params: dict[str, Any]
    estimator: Any


def candidates(problem: str, rows: int, random_state: int = 0) -> list[list[Candidate]]:
    """Families of candidates, cheapest first; within a family, the settings to compare."""
    max_samples = FOREST_MAX_SAMPLES / rows if rows > FOREST_MAX_SAMPLES else None
    trees = 100 if max_samples is None else 60
    # No early stopping: it draws its own validation split, which a class of one row breaks.
    boost = {"max_iter": 100, "early_stopping": False, "random_state": random_state}
    small_trees = {"max_leaf_nodes": 8, "l2_regularization": 1.0}
    # From the hold-out size on, 63 bins a column instead of 255: on the bench's 100 000
    # rows x 20 columns, fits took half the time for 0.003 less balanced accuracy.
    coarse = {"max_bins": COARSE_BINS} if rows >= HOLDOUT_FROM_ROWS else {}
    if problem == "classification":
        linear = [Candidate("LogisticRegression", {"C": c},
                            LogisticRegression(C=c, max_iter=1000)) for c in (1.0, 0.1, 10.0)]
        boosting = [Candidate("HistGradientBoostingClassifier", p,
                              HistGradientBoostingClassifier(**boost, **p))
                    for p in (coarse, small_trees)]
        forest = RandomForestClassifier(n_estimators=trees, max_samples=max_samples, n_jobs=2,
                                        random_state=random_state)
    else:
        linear = [Candidate("Ridge", {"alpha": a}, Ridge(alpha=a)) for a in (1.0, 0.01, 30.0)]
        boosting = [Candidate("HistGradientBoostingRegressor", p,
                              HistGradientBoostingRegressor(**boost, **p))
                    for p in (coarse, small_trees)]
        forest = RandomForestRegressor(n_estimators=trees, max_samples=max_samples, n_jobs=2,
                                       random_state=random_state)
    forest_params = {"n_estimators": trees, "max_samples": max_samples}
    forests = [Candidate(type(forest).__name__, forest_params, forest)]
    # Small tables: the forest first (the first family always finishes, and a default
    # forest is the strongest cheap model: on digits, 0.6 s a fold against 4-7 s for
    # boosting, which grows one tree per class and iteration), then the linear settings.
    if rows <= FOREST_MAX_SAMPLES:
        return [forests, linear, boosting]
    # Large tables: boosting first (it always finishes, and there it is usually best and
    # cheaper than a forest); one linear setting, as each costs a full fit. From the
    # hold-out size on, one boosting setting too: each is minutes of fitting on a busy core.
    if rows >= HOLDOUT_FROM_ROWS:
        boosting = boosting[:1]
    return [boosting, linear[:1], forests]


@dataclass
class Run:
    """One candidate's cross-validated run: per-fold scores, fit time, out-of-fold output."""

    candidate: Candidate
    scores: list[float] = field(default_factory=list)
    fit_time: float = 0.0
    models: list[Pipeline] = field(default_factory=list)
    # Out-of-fold predictions: class probabilities (columns in `classes` order) or values.
    oof: np.ndarray | None = None
    error: str | None = None
    stopped: str | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores else float("-inf")

    def record(self, metric: str, selected: bool, folds: int) -> dict[str, Any]:
        """The candidate as describe's ``model`` attribute lists it."""
        done = len(self.scores)
        record: dict[str, Any] = {
            "name": self.candidate.family,
            "performance": round(self.mean, 4) if done else None,
            "training_time": round(self.fit_time, 3),
            "selected": int(selected),
            "accuracy_functions": [metric],
            "performance_std": round(float(np.std(self.scores)), 4) if done else None,
            "folds_scored": done,
            "folds": folds,
            "params": {k: v for k, v in self.candidate.params.items() if v is not None},
            # Every record has the same keys, so SQL's DESCRIBE table equals REST's records.
            "stopped": self.stopped,
            "error": self.error,
        }
        return record


class Search:
    """Runs the candidates on the folds within a deadline; ``runs`` holds every attempt."""

    def __init__(self, pipeline_for: Callable[[Any], Pipeline], X: pd.DataFrame,  # noqa: N803
                 y: np.ndarray, problem: str, classes: np.ndarray | None, folds: Folds,
                 budget_s: float) -> None:
        self.pipeline_for = pipeline_for
        self.X, self.y, self.problem, self.classes, self.folds = X, y, problem, classes, folds
        self.deadline = time.perf_counter() + budget_s
        self.runs: list[Run] = []
        # (fold, preprocessing) -> the preprocessing fitted on the fold's training rows.
        self._prepared: dict[tuple[int, str], Any] = {}

    def run(self, families: list[list[Candidate]]) -> Run:
        """Every family in turn (halving among its settings); the best finished run."""
        # Some model must finish: the first family always does, and on small tables the
        # first two (forest and linear: each the best of the cheap ones somewhere, and a
        # busy machine could otherwise spend the whole budget on the first).
        sure = SURE_FAMILIES if self.folds.rows <= SURE_FAMILIES_UP_TO_ROWS else 1
        for index, family in enumerate(families):
            if index >= sure and (self._late() or any(
                    r.stopped for r in self.runs if r.stopped and "budget" in r.stopped)):
                for candidate in family:
                    self.runs.append(Run(candidate, stopped="not tried: time budget spent"))
                continue
            self._family(family, may_stop=index >= sure)
        finished = [r for r in self.runs if r.error is None and r.stopped is None]
        if not finished:
            raise RuntimeError("no candidate finished")  # the caller words the failure
        return max(finished, key=lambda r: r.mean)

    def _family(self, family: list[Candidate], may_stop: bool) -> None:
        runs = [Run(c) for c in family]
        self.runs.extend(runs)
        probe = min(HALVING_FOLDS, len(self.folds.tests)) if len(runs) > 1 \
            else len(self.folds.tests)
        for fold in range(probe):
            for run in runs:
                if run.error is None and run.stopped is None:
                    self._fold(run, fold, may_stop=may_stop)
        alive = [r for r in runs if r.error is None and r.stopped is None]
        if not alive:
            return
        leader = max(alive, key=lambda r: r.mean)
        for run in alive:
            if run is not leader:
                run.stopped = (f"halving: behind {leader.candidate.params} after "
                               f"{len(run.scores)} folds")
        for fold in range(probe, len(self.folds.tests)):
            self._fold(leader, fold, may_stop=may_stop)

    def _fold(self, run: Run, fold: int, may_stop: bool) -> None:
        test = self.folds.tests[fold]
        if may_stop and self._late(run):
            run.stopped = "time budget spent before its last folds"
            return
        train = self.folds.train_index(fold)
        model = self.pipeline_for(clone(run.candidate.estimator))
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # A slow-converging solver is judged by its score, like any other candidate.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = self._fit(model, fold, train, may_stop)
                output = self._predict(model, self.X.iloc[test])
        except _OutOfTime as exc:
            run.stopped = str(exc)
            return
        except (ValueError, TypeError, MemoryError, FloatingPointError) as exc:
            run.error = f"{type(exc).__name__}: {exc}"
            return
        finally:
            run.fit_time += time.perf_counter() - started
        if run.oof is None:
            shape = (self.folds.rows, len(self.classes)) if self.classes is not None \
                else (self.folds.rows,)
            run.oof = np.full(shape, np.nan)
        run.oof[test] = output
        run.scores.append(score(self.problem, self.y[test], self.predicted(output)))
        run.models.append(model)

    def _fit(self, model: Pipeline, fold: int, train: np.ndarray, may_stop: bool) -> Pipeline:
        """The pipeline fitted on the fold's training rows; its first step (the column
        preprocessing) is fitted once per fold and kind, then reused by later candidates."""
        (name, preprocess), (last, estimator) = model.steps[0], model.steps[-1]
        key = (fold, joblib.hash(preprocess))
        X, y = self.X.iloc[train], self.y[train]  # noqa: N806
        fitted = self._prepared.get(key)
        if fitted is None:
            fitted = self._prepared[key] = clone(preprocess).fit(X, y)
        matrix = fitted.transform(X)
        if may_stop and isinstance(estimator, _BOOSTING):
            self._probe(estimator, matrix, y)
        estimator.fit(matrix, y)
        return Pipeline([(name, fitted), (last, estimator)])

    def _probe(self, estimator: Any, matrix: np.ndarray, y: np.ndarray) -> None:
        """Boosting's cost varies most (one tree per class and iteration: 0.6 s a fold of
        digits for a forest, 4-7 s for boosting), so its first tenth of iterations is fitted
        first: _OutOfTime when the rest, timed from it, would end past the budget. The fit
        then carries on from those iterations (warm start), so nothing is fitted twice."""
        total = estimator.max_iter
        first = max(1, total // 10)
        estimator.set_params(warm_start=True, max_iter=first)
        started = time.perf_counter()
        estimator.fit(matrix, y)
        rest = (time.perf_counter() - started) * (total - first) / first
        estimator.set_params(max_iter=total)
        if time.perf_counter() + rest + self._refit_reserve() > self.deadline:
            raise _OutOfTime(f"time budget: its fold would take about {rest:.1f} s more")

    def _predict(self, model: Pipeline, X: pd.DataFrame) -> np.ndarray:  # noqa: N803
        if self.classes is None:
            return model.predict(X)
        # A fold may lack a rare class: its model has fewer columns than there are classes.
        probabilities = np.zeros((len(X), len(self.classes)))
        seen = np.searchsorted(self.classes, model.classes_)
        probabilities[:, seen] = model.predict_proba(X)
        return probabilities

    def predicted(self, output: np.ndarray) -> np.ndarray:
        """Predicted values from out-of-fold output (the likeliest class for a classifier)."""
        return output if self.classes is None else self.classes[output.argmax(axis=1)]

    def _late(self, run: Run | None = None) -> bool:
        """Past the deadline, or would be after one more fold of ``run`` (as long as its
        folds so far, or, before its first, as the slowest fold of any run yet) and the
        refit of the leader on all rows (its fold time scaled by the rows)."""
        if run is not None and run.scores:
            expected = run.fit_time / len(run.scores)
        else:
            expected = max((r.fit_time / len(r.scores) for r in self.runs if r.scores),
                           default=0.0)
        return time.perf_counter() + expected + self._refit_reserve() > self.deadline

    def _refit_reserve(self) -> float:
        """Seconds the leader so far would take to refit on all rows."""
        timed = [r for r in self.runs if r.scores]
        if not timed:
            return 0.0
        leader = max(timed, key=lambda r: r.mean)
        train_share = 1 - len(self.folds.tests[0]) / self.folds.rows
        return leader.fit_time / len(leader.scores) / train_share


def score(problem: str, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Balanced accuracy (classification) or R² (regression).

    Balanced accuracy is the mean recall over the classes present in ``y_true``; written
    here because scikit-learn's warns when a fold holds no row of a rare class.
    """
    if problem == "regression":
        return float(r2_score(y_true, y_pred))
    recalls = [float(np.mean(y_pred[y_true == label] == label)) for label in _unique(y_true)]
    return float(np.mean(recalls))


def _unique(values: np.ndarray) -> np.ndarray:
    return np.unique(values)
