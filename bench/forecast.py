"""Forecasting models (issue 24): Quarry's forecast against the seasonal naive forecast and
the best statsmodels model chosen in hindsight (statsforecast is not installed: its release
would replace pandas 3 with pandas 2 here; statsmodels' ETS, Theta and ARIMA with a wider
order grid stand for its AutoETS, AutoTheta and AutoARIMA), on public series shipped inside
installed packages (``statsmodels.datasets``, no network) and on 1 000 synthetic series.

For each public series, at 3 final origins (the last 3·h points, h apart), Quarry
(``app.ml.forecast.train``: the code the service runs, with its rolling-origin choice) is
trained on the points before the origin and forecasts the next h; so do the seasonal naive
forecast and, fitted on the same points, statsmodels' ETS (Holt-Winters, damped trend),
Theta and ARIMA (orders by AIC over p, q ≤ 2, d ≤ 1, with or without a seasonal (0,1,1)).
Reported per series: the mean MASE of each over the origins (scaled by the training points'
seasonal naive error), Quarry / seasonal naive and Quarry / the best of the others
in hindsight, and the coverage of Quarry's 90 % interval on the held-out points.

Then on 1 000 synthetic daily series × 200 points (weekly season, trend, noise): training
time and the MASE ratio; and the time of one forecast of one series (h = 12) from its
history, median of 50; then the same time for each method (median of 30).

With ``--statsforecast PYTHON`` (an interpreter whose environment has statsforecast, outside
the repository: its release wants pandas 2), ``bench/forecast_statsforecast.py`` runs in
that interpreter in a subprocess, on the same series and cut-offs passed as JSON in a
temporary directory: statsforecast's AutoETS, AutoARIMA, AutoTheta and SeasonalNaive are
fitted at the same 3 origins, and Quarry's MASE is divided by the best of the four chosen in
hindsight.

Then the interval's coverage over many held-out origins: Quarry is trained once on each
public series' first three quarters; from every origin in the last quarter (the history
up to it, the in-process predict of the service, no refit) it forecasts h steps, and the
bench counts how many true values lie in [lower, upper], per series and pooled, with the
number of points and origins. With ``--statsforecast`` the same for statsforecast's models,
fitted once on the same first three quarters and forecasting from the same origins
(``cross_validation(step_size=1, refit=False)``), with their 90 % intervals; and the MASE of
each over those origins.

    .venv/bin/python bench/forecast.py [--series 1000] [--budget SECONDS] \
        [--statsforecast /work/sf-venv/bin/python] [--public-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from app.ml import forecast, prediction  # noqa: E402

ORIGINS = 3
# The share of each public series held out for the coverage figures (every origin in it).
HOLDOUT = 0.25
SF_MODELS = ("AutoETS", "AutoARIMA", "AutoTheta", "SeasonalNaive")
LEVEL = 90


def public_series() -> list[tuple[str, pd.DataFrame, int, int]]:
    """(name, frame of t and y, horizon, season) of each public series."""
    import statsmodels.api as sm

    out = []
    co2 = sm.datasets.co2.load_pandas().data["co2"].resample("MS").mean().interpolate()
    out.append(("co2 monthly", pd.DataFrame({"t": co2.index, "y": co2.to_numpy()}), 12, 12))
    sun = sm.datasets.sunspots.load_pandas().data
    out.append(("sunspots yearly", pd.DataFrame({"t": sun.YEAR.astype(int),
                                                 "y": sun.SUNACTIVITY}), 10, 11))
    nino = sm.datasets.elnino.load_pandas().data.melt(id_vars="YEAR", var_name="m",
                                                      value_name="y")
    months = {m: i + 1 for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL",
                                              "AUG", "SEP", "OCT", "NOV", "DEC"])}
    nino["t"] = pd.to_datetime({"year": nino.YEAR.astype(int), "month": nino.m.map(months),
                                "day": 1})
    out.append(("elnino monthly", nino[["t", "y"]].sort_values("t"), 12, 12))
    nile = sm.datasets.nile.load_pandas().data
    out.append(("nile yearly", pd.DataFrame({"t": nile.year.astype(int), "y": nile.volume}),
                10, 1))
    macro = sm.datasets.macrodata.load_pandas().data
    stamps = pd.to_datetime({"year": macro.year.astype(int),
                             "month": (macro.quarter.astype(int) - 1) * 3 + 1, "day": 1})
    out.append(("realgdp quarterly", pd.DataFrame({"t": stamps, "y": macro.realgdp}), 8, 4))
    return out


def _scale(y: np.ndarray, m: int) -> float:
    lag = m if m > 1 and len(y) > m else 1
    return float(np.mean(np.abs(y[lag:] - y[:-lag])))


def _others(y: np.ndarray, h: int, m: int) -> dict[str, np.ndarray]:
    from statsmodels.tsa.forecasting.theta import ThetaModel
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    out = {"SeasonalNaive": np.array([y[-m:][i % m] for i in range(h)]) if m > 1
           else np.repeat(y[-1], h)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seasonal = "add" if m > 1 and len(y) >= 2 * m + 2 else None
        out["ETS"] = np.asarray(ExponentialSmoothing(
            y, trend="add", damped_trend=True, seasonal=seasonal,
            seasonal_periods=m if seasonal else None,
            initialization_method="estimated").fit().forecast(h))
        out["Theta"] = np.asarray(ThetaModel(y, period=m if m > 1 else None,
                                             deseasonalize=m > 1).fit().forecast(h))
        out["ARIMA"] = _auto_arima(y, h, m)
    return out


def _auto_arima(y: np.ndarray, h: int, m: int) -> np.ndarray:
    """statsmodels' ARIMA, the orders of a small grid (p, q ≤ 2, d ≤ 1, a seasonal (0,1,1)
    or none) chosen by AIC: a wider search than Quarry's candidate, as a hindsight bar."""
    from statsmodels.tsa.arima.model import ARIMA

    best = None
    specs = [((p, d, q), (0, 0, 0, 0)) for p in range(3) for d in (0, 1) for q in range(3)]
    if m > 1 and len(y) >= 3 * m + 2:
        specs += [(order, (0, 1, 1, m)) for order in ((0, 0, 1), (1, 0, 1), (0, 1, 1),
                                                     (1, 1, 1))]
    for order, season in specs:
        trend = "t" if order[1] + season[1] == 1 else ("c" if order[1] + season[1] == 0
                                                       else "n")
        try:
            fit = ARIMA(y[-300:], order=order, seasonal_order=season, trend=trend).fit()
        except (ValueError, np.linalg.LinAlgError):
            continue
        if best is None or fit.aic < best[0]:
            best = (fit.aic, fit)
    return np.asarray(best[1].forecast(h))


