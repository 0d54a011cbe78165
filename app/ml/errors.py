"""Errors of the ML library: plain exceptions, turned into HTTP problems by the services."""

from __future__ import annotations

# Here, not in train.py, so that checking a USING clause does not import scikit-learn.
PROBLEMS = ("classification", "regression")
METRICS = {"classification": "balanced_accuracy_score", "regression": "r2_score"}


class TrainingError(Exception):
    """The data cannot train a model (empty, target missing or constant, too few rows…)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PredictionError(Exception):
    """A row given to predict cannot be used; ``column`` names the culprit when there is one."""

    def __init__(self, message: str, column: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column
