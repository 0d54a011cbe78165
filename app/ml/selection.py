"""Choosing the estimator: the folds, the candidates, and their cross-validated comparison.

Every candidate is scored on the same folds, so their scores differ by the estimator, not by
the luck of a split. Each row is scored by a model that never saw it; those out-of-fold
predictions are kept for the chosen candidate, because calibration, prediction intervals and
importances are all measured on them. Settings of one family
(regularisation strength, tree size) are compared by successive halving: all of them on the
first folds, only the leader on the rest. Below REPEAT_ROWS rows the k-fold is repeated on
new partitions for the finalists, while time is left, and the kept candidate is the
simplest whose mean is within one standard error of the best (``Search._choose``).

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
# Below this many rows the k-fold is repeated on new partitions, until every candidate's
# mean rests on about this many out-of-fold predictions (MAX_REPEATS at most): a fold of
# 93 rows holds 19, and Cars93's fold R² spread by 0.1-0.2 from one fold to the next, so one
# 5-fold mean ranks candidates by the luck of the partition. At 300 rows a fold holds 60,
# one partition's luck is small next to the standard error the choice allows for, and the
# repeats would cost more (a fit on a few dozen rows takes milliseconds on an idle core).
REPEAT_ROWS = 300
MAX_REPEATS = 5
# A fold's prepared rows (training and held out) are kept for the next candidates up to
# this size; larger ones are prepared again for each candidate rather than held in memory.
KEEP_PREPARED_BYTES = 16 * 2**20


@dataclass
class Folds:
    """Row indices held out by each fold, and how they were drawn, in words.

    With repeats, ``tests`` holds the folds of the first partition of the rows, then those
    of the second, and so on: ``per_repeat`` folds each.
    """

    tests: list[np.ndarray]
    method: str
    rows: int
    repeats: int = 1

    @property
    def per_repeat(self) -> int:
        return len(self.tests) // self.repeats

    def train_index(self, fold: int) -> np.ndarray:
        mask = np.ones(self.rows, dtype=bool)
        mask[self.tests[fold]] = False
        return np.flatnonzero(mask)

    @property
    def scored(self) -> np.ndarray:
        """Every row that a fold of the first partition holds out (all rows, except with a
        hold-out): the rows whose out-of-fold predictions the measures read."""
        return np.sort(np.concatenate(self.tests[:self.per_repeat]))

    @property
    def test_share(self) -> float:
        """Held-out rows over training rows of a fold (1/(k-1) for k folds)."""
        held = len(self.tests[0])
        return held / max(1, self.rows - held)

    def keep_repeats(self, repeats: int) -> None:
        """Only the first ``repeats`` partitions (those every finalist was scored on)."""
        self.tests = self.tests[:self.per_repeat * repeats]
        self.method = _method(self.method.split(" repeated")[0], self.per_repeat, repeats)
        self.repeats = repeats


def repeats_for(rows: int) -> int:
    """Partitions of the rows that k-fold cross-validation is repeated on: enough that each
    candidate's mean rests on at least REPEAT_ROWS out-of-fold predictions, at most
    MAX_REPEATS (the search runs the repeats after the first only while time is left)."""
    if rows >= REPEAT_ROWS:
        return 1
    return min(MAX_REPEATS, -(-REPEAT_ROWS // rows))


def _method(kind: str, folds: int, repeats: int) -> str:
    if repeats == 1:
        return kind
    return f"{kind} repeated {repeats} times on new partitions ({folds * repeats} folds)"


def make_folds(y: np.ndarray, problem: str, random_state: int = 0,
               holdout_fraction: float = 0.2) -> Folds:
    """k-fold (stratified for classes) below HOLDOUT_FROM_ROWS rows, one hold-out above;
    below REPEAT_ROWS rows the k-fold is repeated on new partitions (``repeats_for``).

    Rows of each class are dealt out round the folds in turn, carrying on where the previous
    class stopped: every fold gets its share of each class, and a class with fewer rows than
    folds still lands somewhere (scikit-learn's StratifiedKFold refuses such a class).
    """
    rows = len(y)
    rng = np.random.default_rng(random_state)
    groups = [np.flatnonzero(y == label) for label in _unique(y)] \
        if problem == "classification" else [np.arange(rows)]
    kind = "stratified " if problem == "classification" else ""
    if rows >= HOLDOUT_FROM_ROWS:
        # Every 1/fraction-th position is held out, so each class gives its share.
        position = _deal(groups, rows, rng)
        held = np.floor((position + 1) * holdout_fraction) > np.floor(position * holdout_fraction)
        test = np.flatnonzero(held)
        return Folds([test], f"{kind}hold-out of {len(test) / rows:.0%} of the rows", rows)
    repeats = repeats_for(rows)
    tests = []
    for _ in range(repeats):
        fold_of = _deal(groups, rows, rng) % FOLDS
        tests.extend(np.flatnonzero(fold_of == f) for f in range(FOLDS))
    return Folds(tests, _method(f"{kind}{FOLDS}-fold cross-validation", FOLDS, repeats), rows,
                 repeats)


def _deal(groups: list[np.ndarray], rows: int, rng: np.random.Generator) -> np.ndarray:
    """Each row's position in the deal: classes one after the other, each shuffled."""
    position = np.empty(rows, dtype=np.int64)
    start = 0
    for members in groups:
        position[rng.permutation(members)] = start + np.arange(len(members))
        start += len(members)
    return position


_BOOSTING = (HistGradientBoostingClassifier, HistGradientBoostingRegressor)


class _OutOfTime(Exception):
    """A candidate's fold would end past the time budget (the message says why)."""


@dataclass
class Candidate:
    family: str          # the estimator's class name, as describe's model names it
    params: dict[str, Any]
    estimator: Any
    # Lower is simpler (linear 0, boosting 1, forest 2): within one standard error of the
    # best mean, the simplest candidate is kept.
    complexity: int = 0


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
                              HistGradientBoostingClassifier(**boost, **p), 1)
                    for p in (coarse, small_trees)]
        forest = RandomForestClassifier(n_estimators=trees, max_samples=max_samples, n_jobs=2,
                                        random_state=random_state)
    else:
        # A decade apart: on Cars93 (70 rows) the CV-best strength was 10 in four splits
        # of five, and 1 (the next one tried when these were 1, 0.01 and 30) lost up to
        # 0.2 of R² on the held-out rows.
        linear = [Candidate("Ridge", {"alpha": a}, Ridge(alpha=a))
                  for a in (1.0, 0.1, 10.0, 100.0)]
        boosting = [Candidate("HistGradientBoostingRegressor", p,
                              HistGradientBoostingRegressor(**boost, **p), 1)
                    for p in (coarse, small_trees)]
        forest = RandomForestRegressor(n_estimators=trees, max_samples=max_samples, n_jobs=2,
                                       random_state=random_state)
    forest_params = {"n_estimators": trees, "max_samples": max_samples}
    forests = [Candidate(type(forest).__name__, forest_params, forest, 2)]
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

    def standard_error(self, test_share: float) -> float | None:
        """The standard error of the mean score, corrected for folds that share training
        rows (Nadeau and Bengio, 2003): s x sqrt(1/J + n_test/n_train) over J fold scores
        of standard deviation s. The plain s/sqrt(J) would shrink towards 0 with every
        repeat, though the repeats reuse the same rows; None below two scores."""
        if len(self.scores) < 2:
            return None
        spread = float(np.std(self.scores, ddof=1))
        return spread * float(np.sqrt(1 / len(self.scores) + test_share))

    def record(self, metric: str, selected: bool, folds: Folds) -> dict[str, Any]:
        """The candidate as describe's ``model`` attribute lists it."""
        done = len(self.scores)
        se = self.standard_error(folds.test_share)
        record: dict[str, Any] = {
            "name": self.candidate.family,
            "performance": round(self.mean, 4) if done else None,
            "training_time": round(self.fit_time, 3),
            "selected": int(selected),
            "accuracy_functions": [metric],
            "performance_std": round(float(np.std(self.scores)), 4) if done else None,
            "performance_se": None if se is None else round(se, 4),
            "folds_scored": done,
            "folds": len(folds.tests),
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
        # How the kept candidate was chosen among the finished ones (describe's search).
        self.choice: dict[str, Any] = {}
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
        if not self._finished():
            raise RuntimeError("no candidate finished")  # the caller words the failure
        self._repeat(self._finished())
        return self._choose(self._finished())

    def _repeat(self, finalists: list[Run]) -> None:
        """The finalists (every candidate that ran all folds of the first partition: each
        family's leader, and on a small table every linear setting) on the
        folds of the other partitions, one partition at a time while the time left holds a
        whole one; the folds are then cut to the partitions every finalist was scored on."""
        done = 1
        for repeat in range(1, self.folds.repeats):
            per_fold = sum(r.fit_time / len(r.scores) for r in finalists)
            if time.perf_counter() + per_fold * self.folds.per_repeat + self.refit_reserve() \
                    > self.deadline:
                break
            first = repeat * self.folds.per_repeat
            for fold in range(first, first + self.folds.per_repeat):
                for run in finalists:
                    if run.error is None:
                        self._fold(run, fold, may_stop=False)
            done += 1
        if done < self.folds.repeats:
            self.folds.keep_repeats(done)

    def _choose(self, finished: list[Run]) -> Run:
        """The simplest finished candidate whose mean is within one standard error of the
        best mean (the one-standard-error rule): a difference smaller than the noise of
        the estimate is no reason for a more complex model, which on few rows mostly fits
        the partition's luck. ``choice`` records how."""
        best = max(finished, key=lambda r: r.mean)
        se = best.standard_error(self.folds.test_share)
        if se is None:
            self.choice = {"rule": "best mean (one score each: no standard error)"}
            return best
        near = [r for r in finished if r.mean >= best.mean - se]
        chosen = min(near, key=lambda r: (r.candidate.complexity, -r.mean))
        self.choice = {
            "rule": "the simplest candidate (linear, then boosting, then forest) whose mean "
                    "is within one standard error of the best mean",
            "best": label(best.candidate),
            "best_mean": round(best.mean, 4),
            "standard_error": round(se, 4),
            "threshold": round(best.mean - se, 4),
            "chosen": label(chosen.candidate),
        }
        return chosen

    def _finished(self) -> list[Run]:
        return [r for r in self.runs if r.error is None and r.stopped is None and r.scores]

    def _family(self, family: list[Candidate], may_stop: bool) -> None:
        runs = [Run(c) for c in family]
        self.runs.extend(runs)
        # The families run on the first partition; other partitions are for the finalists.
        # Below REPEAT_ROWS every linear setting runs all its folds (its fits take
        # milliseconds, and two folds of a few dozen rows rank settings by luck); otherwise
        # successive halving.
        folds = self.folds.per_repeat
        halving = len(runs) > 1 and (self.folds.rows >= REPEAT_ROWS
                                     or any(_stages(c.estimator) for c in family))
        probe = min(HALVING_FOLDS, folds) if halving else folds
        for fold in range(probe):
            for run in runs:
                if run.error is None and run.stopped is None:
                    self._fold(run, fold, may_stop=may_stop)
        alive = [r for r in runs if r.error is None and r.stopped is None]
        if not alive:
            return
        if not halving:
            return  # every setting ran every fold: all are finalists
        leader = max(alive, key=lambda r: r.mean)
        for run in alive:
            if run is not leader:
                run.stopped = (f"halving: behind {leader.candidate.params} after "
                               f"{len(run.scores)} folds")
        for fold in range(probe, folds):
            self._fold(leader, fold, may_stop=may_stop)

    def _fold(self, run: Run, fold: int, may_stop: bool) -> None:
        test = self.folds.tests[fold]
        if may_stop and self._late(run):
            run.stopped = (f"time budget spent after {len(run.scores)} of "
                           f"{self.folds.per_repeat} folds")
            return
        train = self.folds.train_index(fold)
        model = self.pipeline_for(clone(run.candidate.estimator))
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # A slow-converging solver is judged by its score, like any other candidate.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model, held_out = self._fit(run, model, fold, train, may_stop)
                # The estimator on the fold's held-out rows, prepared as for training.
                output = self._predict(model.steps[-1][1], held_out)
        except _OutOfTime as exc:
            run.stopped = str(exc)
            return
        except (ValueError, TypeError, MemoryError, FloatingPointError) as exc:
            run.error = f"{type(exc).__name__}: {exc}"
            return
        finally:
            run.fit_time += time.perf_counter() - started
        run.scores.append(score(self.problem, self.y[test], self.predicted(output)))
        if fold >= self.folds.per_repeat:
            return  # other partitions score the candidate; the measures read the first's
        if run.oof is None:
            shape = (self.folds.rows, len(self.classes)) if self.classes is not None \
                else (self.folds.rows,)
            run.oof = np.full(shape, np.nan)
        run.oof[test] = output
        run.models.append(model)

    def _fit(self, run: Run, model: Pipeline, fold: int, train: np.ndarray,
             may_stop: bool) -> tuple[Pipeline, np.ndarray]:
        """The pipeline fitted on the fold's training rows, and the fold's held-out rows
        as its first step (the column preprocessing) prepares them. That step is fitted
        once per fold and kind, then reused by later candidates, with the prepared rows
        when they are small (on a table of a hundred rows, preparing them cost more than
        fitting most estimators)."""
        (name, preprocess), (last, estimator) = model.steps[0], model.steps[-1]
        key = (fold, joblib.hash(preprocess))
        y = self.y[train]
        prepared = self._prepared.get(key)
        if prepared is None:
            X = self.X.iloc[train]  # noqa: N806
            fitted = clone(preprocess).fit(X, y)
            prepared = (fitted, fitted.transform(X),
                        fitted.transform(self.X.iloc[self.folds.tests[fold]]))
            small = prepared[1].nbytes + prepared[2].nbytes <= KEEP_PREPARED_BYTES
            self._prepared[key] = prepared if small else (fitted, None, None)
        fitted, matrix, held_out = prepared
        if matrix is None:
            matrix = fitted.transform(self.X.iloc[train])
            held_out = fitted.transform(self.X.iloc[self.folds.tests[fold]])
        if _stages(estimator):
            self._probe(run, estimator, matrix, y, fold, may_stop)
        estimator.fit(matrix, y)
        return Pipeline([(name, fitted), (last, estimator)]), held_out

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
        # The first partition's: the other partitions run only if time is left after it.
        folds_left = self.folds.per_repeat - fold
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
                                  {**run.candidate.params, param: stages}, template,
                                  run.candidate.complexity)

    def _predict(self, model: Any, X: np.ndarray) -> np.ndarray:  # noqa: N803
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


def label(candidate: Candidate) -> str:
    """A candidate as describe's search lists it: Ridge(alpha=1.0)."""
    params = ", ".join(f"{k}={v}" for k, v in candidate.params.items() if v is not None)
    return f"{candidate.family}({params})"


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