def _cuts(points: int, h: int) -> list[int]:
    """The final origins (points before each): the last ORIGINS·h points, h apart."""
    return [points - k * h for k in range(ORIGINS, 0, -1)]


def _rolling_from(points: int) -> int:
    """The first held-out origin of the coverage figures (the training points' count)."""
    return int(points * (1 - HOLDOUT))


def run_statsforecast(python: str, series: list[tuple[str, pd.DataFrame, int, int]]
                      ) -> dict:
    """statsforecast's forecasts at the bench's origins, from ``python`` running
    bench/forecast_statsforecast.py in a subprocess (JSON files in a temporary directory)."""
    spec = {"level": LEVEL, "series": [
        {"name": name, "y": frame.y.astype(float).tolist(), "h": h, "m": m,
         "cutoffs": _cuts(len(frame), h), "rolling_from": _rolling_from(len(frame))}
        for name, frame, h, m in series]}
    with tempfile.TemporaryDirectory() as folder:
        source, target = os.path.join(folder, "in.json"), os.path.join(folder, "out.json")
        with open(source, "w") as f:
            json.dump(spec, f)
        subprocess.run([python, os.path.join(ROOT, "bench", "forecast_statsforecast.py"),
                        source, target], check=True)
        with open(target) as f:
            out = json.load(f)
    print(json.dumps({"statsforecast": out["versions"], "statsforecast_s": out["seconds"]}),
          flush=True)
    return out


