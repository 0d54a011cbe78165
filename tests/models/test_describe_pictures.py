"""describe's data for the console's pictures: a classifier's confusion matrix, a regressor's
residual plot, both from the out-of-fold predictions (app/ml/diagnostics.py)."""

import math

from tests.models.conftest import DIABETES_SQL, IRIS_SQL, create


def _info(client, name: str) -> dict:
    answer = client.get(f"/api/projects/p1/models/{name}/describe?attribute=info")
    assert answer.status_code == 200
    (info,) = answer.get_json()
    return info


def test_a_classifier_describes_its_confusion_matrix(p1):
    assert create(p1, IRIS_SQL.format(name="iris_cm")).status_code == 201
    info = _info(p1, "iris_cm")
    matrix = info["confusion_matrix"]
    assert "residuals" not in info
    assert matrix["labels"] == ["setosa", "versicolor", "virginica"]
    counts = matrix["matrix"]
    assert len(counts) == 3 and all(len(row) == 3 for row in counts)
    # Every row of iris was scored once (5-fold below the hold-out size): 50 per class.
    assert [sum(row) for row in counts] == [50, 50, 50] and matrix["rows"] == 150
    assert matrix["classes_left_out"] == 0
    # Its balanced accuracy is the model's (pooled over the folds, against their mean).
    pooled = sum(counts[i][i] / sum(counts[i]) for i in range(3)) / 3
    assert abs(pooled - info["accuracies"]["balanced_accuracy_score"]) < 0.03
    # MindsDB's shape stays: its four columns first in DESCRIBE, the additions after.
    described = p1.post("/api/sql/query", json={"query": "DESCRIBE p1.iris_cm.info"}).get_json()
    assert described["column_names"][:4] == ["accuracies", "column_importances", "outputs",
                                             "inputs"]
    assert "confusion_matrix" in described["column_names"]


def test_a_regressor_describes_its_residuals(p1):
    assert create(p1, DIABETES_SQL.format(name="diabetes_res")).status_code == 201
    info = _info(p1, "diabetes_res")
    residuals = info["residuals"]
    assert "confusion_matrix" not in info
    assert residuals["rows"] == 442
    assert len(residuals["predicted"]) == len(residuals["residual"]) == 400
    assert all(math.isfinite(v) for v in residuals["predicted"] + residuals["residual"])
    # The residuals are the model's errors: centred near zero, spread as its R² says
    # (R² = 1 − var(residual) / var(target); diabetes' progression has a spread of about 77).
    mean = sum(residuals["residual"]) / 400
    spread = math.sqrt(sum((r - mean) ** 2 for r in residuals["residual"]) / 400)
    assert abs(mean) < 10
    r2 = info["accuracies"]["r2_score"]
    assert abs((1 - spread ** 2 / 77.0 ** 2) - r2) < 0.1
