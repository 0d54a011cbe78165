"""Model quality benchmark of issue 16: what describe claims, next to plain baselines.

For each data set a fresh hold-out (20 %, seed 1) is put aside first; Quarry's trainer
(``app.ml.train``, the code the service runs) sees only the rest. Reported per data set:

- ``quarry``: the cross-validated score describe reports, and its 90 % interval
  (``accuracy_interval``: where the score on a new sample of a fold's size is expected to fall);
- ``best_baseline``: the best of LinearRegression/LogisticRegression, RandomForest and
  HistGradientBoosting with default parameters, scored on the same folds of the same rows,
  behind the same column preprocessing (one-hot categories) (aim: quarry >= best - 0.01);
- ``holdout``: the stored model's score on the fresh hold-out, through ``app.ml.predict``
  (aim: inside the reported interval);
- ``ece``: describe's expected calibration error (cross-fitted, out of fold) and the same
  figure on the fresh hold-out; ``coverage``: the regression interval's share of truths,
  likewise (aims: ECE <= 0.05; coverage near 0.9);
- ``seconds``: Quarry's training time, wall clock and CPU (aims: <= 10 s up to 10 000 rows,
  <= 60 s at 100 000), and, measured in the same run, the time the three baselines took on
  the same folds (their sum), with Quarry's time as a ratio of it. The load average is
  printed before and after: the machine is shared, and wall times grow with the load.

One JSON line per data set, then a table.

    .venv/bin/python bench/quality.py [--only iris,wine] [--big-rows 100000]
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
from sklearn.base import clone  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402

from app.ml import predict, train  # noqa: E402
from app.ml.columns import infer_column, normalise  # noqa: E402
from app.ml.selection import make_folds, score  # noqa: E402
from app.ml.threads import one_native_thread  # noqa: E402
from app.ml.training import _inputs, _pipeline, _target, prepare_frame  # noqa: E402
from app.sql.demo import demo_tables  # noqa: E402


def demo(table: str, target: str) -> tuple[pd.DataFrame, str]:
    columns, rows = demo_tables()[table]
    return pd.DataFrame.from_records(rows, columns=columns), target


def bundled(loader, target: str | None = None) -> tuple[pd.DataFrame, str]:
    bunch = loader(as_frame=True)
    frame = bunch.data.copy()
    targets = bunch.target if isinstance(bunch.target, pd.DataFrame) \
        else bunch.target.to_frame("target")
    name = target or targets.columns[0]
    frame[name] = targets[name].to_numpy()
    return frame, name


def mixed(rows: int, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """rows x 20 columns: 12 numbers, 4 categories, 2 booleans, 1 date, 1 id; a class target."""
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
    frame.loc[rng.random(rows) < 0.05, "x3"] = np.nan  # gaps, flagged by the imputer
    weekday = pd.to_datetime(frame["day"]).dt.day_of_week.to_numpy()
    signal = (frame["x0"] - 0.8 * frame["x1"] + 0.5 * frame["x2"] * frame["x4"]
              + (frame["c0"] == "v1") * 1.2 + frame["b0"] * 0.7 + (weekday >= 5) * 0.9
              + np.sin(frame["x5"] * 2)).to_numpy()
    noisy = signal + rng.normal(scale=1.0, size=rows)
    frame["label"] = np.where(noisy > np.quantile(noisy, 0.66), "high",
                              np.where(noisy > np.quantile(noisy, 0.33), "mid", "low"))
    return frame, "label"


def baselines(problem: str, random_state: int = 0) -> dict[str, object]:
    if problem == "classification":
        return {"LogisticRegression": LogisticRegression(),
                "RandomForestClassifier": RandomForestClassifier(random_state=random_state,
                                                                 n_jobs=2),
                "HistGradientBoostingClassifier": HistGradientBoostingClassifier(
                    random_state=random_state)}
    return {"LinearRegression": LinearRegression(),
            "RandomForestRegressor": RandomForestRegressor(random_state=random_state, n_jobs=2),
            "HistGradientBoostingRegressor": HistGradientBoostingRegressor(
                random_state=random_state)}


def baseline_scores(frame: pd.DataFrame, target: str) -> tuple[dict[str, float], float]:
    """Each default estimator's mean score on the folds Quarry's trainer draws for ``frame``,
    and the seconds all of them took (wall clock)."""
    started = time.perf_counter()
    frame, goal = _target(frame, target, None)
    columns = [infer_column(n, *normalise(frame[n])) for n in frame.columns if n != goal.name]
    used = _inputs(columns, goal.name)
    X = prepare_frame(frame, used)  # noqa: N806
    y = goal.values
    folds = make_folds(y, goal.problem, 0)
    out = {}
    for name, estimator in baselines(goal.problem).items():
        scores = []
        for k, test in enumerate(folds.tests):
            model = _pipeline(used, clone(estimator), native_categories=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X.iloc[folds.train_index(k)], y[folds.train_index(k)])
            scores.append(score(goal.problem, y[test], model.predict(X.iloc[test])))
        out[name] = round(float(np.mean(scores)), 4)
    return out, time.perf_counter() - started


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width bins of the answers' confidence."""
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    return float(sum((which == b).mean() * abs(correct[which == b].mean()
                                               - confidence[which == b].mean())
                     for b in range(bins) if (which == b).any()))


