"""What describe reports beside the score, all measured on out-of-fold predictions.

- Calibration: a classifier's probabilities are rescaled by one temperature, fitted on the
  out-of-fold probabilities (the argmax, so the answer, never changes). Its effect is
  measured cross-fitted: the temperature used on each part of the rows was fitted on the
  other parts, so the reported calibration error is not the calibrator grading itself.
- Prediction intervals: the 5th and 95th percentiles of out-of-fold residuals (split
  conformal style); their coverage is measured cross-fitted the same way.
- Importances: permutation importances of the fold models on their held-out rows.
- The score's interval: where the score of the model on a new sample of rows is expected to
  fall, from the spread of the fold scores (a prediction interval for one more fold, not the
  standard error of the mean) and, as a floor, the bootstrap spread of a fold-sized sample.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.optimize import minimize_scalar

from .selection import Folds, score

CALIBRATION_BINS = 10
# Cross-fitting parts for the calibration and interval measures.
PARTS = 5
INTERVAL_LEVEL = 0.9
# Held-out rows per fold on which importances are measured: enough for a stable mean.
IMPORTANCE_ROWS_PER_FOLD = 1_000
# Shuffled rows predicted per fold at most (fewer shuffles on wide tables).
IMPORTANCE_PREDICTED_ROWS = 50_000
# Rows predicted in one call when measuring importances (shuffled copies stacked).
_BATCH_ROWS = 200_000


# --- calibration ------------------------------------------------------------------------------

def with_temperature(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities rescaled: softmax(log p / T). T > 1 softens, T < 1 sharpens."""
    logits = np.log(np.clip(probabilities, 1e-12, 1.0)) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    exp = np.exp(logits)
    return exp / exp.sum(axis=1, keepdims=True)


def fit_temperature(probabilities: np.ndarray, truth: np.ndarray) -> float:
    """The temperature that minimises the log loss of the true classes (indices)."""
    rows = np.arange(len(truth))

    def loss(log_t: float) -> float:
        p = with_temperature(probabilities, float(np.exp(log_t)))[rows, truth]
        return float(-np.mean(np.log(np.clip(p, 1e-12, 1.0))))

    found = minimize_scalar(loss, bounds=(-3.0, 3.0), method="bounded",
                            options={"xatol": 1e-3})
    return float(np.exp(found.x))


def calibration_error(probabilities: np.ndarray, truth: np.ndarray,
                      bins: int = CALIBRATION_BINS) -> float:
    """Expected calibration error of the answer's confidence: over equal-width confidence
    bins, |accuracy - mean confidence| weighted by the share of rows in the bin."""
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == truth
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    error = 0.0
    for b in range(bins):
        members = which == b
        if members.any():
            error += members.mean() * abs(correct[members].mean() - confidence[members].mean())
    return float(error)


@dataclass
class Calibration:
    temperature: float
    error_before: float     # ECE of the uncalibrated out-of-fold probabilities
    error_after: float      # ECE after calibration, cross-fitted

    def describe(self, rows: int) -> dict[str, Any]:
        return {
            "method": "temperature scaling fitted on cross-validated probabilities",
            "temperature": round(self.temperature, 4),
            "expected_calibration_error": round(self.error_after, 4),
            "expected_calibration_error_uncalibrated": round(self.error_before, 4),
            "bins": CALIBRATION_BINS,
            "rows": rows,
        }


def calibrate(probabilities: np.ndarray, truth: np.ndarray, random_state: int) -> Calibration:
    """The temperature for the final model, and the calibration error it is expected to leave."""
    parts = _parts(len(truth), random_state)
    calibrated = np.empty_like(probabilities)
    for part in parts:
        rest = np.setdiff1d(np.arange(len(truth)), part)
        t = fit_temperature(probabilities[rest], truth[rest])
        calibrated[part] = with_temperature(probabilities[part], t)
    before = calibration_error(probabilities, truth)
    after = calibration_error(calibrated, truth)
    if after >= before:
        # Rescaling did not help on rows it was not fitted on: leave the probabilities alone.
        return Calibration(1.0, before, before)
    return Calibration(fit_temperature(probabilities, truth), before, after)


class CalibratedModel:
    """A fitted classifier pipeline whose probabilities pass through a temperature.

    It answers ``predict``, ``predict_proba`` and ``classes_`` like the pipeline it wraps,
    so the predict path needs no change.
    """

    def __init__(self, pipeline: Any, temperature: float) -> None:
        self.pipeline = pipeline
        self.temperature = temperature

    @property
    def classes_(self) -> np.ndarray:
        return self.pipeline.classes_

    @property
    def steps(self) -> list:
        return self.pipeline.steps

    def fit(self, X: Any, y: Any) -> CalibratedModel:  # noqa: N803 - scikit-learn's naming
        self.pipeline.fit(X, y)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:  # noqa: N803
        return with_temperature(self.pipeline.predict_proba(X), self.temperature)

    def predict(self, X: Any) -> np.ndarray:  # noqa: N803
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


