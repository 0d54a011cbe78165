"""Training, describing and predicting with scikit-learn; no Flask in here.

scikit-learn, pandas and numpy are imported on first use, not with the package: a gunicorn
worker that only serves SQL and CRUD never loads them (about 150 MiB per process).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .errors import METRICS, PROBLEMS, PredictionError, TrainingError
from .names import find_column

if TYPE_CHECKING:
    from .prediction import LoadedModel
    from .training import TrainResult

__all__ = ["METRICS", "PROBLEMS", "LoadedModel", "PredictionError", "TrainResult",
           "TrainingError", "find_column", "load_model", "predict", "preload", "train",
           "train_forecast"]


# One thread imports the ML stack at a time: two importing numpy, pandas or scikit-learn at
# once (a prediction while a training starts) can be handed a half-initialised module
# ("partially initialized module 'numpy'") when Python's import locks break a cycle.
_IMPORTING = threading.Lock()


def preload() -> None:
    """Import the ML stack now (a gunicorn master before it forks: the workers then share
    these pages instead of each importing ~150 MiB on its first prediction); every entry
    point below calls it first."""
    with _IMPORTING:
        from . import prediction, training  # noqa: F401


def train(*args: Any, **kwargs: Any) -> TrainResult:
    preload()
    from .training import train as _train

    return _train(*args, **kwargs)


def train_forecast(*args: Any, **kwargs: Any) -> TrainResult:
    """A forecasting model (ORDER BY … HORIZON …): see forecast.py."""
    preload()
    from .prediction import train_forecast as _train_forecast

    return _train_forecast(*args, **kwargs)


def load_model(*args: Any, **kwargs: Any) -> LoadedModel:
    preload()
    from .prediction import load_model as _load_model

    return _load_model(*args, **kwargs)


def predict(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    preload()
    from .prediction import predict as _predict

    return _predict(*args, **kwargs)