def holdout_split(frame: pd.DataFrame, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    order = np.random.default_rng(seed).permutation(len(frame))
    cut = int(len(frame) * 0.8)
    return frame.iloc[order[:cut]].reset_index(drop=True), \
        frame.iloc[order[cut:]].reset_index(drop=True)


def run(name: str, frame: pd.DataFrame, target: str) -> dict[str, object]:
    seen, fresh = holdout_split(frame)
    started, cpu = time.perf_counter(), time.process_time()
    result = train(seen, target)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    info = result.description["info"]
    metric = next(iter(info["accuracies"]))
    reported, spread = info["accuracies"][metric], info["accuracy_std"][metric]
    low, high = info["accuracy_interval"][metric]
    chosen = next(m for m in result.description["model"] if m["selected"])
    with one_native_thread():
        base, base_seconds = baseline_scores(seen, target)
    rows = fresh.drop(columns=[target]).to_dict("records")
    answers = predict(result.artifact, rows)
    truth = fresh[target].to_numpy()
    predicted = np.array([a[target] for a in answers])
    row: dict[str, object] = {
        "data": name, "rows": len(seen), "fresh_rows": len(fresh), "problem": result.problem,
        "metric": metric, "quarry": reported, "std": spread, "interval": [low, high],
        "folds": info["folds"], "chosen": f"{chosen['name']} {chosen['params']}",
        "best_baseline": max(base.values()), "baselines": base,
        "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
        "budget_s": info["time_budget_s"], "baseline_seconds": round(base_seconds, 1),
        "time_ratio": round(seconds / base_seconds, 2)}
    if result.problem == "classification":
        truth = truth.astype(predicted.dtype) if predicted.dtype != object else truth
        row["holdout"] = round(score("classification", truth, predicted), 4)
        confidence = np.array([a[f"{target}_confidence"] for a in answers])
        correct = predicted == truth
        row["ece_cv"] = info["calibration"]["expected_calibration_error"]
        row["ece_holdout"] = round(ece(confidence, correct), 4)
    else:
        row["holdout"] = round(score("regression", truth.astype(float), predicted.astype(float)),
                               4)
        low_v = np.array([a[f"{target}_min"] for a in answers])
        high_v = np.array([a[f"{target}_max"] for a in answers])
        row["coverage_cv"] = info["interval"]["coverage"]
        row["coverage_holdout"] = round(float(np.mean((truth >= low_v) & (truth <= high_v))), 4)
    row["aim_baseline"] = reported >= row["best_baseline"] - 0.01
    row["aim_holdout"] = low <= row["holdout"] <= high
    row["aim_calibration"] = row["ece_cv"] <= 0.05 if "ece_cv" in row else None
    row["aim_seconds"] = seconds <= (10 if len(seen) <= 10_000 else 60)
    return row


def mark(ok: object) -> str:
    return "" if ok is None else " ✓" if ok else " ✗"


def table(rows: list[dict[str, object]]) -> str:
    head = ("| data | rows | Quarry CV (folds) | 90 % interval | fresh hold-out | best baseline "
            "| ECE cv / hold-out, or interval coverage | Quarry s (cpu s) | baselines s "
            "| ratio | chosen |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        low, high = r["interval"]
        if "ece_cv" in r:
            extra = f"{r['ece_cv']:.3f} / {r['ece_holdout']:.3f}{mark(r['aim_calibration'])}"
        else:
            extra = f"{r['coverage_cv']:.3f} / {r['coverage_holdout']:.3f}"
        metric = " (R²)" if r["problem"] == "regression" else ""
        lines.append(
            f"| {r['data']}{metric} | {r['rows']} | {r['quarry']:.3f} ({r['folds']}) "
            f"| {low:.3f} – {high:.3f} | {r['holdout']:.3f}{mark(r['aim_holdout'])} "
            f"| {r['best_baseline']:.3f}{mark(r['aim_baseline'])} | {extra} "
            f"| {r['seconds']:.1f} ({r['cpu_seconds']:.1f}){mark(r['aim_seconds'])} "
            f"| {r['baseline_seconds']:.1f} | {r['time_ratio']:.2f} | {r['chosen']} |")
    return "\n".join(lines)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--big-rows", type=int, default=100_000)
    args = parser.parse_args()
    sets = {
        "iris": lambda: demo("iris", "species"),
        "wine": lambda: demo("wine", "cultivar"),
        "breast_cancer": lambda: demo("breast_cancer", "diagnosis"),
        "diabetes": lambda: demo("diabetes", "progression"),
        "digits": lambda: bundled(datasets.load_digits),
        "linnerud": lambda: bundled(datasets.load_linnerud, "Weight"),
        "mixed": lambda: mixed(int(args.big_rows / 0.8)),
    }
    only = [s for s in args.only.split(",") if s] or list(sets)
    print(f"cores: {os.cpu_count()}; load average (1, 5, 15 min) at start: {load()}",
          flush=True)
    rows = []
    for name in only:
        frame, target = sets[name]()
        rows.append(run(name, frame, target))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average at end: {load()}")
    print(table(rows))


if __name__ == "__main__":
    main()