# --- regression intervals ---------------------------------------------------------------------

@dataclass
class Interval:
    low: float
    high: float
    coverage: float  # share of out-of-fold truths inside the interval, cross-fitted

    def describe(self, rows: int) -> dict[str, Any]:
        return {
            "method": "prediction + 5th to 95th percentile of cross-validated errors",
            "level": INTERVAL_LEVEL,
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "coverage": round(self.coverage, 4),
            "rows": rows,
        }


def residual_interval(residuals: np.ndarray, random_state: int) -> Interval:
    """The interval from all out-of-fold residuals; its coverage measured cross-fitted."""
    tail = (1 - INTERVAL_LEVEL) / 2
    inside = np.zeros(len(residuals), dtype=bool)
    for part in _parts(len(residuals), random_state):
        rest = np.setdiff1d(np.arange(len(residuals)), part)
        low, high = _quantiles(residuals[rest], tail)
        inside[part] = (residuals[part] >= low) & (residuals[part] <= high)
    low, high = _quantiles(residuals, tail)
    return Interval(low, high, float(inside.mean()))


def _quantiles(residuals: np.ndarray, tail: float) -> tuple[float, float]:
    # The outer order statistics ("lower"/"higher"): a finite sample covers a little less
    # than its empirical share, so the interval errs on the wide side.
    return (float(np.quantile(residuals, tail, method="lower")),
            float(np.quantile(residuals, 1 - tail, method="higher")))


# --- the score's interval ---------------------------------------------------------------------

SCORE_LEVEL = 0.9
# Resamples drawn to measure how much the score of a fold-sized sample moves by chance.
SCORE_BOOTSTRAP_DRAWS = 200


@dataclass
class ScoreInterval:
    low: float
    high: float
    spread: float        # the standard deviation used: fold scores, or bootstrap if larger
    fold_std: float | None
    bootstrap_std: float
    sample_rows: int     # the size of sample the interval is for: a fold's held-out rows

    def describe(self, folds: int) -> dict[str, Any]:
        level = (1 + SCORE_LEVEL) / 2
        formula = f"mean +- t({level:.2f}, {folds - 1} df) x s x sqrt(1 + 1/{folds})" \
            if folds > 1 else f"score +- z({level:.2f}) x s x sqrt(3)"
        return {
            "level": SCORE_LEVEL,
            "meaning": f"the score the model is expected to reach on a new sample of about "
                       f"{self.sample_rows} rows, {SCORE_LEVEL:.0%} of the time "
                       "(larger samples vary less)",
            "method": f"{formula}, s the larger of the fold scores' standard deviation "
                      "(n-1) and the bootstrap standard deviation of the score of a "
                      "fold-sized sample of the out-of-fold predictions",
            "s": round(self.spread, 4),
            "fold_std": None if self.fold_std is None else round(self.fold_std, 4),
            "bootstrap_std": round(self.bootstrap_std, 4),
        }


def score_interval(problem: str, fold_scores: list[float], truth: np.ndarray,
                   predicted: np.ndarray, sample_rows: int, random_state: int,
                   folds: int | None = None) -> ScoreInterval:
    """A prediction interval for the score of one new sample of ``sample_rows`` rows.

    The mean of k fold scores has the spread s/sqrt(k); a new sample's score has its own, s,
    on top: mean +- q x s x sqrt(1 + 1/k), with Student's t for q as s comes from k scores.
    With repeated k-fold, k is ``folds``, the folds of one partition, not every score: the
    partitions reuse the same rows, so their scores are not that many new samples (s is
    still taken from all of them).
    Five fold scores can agree by luck (or one hold-out gives no spread at all), so s is at
    least the bootstrap standard deviation of the score of ``sample_rows`` out-of-fold
    predictions drawn with replacement: the variation a test sample of that size brings.
    """
    k = min(len(fold_scores), folds or len(fold_scores))
    mean = float(np.mean(fold_scores))
    rng = np.random.default_rng(random_state + 2)
    if problem == "classification":
        # Integer codes: np.unique on object labels made 200 resamples cost seconds.
        _, codes = np.unique(np.concatenate([truth, predicted]), return_inverse=True)
        truth, predicted = codes[:len(truth)], codes[len(truth):]
    draws = [rng.integers(0, len(truth), sample_rows) for _ in range(SCORE_BOOTSTRAP_DRAWS)]
    boot = float(np.std([score(problem, truth[d], predicted[d]) for d in draws], ddof=1))
    fold_std = float(np.std(fold_scores, ddof=1)) if len(fold_scores) > 1 else None
    spread = max(fold_std or 0.0, boot)
    if k > 1:
        quantile = float(stats.t.ppf((1 + SCORE_LEVEL) / 2, k - 1))
        half = quantile * spread * float(np.sqrt(1 + 1 / k))
    else:
        # One hold-out: the bootstrap sees only which rows were tested, not how much a model
        # trained on other rows (the stored one learned from all) would differ. That part
        # is taken to be as large again: s x sqrt(1 + 1 + 1).
        half = float(stats.norm.ppf((1 + SCORE_LEVEL) / 2)) * spread * float(np.sqrt(3))
    # Both metrics top out at 1 (balanced accuracy also bottoms out at 0).
    low = mean - half if problem == "regression" else max(0.0, mean - half)
    return ScoreInterval(low, min(1.0, mean + half), spread, fold_std, boot, sample_rows)


