"""statsforecast's side of ``bench/forecast.py --statsforecast PYTHON``: run by that
interpreter (a virtualenv of its own, outside the repository: statsforecast's release wants
pandas 2, Quarry's environment has pandas 3), in a subprocess, on the series and origins the
bench writes to a JSON file.

    PYTHON bench/forecast_statsforecast.py IN.json OUT.json

IN: {"level": 90, "series": [{"name", "y": [...], "h", "m", "cutoffs": [...],
"rolling_from": int}]}. For each series, AutoETS, AutoARIMA, AutoTheta and SeasonalNaive
(season length ``m``):

- ``cutoffs``: fitted on ``y[:cut]`` and forecasting ``h`` steps, for each cut-off;
- ``rolling``: fitted once on ``y[:rolling_from]``, then forecasting ``h`` steps from every
  origin from ``rolling_from`` to ``len(y) - h`` with those parameters (statsforecast's
  ``cross_validation(step_size=1, refit=False)``), with the ``level`` % interval.

OUT: {"versions": {...}, "seconds": s, "series": [{"cutoffs": {model: [[h values] per
cut-off]}, "rolling": {"origins": [...], model: {"mean", "lo", "hi": [[h values] per
origin]}}}]}.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd
import statsforecast
from statsforecast import StatsForecast
from statsforecast.models import AutoARIMA, AutoETS, AutoTheta, SeasonalNaive

MODELS = ("AutoETS", "AutoARIMA", "AutoTheta", "SeasonalNaive")


def _forecaster(m: int) -> StatsForecast:
    return StatsForecast(models=[AutoETS(season_length=m), AutoARIMA(season_length=m),
                                 AutoTheta(season_length=m), SeasonalNaive(season_length=m)],
                         freq=1, n_jobs=1)


def _frame(y: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"unique_id": "s", "ds": np.arange(len(y)), "y": np.asarray(y, float)})


def run(spec: dict, level: int) -> dict:
    y, h, m = spec["y"], spec["h"], spec["m"]
    cutoffs: dict[str, list[list[float]]] = {name: [] for name in MODELS}
    for cut in spec["cutoffs"]:
        answer = _forecaster(m).forecast(df=_frame(y[:cut]), h=h)
        for name in MODELS:
            cutoffs[name].append(answer[name].tolist())
    start = spec["rolling_from"]
    windows = len(y) - h - start + 1
    cv = _forecaster(m).cross_validation(df=_frame(y), h=h, n_windows=windows, step_size=1,
                                         refit=False, level=[level])
    origins = sorted(int(c) + 1 for c in cv["cutoff"].unique())
    if origins[0] != start or len(origins) != windows:
        raise SystemExit(f"{spec['name']}: statsforecast's origins {origins[0]}… "
                         f"({len(origins)}) are not the bench's {start}… ({windows})")
    rolling: dict = {"origins": origins}
    groups = [g.sort_values("ds") for _, g in cv.sort_values("cutoff").groupby("cutoff")]
    for name in MODELS:
        rolling[name] = {part: [g[column].tolist() for g in groups] for part, column in
                         (("mean", name), ("lo", f"{name}-lo-{level}"),
                          ("hi", f"{name}-hi-{level}"))}
    return {"cutoffs": cutoffs, "rolling": rolling}


def main() -> None:
    source, target = sys.argv[1:3]
    with open(source) as f:
        spec = json.load(f)
    started = time.perf_counter()
    out = [run(s, spec["level"]) for s in spec["series"]]
    result = {"versions": {"statsforecast": statsforecast.__version__,
                           "pandas": pd.__version__, "numpy": np.__version__},
              "seconds": round(time.perf_counter() - started, 1), "series": out}
    with open(target, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
