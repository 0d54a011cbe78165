"""Model quality on public tabular data sets (issues 16 and 26): Quarry against a plain
baseline, each scored on rows neither saw.

Every data set ships inside a package (no network): scikit-learn's bundled sets, CSV files
of ``statsmodels.datasets`` and ``vega_datasets``' local files (install both: the ``bench``
extra of setup.cfg). For each one a fixed 80/20 split (seed 1) is drawn; then, on the 80 %:

- Quarry: ``app.ml.train`` (the code the service runs) with its default time budget; its
  stored model predicts the 20 % through ``app.ml.predict``, from rows as a data source
  would give them (text stays text);
- the baseline: HistGradientBoosting or a linear model (logistic regression, ridge),
  whichever scores better in 5-fold cross-validation on the 80 %, behind a plain column
  preparation (median-imputed, scaled numbers; one-hot text; dates as year, month, day,
  weekday, hour and days since 1970), refit on the 80 %.

Reported per data set: both test scores (balanced accuracy or R²) and their gap
(Quarry − baseline) with the paired bootstrap standard error of the gap (the same resampled
test rows score both, 1 000 resamples); describe's cross-validated figure and its 90 %
interval against Quarry's test score; the training time against the budget (the ratio must
stay ≤ 1.2), and which candidates ran. Also: whether predictions answered the target's own
values (every predicted value is one the training rows held, of the same type).

One JSON line per data set, then a table.

    .venv/bin/python bench/quality.py [--only iris,fair] [--budget SECONDS] [--big-rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from sklearn import datasets  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402

from app.ml import predict, train  # noqa: E402
from app.ml.selection import score  # noqa: E402
from app.ml.threads import one_native_thread  # noqa: E402

SEED = 1
BOOTSTRAP = 1_000


# --- The data sets: (frame, target, problem) ------------------------------------------------

def _sklearn(loader, target: str = "target") -> pd.DataFrame:
    bunch = loader(as_frame=True)
    frame = bunch.frame.copy()
    return frame.rename(columns={bunch.target.name: target}) if target != "target" else frame


def _statsmodels(name: str) -> pd.DataFrame:
    import importlib

    return importlib.import_module(f"statsmodels.datasets.{name}").load_pandas().data.copy()


def _vega(name: str) -> pd.DataFrame:
    from vega_datasets import local_data

    return getattr(local_data, name)()


def _iris():
    frame = _sklearn(datasets.load_iris, "species")
    frame["species"] = np.array(["setosa", "versicolor", "virginica"])[frame["species"]]
    return frame, "species", "classification"


def _wine():
    return _sklearn(datasets.load_wine, "cultivar"), "cultivar", "classification"


def _breast_cancer():
    frame = _sklearn(datasets.load_breast_cancer, "diagnosis")
    frame["diagnosis"] = np.where(frame["diagnosis"] == 1, "benign", "malignant")
    return frame, "diagnosis", "classification"


def _digits():
    return _sklearn(datasets.load_digits, "digit"), "digit", "classification"


def _diabetes():
    return _sklearn(datasets.load_diabetes, "progression"), "progression", "regression"


def _anes96():
    # The 1996 presidential vote (Dole or Clinton) from views and demographics.
    frame = _statsmodels("anes96").drop(columns=["logpopul"])
    frame["vote"] = np.where(frame["vote"] == 1, "Dole", "Clinton")
    return frame, "vote", "classification"


def _fair():
    # Whether a married woman had an affair: the text 'yes'/'no', as a table would hold it.
    frame = _statsmodels("fair")
    frame["affair"] = np.where(frame.pop("affairs") > 0, "yes", "no")
    return frame, "affair", "classification"


def _randhie(kind: str):
    # RAND health insurance experiment: 20 190 people; visits to a doctor in a year.
    frame = _statsmodels("randhie")
    if kind == "classification":
        frame["visited"] = np.where(frame.pop("mdvis") > 0, "Yes", "No")
        return frame, "visited", "classification"
    frame["mdvis"] = frame["mdvis"].astype(float)
    return frame, "mdvis", "regression"


def _star98():
    # California schools: the share of pupils above the national median in maths.
    frame = _statsmodels("star98")
    frame["above"] = frame["NABOVE"] / (frame["NABOVE"] + frame["NBELOW"])
    return frame.drop(columns=["NABOVE", "NBELOW"]), "above", "regression"


def _cars(target: str):
    # Text columns: Origin (a category), Cylinders written as text; Name is an identifier.
    frame = _vega("cars").drop(columns=["Year"])
    frame["Cylinders"] = frame["Cylinders"].astype(int).astype(str)
    frame = frame.dropna(subset=[target]).reset_index(drop=True)
    return frame, target, "classification" if target == "Origin" else "regression"


def _seattle_weather():
    # A text target (sun, rain, fog, drizzle, snow) and a date written as text.
    frame = _vega("seattle_weather")
    frame["date"] = pd.to_datetime(frame["date"]).dt.strftime("%Y-%m-%d")
    return frame, "weather", "classification"


def _seattle_temps():
    # An hourly temperature from its timestamp alone (as text): dates must be read.
    frame = _vega("seattle_temps")
    frame["date"] = pd.to_datetime(frame["date"]).dt.strftime("%Y-%m-%d %H:%M:%S")
    return frame, "temp", "regression"


def mixed(rows: int, seed: int = 0):
    """rows x 20 columns: 12 numbers, 4 categories, 2 booleans, 1 date, 1 id; a class target
    (generated: the only set of 100 000 rows; ``--big-rows``)."""
    rng = np.random.default_rng(seed)
    data: dict[str, object] = {}
    for i in range(12):
        data[f"x{i}"] = rng.normal(size=rows)
    for i in range(4):
        data[f"c{i}"] = rng.choice([f"v{j}" for j in range(6 + 3 * i)], size=rows)
    data["b0"] = rng.random(rows) < 0.3
    data["b1"] = rng.random(rows) < 0.6
    days = rng.integers(0, 730, size=rows)
    data["day"] = (pd.Timestamp("2022-01-01") + pd.to_timedelta(days, unit="D")).strftime(
        "%Y-%m-%d")
    data["row_id"] = np.arange(rows)
    frame = pd.DataFrame(data)
    frame.loc[rng.random(rows) < 0.05, "x3"] = np.nan
    weekday = pd.to_datetime(frame["day"]).dt.day_of_week.to_numpy()
    signal = (frame["x0"] - 0.8 * frame["x1"] + 0.5 * frame["x2"] * frame["x4"]
              + (frame["c0"] == "v1") * 1.2 + frame["b0"] * 0.7 + (weekday >= 5) * 0.9
              + np.sin(frame["x5"] * 2)).to_numpy()
    noisy = signal + rng.normal(scale=1.0, size=rows)
    frame["label"] = np.where(noisy > np.quantile(noisy, 0.66), "high",
                              np.where(noisy > np.quantile(noisy, 0.33), "mid", "low"))
    return frame, "label", "classification"


SETS = {
    "iris": _iris, "wine": _wine, "breast_cancer": _breast_cancer, "digits": _digits,
    "anes96": _anes96, "cars_origin": lambda: _cars("Origin"),
    "seattle_weather": _seattle_weather, "fair": _fair,
    "randhie_visited": lambda: _randhie("classification"),
    "diabetes": _diabetes, "star98": _star98, "cars_mpg": lambda: _cars("Miles_per_Gallon"),
    "seattle_temps": _seattle_temps, "randhie_visits": lambda: _randhie("regression"),
}


# --- The baseline ---------------------------------------------------------------------------

def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as they are; text that parses as dates in every row as date parts; other
    text as text (one-hot in the pipeline)."""
    out = {}
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            out[name] = column.astype(float)
            continue
        stamps = pd.to_datetime(column, errors="coerce", format="ISO8601")
        if stamps.notna().sum() == column.notna().sum() > 0:
            for part in ("year", "month", "day", "day_of_week", "hour"):
                out[f"{name}_{part}"] = getattr(stamps.dt, part).astype(float)
            out[f"{name}_days"] = (stamps - pd.Timestamp("1970-01-01")) / pd.Timedelta(days=1)
        else:
            out[name] = column.astype(object).where(column.notna(), "__missing__").astype(str)
    return pd.DataFrame(out, index=frame.index)


