"""A numpy route around the preprocessing of a fitted pipeline, for small batches.

Measured (py-spy/cProfile, iris, one row): about three quarters of a 1-row predict went to
scikit-learn's ColumnTransformer — a pandas frame built for one row, joblib's dispatch, and
input validation repeated in each of its steps — not to the estimator. When every step of
the preprocessing is one this module can replay exactly (median/most-frequent imputation,
with its missing-value flags, and standard scaling of numeric columns, in order), the fitted
statistics are read once and a row is transformed with a few numpy operations; the estimator
then gets the same matrix the ColumnTransformer would have built, and a calibrated
classifier's probabilities get its temperature as ``CalibratedModel`` gives them. Anything
else (categorical encoding, dates, a step added later) returns None from ``compile_rows``
and the pipeline is used as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from .measures import CalibratedModel, with_temperature

Rows = list[list[float]]


def _numeric_steps(steps: Any) -> list[Callable[[np.ndarray], np.ndarray]] | None:
    """The numpy equivalents of a transformer's steps, or None when one is not replayable."""
    steps = steps.steps if isinstance(steps, Pipeline) else [("only", steps)]
    replayed: list[Callable[[np.ndarray], np.ndarray]] = []
    for _, step in steps:
        if isinstance(step, SimpleImputer) and step.strategy in ("median", "mean",
                                                                  "most_frequent") \
                and step.statistics_.dtype.kind == "f" \
                and not np.isnan(step.statistics_).any() \
                and (isinstance(step.missing_values, float) and np.isnan(step.missing_values)):
            fill = step.statistics_.astype(float)
            if step.add_indicator:
                # Imputed columns, then a 0/1 column for each input that had gaps at fit
                # time (MissingIndicator's "missing-only" features), as SimpleImputer does.
                flagged = np.asarray(step.indicator_.features_, dtype=int)
                replayed.append(lambda x, fill=fill, flagged=flagged: np.hstack(
                    [np.where(np.isnan(x), fill, x), np.isnan(x[:, flagged]).astype(float)]))
            else:
                replayed.append(lambda x, fill=fill: np.where(np.isnan(x), fill, x))
        elif isinstance(step, StandardScaler):
            mean = step.mean_ if step.with_mean and step.mean_ is not None else 0.0
            scale = step.scale_ if step.with_std and step.scale_ is not None else 1.0
            replayed.append(lambda x, mean=mean, scale=scale: (x - mean) / scale)
        else:
            return None
    return replayed


class FastModel:
    """The estimator of a fitted pipeline (and the temperature of a calibrated classifier)
    behind the numpy preprocessing: ``predict``/``predict_proba`` take rows of floats."""

    def __init__(self, transform: Callable[[Rows], np.ndarray], estimator: Any,
                 temperature: float | None) -> None:
        self.transform = transform
        self.estimator = estimator
        self.temperature = temperature

    def predict_proba(self, rows: Rows) -> np.ndarray:
        probabilities = self.estimator.predict_proba(self.transform(rows))
        if self.temperature is None:
            return probabilities
        return with_temperature(probabilities, self.temperature)

    def predict(self, rows: Rows) -> np.ndarray:
        return self.estimator.predict(self.transform(rows))


def compile_model(model: Any, columns: list[str]) -> FastModel | None:
    """The numpy route for a stored model (a Pipeline, or a CalibratedModel around one), or
    None when its preprocessing is not all replayable."""
    pipeline, temperature = model, None
    if isinstance(model, CalibratedModel):
        pipeline, temperature = model.pipeline, model.temperature
    transform = compile_rows(pipeline, columns)
    if transform is None:
        return None
    return FastModel(transform, pipeline.steps[-1][1], temperature)


def compile_rows(pipeline: Any, columns: list[str]) -> Callable[[Rows], np.ndarray] | None:
    """A function from rows of floats (NaN for missing; in ``columns`` order) to the matrix
    the pipeline's estimator takes, or None when the preprocessing is not all numeric."""
    if not isinstance(pipeline, Pipeline) or len(pipeline.steps) != 2:
        return None
    preprocess = pipeline.steps[0][1]
    if not isinstance(preprocess, ColumnTransformer) or preprocess.remainder != "drop" \
            and preprocess.remainder is not None:
        return None
    position = {name: index for index, name in enumerate(columns)}
    parts: list[tuple[list[int], list[Callable[[np.ndarray], np.ndarray]]]] = []
    for name, transformer, selected in preprocess.transformers_:
        if name == "remainder" and transformer == "drop":
            continue
        if transformer == "drop" or not all(isinstance(c, str) and c in position
                                            for c in selected):
            return None
        steps = _numeric_steps(transformer)
        if steps is None:
            return None
        parts.append(([position[c] for c in selected], steps))

    def transform(rows: Rows) -> np.ndarray:
        matrix = np.asarray(rows, dtype=float)
        blocks = []
        for indexes, steps in parts:
            block = matrix[:, indexes]
            for step in steps:
                block = step(block)
            blocks.append(block)
        return np.hstack(blocks) if len(blocks) > 1 else blocks[0]

    return transform