# --- importances ------------------------------------------------------------------------------

@dataclass
class Importances:
    share: dict[str, float]   # mean drop in score / sum of the positive mean drops
    spread: dict[str, float]  # std over folds (a hold-out: over shuffles), same scale
    folds: int
    repeats: int

    def describe(self) -> dict[str, Any]:
        return {
            "method": "permutation importance on held-out folds",
            "scale": "share of the total: the drop in the score when the column is "
                     "shuffled, divided by the sum of the positive drops (positive shares "
                     "sum to 1; 0 or below: the column did not help)",
            "folds": self.folds,
            "repeats": self.repeats,
        }


def importances(models: list[Any], X: pd.DataFrame, y: np.ndarray, folds: Folds,  # noqa: N803
                problem: str, budget_s: float, random_state: int) -> Importances:
    """Permutation importance of each fold model on its own held-out rows.

    Folds are measured in turn until ``budget_s`` is spent (the first always is).
    """
    started = time.perf_counter()
    repeats = 5 if X.shape[1] <= 20 else 3 if X.shape[1] <= 50 else 2
    sample = min(IMPORTANCE_ROWS_PER_FOLD, max(len(t) for t in folds.tests))
    # At most IMPORTANCE_PREDICTED_ROWS shuffled rows a fold, but always two shuffles.
    repeats = max(2, min(repeats, IMPORTANCE_PREDICTED_ROWS // max(1, sample * X.shape[1])))
    rng = np.random.default_rng(random_state)
    drops = []
    for model, test in zip(models, folds.tests, strict=False):
        if drops and time.perf_counter() - started > budget_s:
            break
        if len(test) > IMPORTANCE_ROWS_PER_FOLD:
            test = np.sort(rng.choice(test, IMPORTANCE_ROWS_PER_FOLD, replace=False))
        drops.append(permutation_drops(model, X.iloc[test], y[test], problem, repeats, rng))
    # One fold (a hold-out): the spread is over its shuffles instead of over folds.
    matrix = np.vstack([d.mean(axis=1) for d in drops]) if len(drops) > 1 else drops[0].T
    mean = matrix.mean(axis=0)
    total = mean[mean > 0].sum()
    scale = total if total > 0 else 1.0
    spread = matrix.std(axis=0) / scale
    return Importances(
        share={c: round(float(v), 4) for c, v in zip(X.columns, mean / scale, strict=True)},
        spread={c: round(float(v), 4) for c, v in zip(X.columns, spread, strict=True)},
        folds=len(drops), repeats=repeats)


def permutation_drops(model: Any, X: pd.DataFrame, y: np.ndarray, problem: str,  # noqa: N803
                      repeats: int, rng: np.random.Generator) -> np.ndarray:
    """Each column's drop in the score when its values are shuffled: (columns, repeats).

    What scikit-learn's ``permutation_importance`` computes, with the shuffled copies
    stacked into one frame and predicted in one call: that function predicts once per
    column and shuffle, and the pipeline's per-call cost (checks, imputing, scaling) made
    importances take seconds on 64 columns. Here the model is called once per
    ``_BATCH_ROWS`` rows.
    """
    rows = len(X)
    base = score(problem, y, np.asarray(model.predict(X)))
    plain = {c: X[c].to_numpy() for c in X.columns}
    copies = []
    for column in X.columns:
        for _ in range(repeats):
            values = dict(plain)
            values[column] = plain[column][rng.permutation(rows)]
            copies.append(values)
    per_batch = max(1, _BATCH_ROWS // max(rows, 1))
    predicted = []
    for first in range(0, len(copies), per_batch):
        block = copies[first:first + per_batch]
        stacked = pd.DataFrame({c: np.concatenate([v[c] for v in block]) for c in X.columns})
        stacked = stacked.astype(X.dtypes.to_dict())
        predicted.append(np.asarray(model.predict(stacked)))
    answers = np.concatenate(predicted).reshape(len(copies), rows)
    shuffled = np.array([score(problem, y, a) for a in answers]).reshape(X.shape[1], repeats)
    return np.nan_to_num(base - shuffled)


def _parts(rows: int, random_state: int) -> list[np.ndarray]:
    order = np.random.default_rng(random_state + 1).permutation(rows)
    return [part for part in np.array_split(order, min(PARTS, rows)) if len(part)]