def _baseline(problem: str, X: pd.DataFrame, kind: str) -> Pipeline:  # noqa: N803
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    numbers = [c for c in X.columns if c not in text]
    steps = [("numbers", Pipeline([("impute", SimpleImputer(strategy="median")),
                                   ("scale", StandardScaler())]), numbers)]
    if text:
        steps.append(("text", OneHotEncoder(handle_unknown="ignore", min_frequency=5,
                                            sparse_output=False), text))
    if kind == "boosting":
        estimator = HistGradientBoostingClassifier(random_state=0) \
            if problem == "classification" else HistGradientBoostingRegressor(random_state=0)
    else:
        estimator = LogisticRegression(max_iter=2000) if problem == "classification" \
            else Ridge(alpha=1.0)
    return Pipeline([("prepare", ColumnTransformer(steps)), ("estimator", estimator)])


def baseline(problem: str, seen: pd.DataFrame, fresh: pd.DataFrame, target: str
             ) -> tuple[str, dict[str, float], np.ndarray, float]:
    """(the kind chosen, each kind's CV mean, its predictions of ``fresh``, seconds)."""
    started = time.perf_counter()
    X, X_fresh = _plain(seen.drop(columns=[target])), _plain(fresh.drop(columns=[target]))  # noqa: N806
    y = seen[target].to_numpy()
    if problem == "classification":
        folds = StratifiedKFold(5, shuffle=True, random_state=SEED) \
            if pd.Series(y).value_counts().min() >= 5 else KFold(5, shuffle=True,
                                                                 random_state=SEED)
        scoring = "balanced_accuracy"
    else:
        folds, scoring, y = KFold(5, shuffle=True, random_state=SEED), "r2", y.astype(float)
    means = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("boosting", "linear"):
            means[kind] = round(float(np.mean(cross_val_score(
                _baseline(problem, X, kind), X, y, cv=folds, scoring=scoring))), 4)
        chosen = max(means, key=means.get)
        model = _baseline(problem, X, chosen).fit(X, y)
    return chosen, means, model.predict(X_fresh), time.perf_counter() - started


