"""Training, describing and predicting with scikit-learn; no Flask in here."""

from .errors import PredictionError, TrainingError
from .predict import LoadedModel, load_model, predict
from .train import METRICS, PROBLEMS, TrainResult, train

__all__ = ["METRICS", "PROBLEMS", "LoadedModel", "PredictionError", "TrainResult",
           "TrainingError", "load_model", "predict", "train"]
