"""Choosing the estimator: the folds, the candidates, and their cross-validated comparison.

Every candidate is scored on the same folds, so their scores differ by the estimator, not by
the luck of a split. Each row is scored by a model that never saw it; those out-of-fold
predictions are kept for the chosen candidate, because calibration, prediction intervals and
importances are all measured on them. Settings of one family
(regularisation strength, tree size) are compared by successive halving: all of them on the
first folds, only the leader on the rest.

The search keeps to a deadline, keeping back the time the leader's refit on all rows will
take. Candidates are tried cheap and strong first (gradient boosting, then the linear
models, then a forest). The tree ensembles grow in stages (boosting iterations, forest
trees): the first tenth of a candidate's stages is fitted and timed, and from it the whole
candidate (every fold and its refit) is extrapolated; a candidate that cannot finish in what
is left is skipped there (or, if at least half its stages fit, run with fewer), and the fit
otherwise carries on from those stages (warm start), so nothing is fitted twice. Before each
fold the time left is checked again. Until some candidate has finished, a linear one, or the
last family, runs whatever the deadline, so a model is always trained. The column
preprocessing of a fold is fitted once and shared by every candidate that uses the same
preprocessing.
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
# A staged candidate is timed on this share of its stages before the rest is fitted.
PROBE_SHARE = 0.1
# A staged candidate that can finish only this share of its stages, or less, is skipped.
REDUCE_AT_LEAST = 0.5


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
    # Boosting first at every size: it is the strongest on most tables, and its cost is
    # timed on its first iterations, so a boosting that would not fit (one tree per class
    # and iteration: 4-7 s a fold of digits) is skipped at once, not after the budget is
    # gone. The linear models are cheap; the forest, whose trees grow with the rows (12 s
    # for 16 000 rows, before any other candidate ran), comes last.
    if rows >= HOLDOUT_FROM_ROWS:
        # One setting each from the hold-out size on: each is minutes on a busy core.
        return [boosting[:1], linear[:1], forests]
    if rows > FOREST_MAX_SAMPLES:
        return [boosting, linear[:1], forests]
    return [boosting, linear, forests]


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
    # Why the candidate runs fewer stages than it was given (the budget), when it does.
    reduced: str | None = None

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
            "reduced": self.reduced,
            "error": self.error,
        }
        return record


class Search:
    """Runs the candidates on the folds within a deadline; ``runs`` holds every attempt."""

    def __init__(self, pipeline_for: Callable[[Any], Pipeline], X: pd.DataFrame,  # noqa: N803
                 y: np.ndarray, problem: str, classes: np.ndarray | None, folds: Folds,
                 deadline: float, slack: float = 0.0) -> None:
        """``deadline``: a ``time.perf_counter()`` reading by which the search and the
        refit of its leader should be done; a candidate already started may run ``slack``
        seconds past it rather than throw away the folds it has (timings on a shared
        machine vary from fold to fold)."""
        self.pipeline_for = pipeline_for
        self.X, self.y, self.problem, self.classes, self.folds = X, y, problem, classes, folds
        self.deadline = deadline
        self.slack = slack
        self.runs: list[Run] = []
        # (fold, preprocessing) -> the preprocessing fitted on the fold's training rows.
        self._prepared: dict[tuple[int, str], Any] = {}

    def run(self, families: list[list[Candidate]]) -> Run:
        """Every family in turn (halving among its settings); the best finished run."""
        for index, family in enumerate(families):
            # Until a candidate has finished, a linear family (cheap, no stages to time) or
            # the last one runs whatever the deadline: some model must be trained.
            must = not self._finished() and (index == len(families) - 1 or not any(
                _stages(c.estimator) for c in family))
            if not must and self._late():
                for candidate in family:
                    self.runs.append(Run(candidate, stopped="not tried: time budget spent"))
                continue
            self._family(family, may_stop=not must)
        finished = self._finished()
        if not finished:
            raise RuntimeError("no candidate finished")  # the caller words the failure
        return max(finished, key=lambda r: r.mean)

    def _finished(self) -> list[Run]:
        return [r for r in self.runs if r.error is None and r.stopped is None and r.scores]

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
            run.stopped = (f"time budget spent after {len(run.scores)} of "
                           f"{len(self.folds.tests)} folds")
            return
        train = self.folds.train_index(fold)
        model = self.pipeline_for(clone(run.candidate.estimator))
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # A slow-converging solver is judged by its score, like any other candidate.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = self._fit(run, model, fold, train, may_stop)
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

    def _fit(self, run: Run, model: Pipeline, fold: int, train: np.ndarray,
             may_stop: bool) -> Pipeline:
        """The pipeline fitted on the fold's training rows; its first step (the column
        preprocessing) is fitted once per fold and kind, then reused by later candidates."""
        (name, preprocess), (last, estimator) = model.steps[0], model.steps[-1]
        key = (fold, joblib.hash(preprocess))
        X, y = self.X.iloc[train], self.y[train]  # noqa: N806
        fitted = self._prepared.get(key)
        if fitted is None:
            fitted = self._prepared[key] = clone(preprocess).fit(X, y)
        matrix = fitted.transform(X)
        if _stages(estimator):
            self._probe(run, estimator, matrix, y, fold, may_stop)
        estimator.fit(matrix, y)
        return Pipeline([(name, fitted), (last, estimator)])

    def _probe(self, run: Run, estimator: Any, matrix: np.ndarray, y: np.ndarray, fold: int,
               may_stop: bool) -> None:
        """Fit the first PROBE_SHARE of the estimator's stages and time them; from that,
        the candidate's remaining cost (this fold's rest, its later folds, and its refit
        on all rows, a fold's cost scaled by the rows). If it does not fit in what is left:
        on its first fold, fewer stages when at least REDUCE_AT_LEAST of them fit (the
        candidate then keeps that number, its refit too), else _OutOfTime. The fit then
        carries on from the probe's stages (warm start). Candidates that must finish are
        only ever reduced, down to the probe's stages."""
        param, total = _stages(estimator)
        first = max(1, int(total * PROBE_SHARE))
        estimator.set_params(warm_start=True, **{param: first})
        started = time.perf_counter()
        estimator.fit(matrix, y)
        per_stage = (time.perf_counter() - started) / first
        train_share = 1 - len(self.folds.tests[0]) / self.folds.rows
        # Fits to come, in units of this fold's full fit: the rest of its folds, then its
        # refit on all rows (a fold's fit scaled by the rows).
        folds_left = len(self.folds.tests) - fold
        own_refit = 1 / train_share
        # One refit follows the search: this candidate's if it leads, else the leader's.
        refit = max(per_stage * total * own_refit, self.refit_reserve())
        left = self.deadline + (self.slack if run.scores else 0.0) - time.perf_counter()
        needed = per_stage * (total * folds_left - first) + refit
        if needed <= left:
            estimator.set_params(**{param: total})
            return
        affordable = int((left + per_stage * first) / (per_stage * (folds_left + own_refit)))
        if run.scores:  # folds already scored with `total` stages: no changing it now
            if may_stop:
                raise _OutOfTime(f"time budget: stopped after {len(run.scores)} folds, the "
                                 f"rest would take about {needed:.1f} s, {left:.1f} s left")
            estimator.set_params(**{param: total})
            return
        if may_stop and affordable <= total * REDUCE_AT_LEAST:
            raise _OutOfTime(f"skipped: timed on {first} {_STAGE_NAMES[param]}, it would take "
                             f"about {needed:.1f} s more, and {max(0.0, left):.1f} s are left")
        stages = max(first, min(total, affordable))
        estimator.set_params(**{param: stages})
        run.reduced = (f"{stages} {_STAGE_NAMES[param]} instead of {total}: timed on "
                       f"{first}, all {total} would take about {needed:.1f} s more, "
                       f"{max(0.0, left):.1f} s were left")
        template = clone(run.candidate.estimator).set_params(**{param: stages})
        run.candidate = Candidate(run.candidate.family,
                                  {**run.candidate.params, param: stages}, template)

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
        folds so far; a first fold is timed by the probe of a staged candidate, and a linear
        one is cheap) and the refit of the leader on all rows (its fold time scaled by the
        rows)."""
        started = run is not None and bool(run.scores)
        expected = run.fit_time / len(run.scores) if started else 0.0
        return time.perf_counter() + expected + self.refit_reserve() \
            > self.deadline + (self.slack if started else 0.0)

    def refit_reserve(self) -> float:
        """Seconds the leader so far would take to refit on all rows."""
        timed = [r for r in self.runs if r.scores]
        if not timed:
            return 0.0
        leader = max(timed, key=lambda r: r.mean)
        train_share = 1 - len(self.folds.tests[0]) / self.folds.rows
        return leader.fit_time / len(leader.scores) / train_share


_STAGE_NAMES = {"max_iter": "iterations", "n_estimators": "trees"}


def _stages(estimator: Any) -> tuple[str, int] | None:
    """The parameter counting an estimator's stages and its value (for warm starts)."""
    if isinstance(estimator, _BOOSTING):
        return "max_iter", int(estimator.max_iter)
    if isinstance(estimator, RandomForestClassifier | RandomForestRegressor):
        return "n_estimators", int(estimator.n_estimators)
    return None


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
