"""The data of describe's pictures, from the chosen candidate's out-of-fold predictions.

- A classifier: the confusion matrix (rows the actual class, columns the predicted one), over
  every scored row. Past MAX_CLASSES classes the rarest are left out (a matrix that large is
  not read as a picture), and the answer says how many.
- A regressor: the residual plot's points, (predicted, actual − predicted) of at most
  RESIDUAL_POINTS scored rows drawn evenly from them (the same rows for the same training).

Every prediction was made by a model that had not seen the row, as the score's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_CLASSES = 30
RESIDUAL_POINTS = 400


def pictures(problem: str, actual: np.ndarray, predicted: np.ndarray,
             classes: np.ndarray | None = None) -> dict[str, Any]:
    """What describe's ``info`` gains: ``confusion_matrix`` or ``residuals`` (or nothing when
    there is no scored row). ``predicted``: a classifier's probabilities (a column per class
    of ``classes``, np.unique of the target), a regressor's values."""
    if len(actual) == 0:
        return {}
    if problem == "classification":
        known = np.unique(actual) if classes is None else classes
        return {"confusion_matrix": confusion_matrix(actual, predicted, known)}
    return {"residuals": residuals(np.asarray(actual, dtype=float),
                                   np.asarray(predicted, dtype=float))}


def confusion_matrix(actual: np.ndarray, probabilities: np.ndarray, classes: np.ndarray
                     ) -> dict[str, Any]:
    """Counts of (actual, predicted) over the scored rows; ``probabilities`` has one column
    per class, in the order of ``classes`` (np.unique of the whole target, as training
    ordered them)."""
    truth = np.searchsorted(classes, actual)
    guess = np.nan_to_num(probabilities, nan=-1.0).argmax(axis=1)
    counts = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(counts, (truth, guess), 1)
    keep = np.arange(len(classes))
    if len(classes) > MAX_CLASSES:
        frequent = np.argsort(-counts.sum(axis=1), kind="stable")[:MAX_CLASSES]
        keep = np.sort(frequent)
    return {
        "labels": [_plain(classes[i]) for i in keep],
        "matrix": counts[np.ix_(keep, keep)].tolist(),
        "rows": int(len(actual)),
        "classes_left_out": int(len(classes) - len(keep)),
        "note": "rows: actual class, columns: predicted class; out-of-fold predictions",
    }


def residuals(actual: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """Points of the residual plot, rounded to 4 significant digits."""
    finite = np.flatnonzero(np.isfinite(actual) & np.isfinite(predicted))
    chosen = finite
    if len(finite) > RESIDUAL_POINTS:
        chosen = np.sort(np.random.default_rng(0).choice(
            finite, RESIDUAL_POINTS, replace=False))
    fitted = predicted[chosen]
    return {
        "predicted": [_round(v) for v in fitted],
        "residual": [_round(v) for v in actual[chosen] - fitted],
        "rows": int(len(finite)),
        "note": "residual = actual − predicted, out-of-fold; "
                f"{len(chosen)} of {len(finite)} scored rows",
    }


def _round(value: float) -> float:
    return float(f"{float(value):.4g}")


def _plain(value: Any) -> Any:
    """A class label as JSON has it (numpy scalars to Python ones)."""
    return value.item() if isinstance(value, np.generic) else value