def _quarry(frame: pd.DataFrame, h: int, budget: float) -> tuple[object, str, float]:
    """(loaded model, chosen method, training seconds) of Quarry trained on ``frame``."""
    started = time.perf_counter()
    artifact, _, description = forecast.train(
        frame, "y", {"order": "t", "group": [], "window": None, "horizon": h},
        time_budget_s=budget)
    seconds = time.perf_counter() - started
    return prediction.load_model(artifact), description["info"]["model"], seconds


def _answer(model: object, history: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """(forecast, lower, upper) of Quarry's model from ``history``."""
    answer = prediction.predict(model, history.to_dict("records"))
    return tuple(np.array([r[k] for r in answer]) for k in ("y", "y_lower", "y_upper"))


def bench_public(series: list[tuple[str, pd.DataFrame, int, int]], budget: float,
                 sf: dict | None) -> list[dict]:
    rows = []
    for number, (name, frame, h, m) in enumerate(series):
        frame = frame.reset_index(drop=True)
        scores: dict[str, list[float]] = {}
        hits, chosen, seconds = [], [], []
        for k, cut in enumerate(_cuts(len(frame), h)):
            train, test = frame.iloc[:cut], frame.iloc[cut:cut + h]
            y, truth = train.y.to_numpy(float), test.y.to_numpy(float)
            scale = _scale(y, m)
            model, method, took = _quarry(train, h, budget)
            seconds.append(took)
            chosen.append(method)
            ours, low, high = _answer(model, train)
            hits.append(float(np.mean((truth >= low) & (truth <= high))))
            forecasts = {"Quarry": ours, **_others(y, h, m)}
            if sf is not None:
                forecasts.update({f"sf {other}": np.asarray(values[k]) for other, values in
                                  sf["series"][number]["cutoffs"].items()})
            for other, values in forecasts.items():
                scores.setdefault(other, []).append(float(np.mean(np.abs(truth - values)))
                                                    / scale)
        mean = {k: float(np.mean(v)) for k, v in scores.items()}
        best_other = min((k for k in mean if k != "Quarry" and not k.startswith("sf ")),
                         key=mean.get)
        row = {"series": name, "points": len(frame), "h": h,
               "mase": {k: round(v, 3) for k, v in mean.items()},
               "vs_seasonal_naive": round(mean["Quarry"] / mean["SeasonalNaive"], 3),
               "vs_hindsight_best": round(mean["Quarry"] / mean[best_other], 3),
               "hindsight_best": best_other, "coverage_90": round(np.mean(hits), 3),
               "chosen": chosen, "train_s": round(float(np.mean(seconds)), 2)}
        if sf is not None:
            best_sf = min((f"sf {k}" for k in SF_MODELS), key=mean.get)
            row.update({"vs_sf_best": round(mean["Quarry"] / mean[best_sf], 3),
                        "sf_best": best_sf})
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_coverage(series: list[tuple[str, pd.DataFrame, int, int]], budget: float,
                   sf: dict | None) -> dict:
    """Coverage of the 90 % interval (and MASE) over every origin of each series' held-out
    last quarter, Quarry trained once on the points before it; statsforecast's models, fitted
    once on the same points, from the same origins."""
    rows, pooled = [], {}
    for number, (name, frame, h, m) in enumerate(series):
        frame = frame.reset_index(drop=True)
        first = _rolling_from(len(frame))
        origins = list(range(first, len(frame) - h + 1))
        model, method, _ = _quarry(frame.iloc[:first], h, budget)
        y_all = frame.y.to_numpy(float)
        answers: dict[str, list[tuple[np.ndarray, ...]]] = {
            "Quarry": [_answer(model, frame.iloc[:o]) for o in origins]}
        if sf is not None:
            rolling = sf["series"][number]["rolling"]
            assert rolling["origins"] == origins, (name, rolling["origins"][:3], origins[:3])
            for other in SF_MODELS:
                answers[f"sf {other}"] = [tuple(np.asarray(rolling[other][part][i])
                                                for part in ("mean", "lo", "hi"))
                                          for i in range(len(origins))]
        row = {"series": name, "trained_on": first, "origins": len(origins),
               "points": len(origins) * h, "chosen": method, "coverage_90": {},
               "coverage_90_halves": {}, "mase": {}}
        for who, forecasts in answers.items():
            inside, mase = [], []
            for o, (mean, low, high) in zip(origins, forecasts, strict=True):
                truth = y_all[o:o + h]
                inside.append(int(np.sum((truth >= low) & (truth <= high))))
                mase.append(float(np.mean(np.abs(truth - mean))) / _scale(y_all[:o], m))
            # The origins nearer the end of training and the later ones (staleness).
            half = len(origins) // 2
            row["coverage_90_halves"][who] = [
                round(sum(part) / (len(part) * h), 3) for part in (inside[:half], inside[half:])]
            inside = sum(inside)
            row["coverage_90"][who] = round(inside / row["points"], 3)
            row["mase"][who] = round(float(np.mean(mase)), 3)
            hit, total = pooled.get(who, (0, 0))
            pooled[who] = (hit + inside, total + row["points"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {"pooled_coverage_90": {k: round(a / b, 3) for k, (a, b) in pooled.items()},
               "pooled_points": pooled["Quarry"][1]}
    print(json.dumps(summary), flush=True)
    return {"rows": rows, **summary}


def synthetic(series: int, points: int, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    days = pd.date_range("2023-01-01", periods=points, freq="D")
    frames = []
    for i in range(series):
        level, trend = rng.uniform(20, 500), rng.normal(0, 0.2)
        season = rng.uniform(0, 0.3) * level * np.sin(2 * np.pi * (np.arange(points)
                                                                   + rng.integers(7)) / 7)
        y = level + trend * np.arange(points) + season + rng.normal(0, 0.05 * level, points)
        frames.append(pd.DataFrame({"g": f"s{i}", "t": days, "y": y}))
    return pd.concat(frames, ignore_index=True)


def bench_synthetic(count: int, budget: float | None) -> dict:
    frame = synthetic(count, 200)
    started = time.perf_counter()
    artifact, skill, description = forecast.train(
        frame, "y", {"order": "t", "group": ["g"], "window": 28, "horizon": 12},
        time_budget_s=budget)
    train_s = time.perf_counter() - started
    model = prediction.load_model(artifact)
    forecast_ms = _median_ms(model, frame[frame.g == "s3"].to_dict("records"), 50)
    info = description["info"]
    result = {"series": count, "points": 200, "train_s": round(train_s, 1),
              "chosen": info["model"], "mase": info["accuracies"]["mase"],
              "seasonal_naive_mase": info["accuracies"]["seasonal_naive"]["mase"],
              "skill": skill, "coverage_90_cv": info["accuracies"]["interval_coverage"],
              "forecast_ms_median": forecast_ms,
              "candidates": [(r["name"], r["performance"], r["stopped"])
                             for r in description["model"]]}
    print(json.dumps(result), flush=True)
    return result


def bench_predict_per_method(frame: pd.DataFrame) -> dict[str, float]:
    """The time of one forecast (h = 12) of one series from its history, for each method:
    the model trained on one synthetic series, then its method swapped for each of the
    others with their parameters fitted on the same points (what training keeps)."""
    import dataclasses

    one = frame[frame.g == "s3"].reset_index(drop=True)
    artifact, _, _ = forecast.train(one, "y", {"order": "t", "group": ["g"], "window": 28,
                                               "horizon": 12}, time_budget_s=30)
    model = prediction.load_model(artifact)
    history = one.to_dict("records")
    key = next(iter(model.history))
    tail = model.history[key][1]
    out = {}
    fitted = {name: method.fit(tail, model.period)
              for name, method in forecast.PER_SERIES.items()}
    every = f"{forecast.COMBINATION} ({', '.join(fitted)})"
    for name in [*fitted, every]:
        parts = forecast.method_parts(name)
        swapped = dataclasses.replace(
            model, method=name, params={key: {p: fitted[p] for p in parts}},
            common={p: forecast.PER_SERIES[p].common([fitted[p]]) for p in parts})
        out[name] = _median_ms(swapped, history)
    if model.boosting is not None:
        out[forecast.BOOSTING] = _median_ms(model, history)
    return out


def _median_ms(model: object, history: list[dict], runs: int = 30) -> float:
    prediction.predict(model, history)  # first call: imports
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        prediction.predict(model, history)
        times.append(time.perf_counter() - started)
    return round(1000 * float(np.median(times)), 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=None)
    parser.add_argument("--statsforecast", metavar="PYTHON",
                        help="an interpreter with statsforecast installed (kept apart)")
    parser.add_argument("--public-only", action="store_true",
                        help="the public series only (no synthetic series, no timings)")
    args = parser.parse_args()
    series = public_series()
    sf = run_statsforecast(args.statsforecast, series) if args.statsforecast else None
    rows = bench_public(series, args.budget or 20.0, sf)
    cover = bench_coverage(series, args.budget or 20.0, sf)
    if not args.public_only:
        synth = bench_synthetic(args.series, args.budget)
        per_method = bench_predict_per_method(synthetic(4, 200))
        print(json.dumps({"forecast_ms_median_per_method": per_method}), flush=True)
    print()
    extra = [f"sf {k}" for k in SF_MODELS] if sf else []
    print(f"{'series':<20} {'Quarry':>7} {'SNaive':>7} {'ETS':>7} {'Theta':>7} {'ARIMA':>7} "
          + "".join(f"{k.replace('sf ', 'sf:'):>10}" for k in extra)
          + f" {'/SNaive':>8} {'/best':>6}{' /sfbest' if sf else ''} {'cover':>6}  chosen")
    for r in rows:
        m = r["mase"]
        print(f"{r['series']:<20} {m['Quarry']:>7} {m['SeasonalNaive']:>7} {m['ETS']:>7} "
              f"{m['Theta']:>7} {m['ARIMA']:>7} " + "".join(f"{m[k]:>10}" for k in extra)
              + f" {r['vs_seasonal_naive']:>8} {r['vs_hindsight_best']:>6}"
              + (f" {r['vs_sf_best']:>7}" if sf else "")
              + f" {r['coverage_90']:>6}  {', '.join(r['chosen'])}")
    who = ["Quarry", *extra]
    print(f"\nheld-out origins (trained once on the first {1 - HOLDOUT:.0%}), coverage of "
          "the 90 % interval | MASE:")
    print(f"{'series':<20} {'origins':>7} {'points':>6} "
          + "".join(f"{k.replace('sf ', 'sf:'):>16}" for k in who) + "  chosen")
    for r in cover["rows"]:
        print(f"{r['series']:<20} {r['origins']:>7} {r['points']:>6} "
              + "".join(f"{r['coverage_90'][k]:>8} {r['mase'][k]:>7}" for k in who)
              + f"  {r['chosen']}")
    print(f"{'pooled':<20} {'':>7} {cover['pooled_points']:>6} "
          + "".join(f"{cover['pooled_coverage_90'][k]:>8} {'':>7}" for k in who))
    print("coverage over the first | second half of the held-out origins:")
    for r in cover["rows"]:
        print(f"{r['series']:<20} " + "".join(
            f"{k.replace('sf ', 'sf:')} {a} | {b}   "
            for k, (a, b) in r["coverage_90_halves"].items()))
    if not args.public_only:
        print(f"\n{synth['series']} series x 200: training {synth['train_s']} s, chose "
              f"{synth['chosen']}, CV MASE {synth['mase']} vs seasonal naive "
              f"{synth['seasonal_naive_mase']}; one forecast (h=12) "
              f"{synth['forecast_ms_median']} ms median")
        print("one forecast (h=12) per method, ms median: "
              + ", ".join(f"{k} {v}" for k, v in per_method.items()))
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
