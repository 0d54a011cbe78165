"""In-process predict cost of two checkouts side by side (issue 26: reading every input value
for unknowns must not slow the predict path).

The base checkout (``--base``, default /work/main) trains two models once with
``app.ml.train`` — iris (all numeric: the numpy fast path of ``fastpath.py``) and a table
with a category and a date (the scikit-learn pipeline) — and writes their artifacts, so both
checkouts predict with the very same fitted models (the branch reads the base's artifacts).
Then each checkout (base, and ``--branch``, default this one) runs the same timing script in
its own Python process, alternately, ``--rounds`` times: ``app.ml.predict`` on 1 row (many
calls, timed in batches of 20) and on 1 000 rows (15 calls). Each process reports its
fastest batch or call — the machine is shared, and the minimum is what the code costs, the
rest is other work — and the medians of the rounds are printed per checkout, with
branch / base ratios (below 1: the branch is faster).

    .venv/bin/python bench/predict_inputs.py [--base PATH] [--branch PATH] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r'''
import json, os, sys, time
import numpy as np, pandas as pd
from sklearn import datasets
from app.ml import load_model, predict, train

mode, folder = sys.argv[1], sys.argv[2]

iris = datasets.load_iris(as_frame=True).frame.rename(columns={"target": "species"})
iris.columns = [c.replace(" (cm)", "").replace(" ", "_") for c in iris.columns]
rng = np.random.default_rng(0)
n = 2000
mixed = pd.DataFrame({"x": rng.normal(size=n), "shop": rng.choice(["a", "b", "c", "d"], n),
                      "day": pd.Timestamp("2022-01-01") + pd.to_timedelta(
                          rng.integers(0, 365, n), unit="D")})
mixed["day"] = mixed["day"].dt.strftime("%Y-%m-%d")
mixed["y"] = np.where(mixed["x"] + (mixed["shop"] == "a") > 0.5, "hi", "lo")
out = {}
for name, frame, target in (("numeric", iris, "species"), ("mixed", mixed, "y")):
    path = os.path.join(folder, name + ".joblib")
    if mode == "train":
        with open(path, "wb") as out_file:
            out_file.write(train(frame, target, time_budget_s=5).artifact)
        continue
    with open(path, "rb") as in_file:
        model = load_model(in_file.read())
    rows = frame.drop(columns=[target]).astype(object).to_dict("records")
    one, many = rows[:1], (rows * 1000)[:1000]
    for _ in range(50):
        predict(model, one)
    batches, begun = [], time.perf_counter()
    while time.perf_counter() - begun < 2.0:
        started = time.perf_counter()
        for _ in range(20):
            predict(model, one)
        batches.append((time.perf_counter() - started) / 20)
    out[f"{name}_1row_us"] = min(batches) * 1e6
    times = []
    for _ in range(15):
        started = time.perf_counter()
        predict(model, many)
        times.append(time.perf_counter() - started)
    out[f"{name}_1000rows_ms"] = min(times) * 1e3
print(json.dumps(out))
'''


def measure(path: str, mode: str, folder: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-c", WORKER, mode, folder], env=env, cwd=path,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="/work/main")
    parser.add_argument("--branch", default=HERE)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[str, list[dict[str, float]]] = {"base": [], "branch": []}
    with tempfile.TemporaryDirectory() as folder:
        measure(args.base, "train", folder)
        for _ in range(args.rounds):
            for which in ("base", "branch"):
                results[which].append(measure(getattr(args, which), "time", folder))
                print(which, json.dumps(results[which][-1]), flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("| measure | base (median) | branch (median) | branch / base |")
    print("|---|---|---|---|")
    for key in results["base"][0]:
        base = statistics.median(r[key] for r in results["base"])
        branch = statistics.median(r[key] for r in results["branch"])
        print(f"| {key} | {base:.1f} | {branch:.1f} | {branch / base:.2f} |")


if __name__ == "__main__":
    main()