# --- Scores ---------------------------------------------------------------------------------

def paired_bootstrap(problem: str, truth: np.ndarray, ours: np.ndarray, theirs: np.ndarray,
                     seed: int = SEED) -> float:
    """Standard error of score(ours) − score(theirs) over resamples of the test rows (the
    same rows score both, so what the two get right or wrong together cancels out)."""
    rng = np.random.default_rng(seed)
    gaps = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, len(truth), len(truth))
        if problem == "regression" and np.ptp(truth[pick]) == 0:
            continue
        gaps.append(score(problem, truth[pick], ours[pick])
                    - score(problem, truth[pick], theirs[pick]))
    return float(np.std(gaps, ddof=1))


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width bins of the answers' confidence."""
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    return float(sum((which == b).mean() * abs(correct[which == b].mean()
                                               - confidence[which == b].mean())
                     for b in range(bins) if (which == b).any()))


def split(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    order = np.random.default_rng(SEED).permutation(len(frame))
    cut = int(len(frame) * 0.8)
    return frame.iloc[order[:cut]].reset_index(drop=True), \
        frame.iloc[order[cut:]].reset_index(drop=True)


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as a data source answers them: Python values, None for a missing one."""
    return [{k: (None if isinstance(v, float) and np.isnan(v) else
                 v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
            for row in frame.astype(object).to_dict("records")]


def run(name: str, frame: pd.DataFrame, target: str, problem: str,
        budget: float | None) -> dict[str, object]:
    seen, fresh = split(frame)
    training = pd.DataFrame.from_records(_records(seen))
    started = time.perf_counter()
    result = train(training, target, problem=problem, time_budget_s=budget)
    seconds = time.perf_counter() - started
    info = result.description["info"]
    metric = next(iter(info["accuracies"]))
    answers = predict(result.artifact, _records(fresh.drop(columns=[target])))
    truth = np.array([r[target] for r in _records(fresh[[target]])], dtype=object)
    ours = np.array([a[target] for a in answers], dtype=object)
    held = {(type(v), v) for v in training[target]}
    own_values = all((type(v), v) in held for v in ours) if problem == "classification" \
        else all(isinstance(v, float) for v in ours)
    with one_native_thread():
        chosen, means, theirs, base_seconds = baseline(problem, seen, fresh, target)
    if problem == "regression":
        truth, ours, theirs = truth.astype(float), ours.astype(float), theirs.astype(float)
    else:
        theirs = theirs.astype(object)
    ours_test, theirs_test = score(problem, truth, ours), score(problem, truth, theirs)
    low, high = info["accuracy_interval"][metric]
    search = info.get("search", {})
    row: dict[str, object] = {
        "data": name, "problem": problem, "rows": len(frame), "train_rows": len(seen),
        "test_rows": len(fresh), "metric": metric,
        "quarry_test": round(ours_test, 4), "baseline_test": round(theirs_test, 4),
        "gap": round(ours_test - theirs_test, 4),
        "gap_se": round(paired_bootstrap(problem, truth, ours, theirs), 4),
        "baseline": chosen, "baseline_cv": means,
        "describe_cv": info["accuracies"][metric], "describe_interval": [low, high],
        "test_in_interval": low <= ours_test <= high,
        "seconds": round(seconds, 2), "budget_s": info["time_budget_s"],
        "time_ratio": round(seconds / info["time_budget_s"], 2),
        "baseline_seconds": round(base_seconds, 2),
        "chosen": next(f"{m['name']} {m['params']}" for m in result.description["model"]
                       if m["selected"]),
        "ran": search.get("ran"), "not_run": sorted(search.get("stopped_or_skipped", {})),
        "own_values": own_values,
    }
    if problem == "classification":
        confidence = np.array([a[f"{target}_confidence"] for a in answers])
        row["ece_cv"] = info["calibration"]["expected_calibration_error"]
        row["ece_test"] = round(ece(confidence, ours == truth), 4)
    else:
        low_v = np.array([a[f"{target}_min"] for a in answers], dtype=float)
        high_v = np.array([a[f"{target}_max"] for a in answers], dtype=float)
        row["coverage_cv"] = info["interval"]["coverage"]
        row["coverage_test"] = round(float(np.mean((truth >= low_v) & (truth <= high_v))), 4)
    return row


def table(rows: list[dict[str, object]]) -> str:
    head = ("| data | rows (test) | Quarry test | baseline test (kind) | gap ± SE "
            "| describe CV [90 % interval] | in | s / budget (ratio) | own values |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        low, high = r["describe_interval"]
        metric = " (R²)" if r["problem"] == "regression" else ""
        lines.append(
            f"| {r['data']}{metric} | {r['rows']} ({r['test_rows']}) | {r['quarry_test']:.3f} "
            f"| {r['baseline_test']:.3f} ({r['baseline']}) "
            f"| {r['gap']:+.3f} ± {r['gap_se']:.3f} "
            f"| {r['describe_cv']:.3f} [{low:.3f}, {high:.3f}] "
            f"| {'✓' if r['test_in_interval'] else '✗'} "
            f"| {r['seconds']:.1f} / {r['budget_s']:.1f} ({r['time_ratio']:.2f}) "
            f"| {'✓' if r['own_values'] else '✗'} |")
    gaps = np.array([r["gap"] for r in rows])
    lines.append("")
    lines.append(f"mean gap {gaps.mean():+.4f}; within 2 SE of zero or better: "
                 f"{sum(r['gap'] >= -2 * r['gap_se'] for r in rows)} of {len(rows)}; "
                 f"largest time ratio {max(r['time_ratio'] for r in rows):.2f}")
    return "\n".join(lines)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated data set names")
    parser.add_argument("--budget", type=float, default=None,
                        help="time_budget_s for every training (default: Quarry's own)")
    parser.add_argument("--big-rows", type=int, default=0,
                        help="also a generated set ('mixed') whose training part has this "
                             "many rows (e.g. 100000: the hold-out regime of the trainer)")
    args = parser.parse_args()
    if args.big_rows:
        SETS["mixed"] = lambda: mixed(int(args.big_rows / 0.8))
    only = [s for s in args.only.split(",") if s] or list(SETS)
    print(f"cores: {os.cpu_count()}; load average (1, 5, 15 min) at start: {load()}",
          flush=True)
    rows = []
    for name in only:
        frame, target, problem = SETS[name]()
        rows.append(run(name, frame, target, problem, args.budget))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average at end: {load()}")
    print(table(rows))


if __name__ == "__main__":
    main()
