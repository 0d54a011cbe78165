"""Forecasting models: ORDER BY a time column, GROUP BY series keys, WINDOW and HORIZON.

Training reads every series onto a regular grid (the step is inferred; missing steps are
filled by linear interpolation), then compares candidates by rolling-origin evaluation:
at several cut-offs near the end of each series, each candidate sees the series up to the
cut-off and forecasts the next ``horizon`` steps, which are scored by MASE (the error over
the in-sample error of the seasonal naive forecast) and sMAPE. The candidate with the lowest
mean MASE is kept; its scaled errors at the cut-offs give the forecast interval.

Candidates, cheapest first (a candidate that the time budget leaves no room for is skipped
and named as skipped in describe):

- ``Naive`` and ``SeasonalNaive``: the forecasts a person would make by hand;
- ``Lag features --> HistGradientBoosting``: one scikit-learn model across all series, on
  lags of the series (scaled by each series' level) and calendar features, forecasting one
  step at a time;
- ``ETS``: statsmodels' Holt-Winters exponential smoothing (damped additive trend, additive
  season when there is one), fitted per series.

A forecasting artifact is joblib bytes of a dict with ``"kind": "forecast"``; ``load_model``
of ``prediction.py`` hands such a bundle to ``load``, and ``predict`` to ``forecast``.
"""

from __future__ import annotations

import io
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import joblib
import numpy as np
import pandas as pd
from scipy.stats import t as student

from .columns import shown
from .errors import PredictionError, TrainingError
from .names import find_column
from .threads import one_native_thread

KIND = "forecast"
# The nominal coverage of the forecast interval.
INTERVAL_LEVEL = 0.9
# Rolling-origin cut-offs (fewer when the series are short; up to MAX_CUTOFFS when there
# are few series, so that the interval rests on more errors).
CUTOFFS, MAX_CUTOFFS = 3, 8
# Errors per step of the horizon from which the interval is their quantiles.
EMPIRICAL_MIN = 40
# Points of each series kept in the artifact: a forecast for a group named without history
# starts from them (and ETS refits on them).
KEEP_POINTS = 400
# Default time budget: BASE_BUDGET_S, plus one second per PER_SECOND_ROWS rows, up to MAX.
BASE_BUDGET_S, PER_SECOND_ROWS, MAX_BUDGET_S = 10.0, 20_000, 60.0
# Seasonal periods tried for a series (besides the calendar's), by autocorrelation.
PERIODS = (4, 7, 12, 24, 52)
MIN_POINTS = 8
NAIVE, SEASONAL_NAIVE, BOOSTING, ETS = ("Naive", "SeasonalNaive",
                                        "Lag features --> HistGradientBoosting", "ETS")


# --- the time axis ---------------------------------------------------------------------

@dataclass
class Axis:
    """How the order column steps: ``kind`` integer, date or timestamp; ``step`` an int
    (integer steps) or a pandas offset alias / Timedelta string."""

    kind: str
    step: Any
    label: str

    def offset(self) -> Any:
        return pd.tseries.frequencies.to_offset(self.step) if self.kind != "integer" else None

    def after(self, last: Any, count: int) -> list[Any]:
        """The ``count`` order values after ``last``."""
        if self.kind == "integer":
            return [int(last) + self.step * (i + 1) for i in range(count)]
        stamps = pd.date_range(pd.Timestamp(last), periods=count + 1, freq=self.offset())[1:]
        if self.kind == "date":
            return [s.date() for s in stamps]
        return [s.to_pydatetime() for s in stamps]

    def positions(self, values: pd.Series, origin: Any) -> np.ndarray:
        """Grid positions of ``values`` from ``origin`` (-1 where a value is off the grid)."""
        if self.kind == "integer":
            delta = values.astype("int64").to_numpy() - int(origin)
            out = delta // self.step
            out[delta % self.step != 0] = -1
            return out
        grid = pd.date_range(pd.Timestamp(origin), pd.Timestamp(values.max()),
                             freq=self.offset())
        return grid.get_indexer(pd.DatetimeIndex(values))


def _order_values(column: pd.Series, name: str, error: type[Exception] = TrainingError
                  ) -> tuple[pd.Series, str]:
    """The order column as int64 or datetime64, and its kind (integer, date, timestamp)."""
    present = column.dropna()
    if present.empty:
        raise error(f"The ORDER BY column '{name}' has no values")
    if pd.api.types.is_bool_dtype(present) or \
            any(isinstance(v, bool | dict | list) for v in present.head(1000)):
        raise error(f"The ORDER BY column '{name}' holds {present.iloc[0]!r}: an order "
                    "column is integer steps, dates or timestamps")
    if pd.api.types.is_numeric_dtype(present) or \
            all(isinstance(v, int | np.integer) for v in present.head(1000)):
        present = pd.to_numeric(present)
        if not np.all(np.mod(present.astype("float64"), 1) == 0):
            raise error(f"The ORDER BY column '{name}' holds fractions: an order "
                        "column is integer steps, dates or timestamps")
        return pd.to_numeric(column).astype("Int64"), "integer"
    # datetime.date values (a DATE column) answer dates; anything else timestamps.
    kind = "date" if all(type(v).__name__ == "date" for v in present.head(50)) else "timestamp"
    try:
        stamps = pd.to_datetime(column, errors="raise", utc=False, format="mixed")
    except (ValueError, TypeError, OverflowError):
        raise error(f"The ORDER BY column '{name}' holds values that are neither "
                    "integer steps, dates nor timestamps") from None
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    return stamps.astype("datetime64[ns]"), kind


def infer_axis(series: list[pd.Series], kind: str) -> Axis:
    """The step of the series' order values: the smallest gap between two of them."""
    gaps = [s.diff().dropna() for s in series if len(s) > 1]
    gaps = [g for g in gaps if len(g)]
    if not gaps:
        raise TrainingError("Each series has one point: a forecast needs a history")
    if kind == "integer":
        step = int(np.gcd.reduce(np.concatenate([g.to_numpy().astype("int64") for g in gaps])))
        return Axis("integer", step, f"integer steps of {step}")
    smallest = min(g.min() for g in gaps)
    days = smallest / pd.Timedelta(days=1)
    starts = pd.concat(series)
    if 28 <= days <= 31:
        alias, label = ("MS", "monthly (month start)") if (starts.dt.day == 1).all() else \
            ("ME", "monthly (month end)")
    elif 89 <= days <= 92:
        alias, label = ("QS", "quarterly") if (starts.dt.day == 1).all() else ("QE", "quarterly")
    elif 365 <= days <= 366:
        alias, label = ("YS", "yearly") if (starts.dt.dayofyear == 1).all() else \
            ("YE", "yearly")
    else:
        alias = pd.tseries.frequencies.to_offset(smallest).freqstr
        names = {"24h": "daily", "h": "hourly", "168h": "weekly", "min": "every minute"}
        label = names.get(alias, f"every {smallest}")
    return Axis(kind, alias, label)


def _calendar_period(axis: Axis) -> int | None:
    if axis.kind == "integer":
        return None
    return {"24h": 7, "h": 24, "168h": 52, "MS": 12, "ME": 12, "QS": 4, "QE": 4,
            "min": 60}.get(axis.step)


def _period(values: list[np.ndarray], axis: Axis, horizon: int) -> int:
    """The seasonal period: the calendar's or one of PERIODS whose autocorrelation, averaged
    over the series long enough to show it, is clearly positive; 1 when none is."""
    tried = sorted({p for p in (_calendar_period(axis), *PERIODS) if p})
    best, best_score = 1, 0.3
    for period in tried:
        scores = []
        for y in values[:200]:
            if len(y) < 2 * period + horizon:
                continue
            # Detrended by a centred moving average over one period (edges left out: a
            # zero-padded average there would dominate the correlation).
            trend = np.convolve(y, np.ones(period) / period, mode="valid")
            d = y[period // 2:period // 2 + len(trend)] - trend
            a, b = d[period:], d[:-period]
            if a.std() > 0 and b.std() > 0:
                scores.append(float(np.corrcoef(a, b)[0, 1]))
        if scores and np.mean(scores) > best_score:
            best, best_score = period, float(np.mean(scores))
    return best


# --- the series ------------------------------------------------------------------------

@dataclass
class Series:
    key: tuple
    start: Any            # order value of y[0]
    y: np.ndarray         # values on the regular grid, gaps filled
    filled: int = 0       # how many points were gaps


def _column(frame: pd.DataFrame, name: str, role: str) -> str:
    found = find_column(frame.columns, name)
    if found is None:
        raise TrainingError(f"Column '{name}' ({role}) is not among the training columns: "
                            f"{', '.join(map(str, frame.columns))}")
    return found


def split_series(frame: pd.DataFrame, target: str, order: str, groups: list[str],
                 axis: Axis | None, *, where: str, error: type[Exception]
                 ) -> tuple[list[Series], Axis, str]:
    """The frame's rows as regular series, one per group; duplicates in a group are an error
    (``where`` says whose rows: the training data or the history)."""
    times, kind = _order_values(frame[order], order, error)
    if axis is not None and (kind == "integer") != (axis.kind == "integer"):
        raise error(f"The ORDER BY column '{order}' holds "
                    f"{'integer steps' if kind == 'integer' else 'times'} in {where}; the "
                    f"model's series step {axis.label}")
    values = pd.to_numeric(frame[target], errors="coerce")
    unread = values.isna() & frame[target].notna()
    if unread.any():
        raise error(f"The PREDICT column '{target}' holds "
                    f"{shown(frame[target][unread].iloc[0])} in {where}: a forecast reads "
                    "numbers")
    for name in groups:
        odd = frame[name].map(lambda v: isinstance(v, dict | list))
        if odd.any():
            raise error(f"The GROUP BY column '{name}' holds {shown(frame[name][odd].iloc[0])}"
                        f" in {where}: a group is a text, number or date value")
    keys = pd.Series("", index=frame.index)
    for number, name in enumerate(groups):
        keys = keys + ("\x1f" if number else "") + frame[name].astype(str)
    data = pd.DataFrame({"t": times, "y": values, "k": keys}).dropna(subset=["t"])
    dup = data.duplicated(subset=["k", "t"], keep=False)
    if dup.any():
        row = data[dup].iloc[0]
        label = f" in group {_key_text(groups, row['k'])}" if groups else ""
        raise error(f"The ORDER BY column '{order}' has the value {_plain(row['t'])} twice"
                    f"{label} in {where}: a series needs one row per time")
    ordered = [g.sort_values("t") for _, g in data.groupby("k", sort=True)]
    if axis is None:
        axis = infer_axis([g["t"] for g in ordered], kind)
    out = []
    for g in ordered:
        pos = axis.positions(g["t"], g["t"].iloc[0])
        if (pos < 0).any():
            bad = g["t"][pos < 0].iloc[0]
            raise error(f"The ORDER BY value {_plain(bad)} is off the series' regular steps "
                        f"({axis.label}) in {where}")
        y = np.full(int(pos.max()) + 1, np.nan)
        y[pos] = g["y"].to_numpy(dtype="float64")
        filled = int(np.isnan(y).sum())
        if filled:
            known = ~np.isnan(y)
            if known.sum() == 0:
                continue
            y = np.interp(np.arange(len(y)), np.flatnonzero(known), y[known])
        key = tuple(g["k"].iloc[0].split("\x1f")) if groups else ()
        out.append(Series(key, _plain(g["t"].iloc[0]) if axis.kind != "integer"
                          else int(g["t"].iloc[0]), y, filled))
    return out, axis, kind


def _key_text(groups: list[str], key: Any) -> str:
    parts = key if isinstance(key, tuple) else tuple(str(key).split("\x1f"))
    return ", ".join(f"{g} = {v!r}" for g, v in zip(groups, parts, strict=False))


def _plain(value: Any) -> Any:
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if isinstance(value, np.generic):
        return value.item()
    return value


# --- the candidates --------------------------------------------------------------------

def _naive(y: np.ndarray, h: int, m: int) -> np.ndarray:
    return np.repeat(y[-1], h)


def _seasonal_naive(y: np.ndarray, h: int, m: int) -> np.ndarray:
    if m <= 1 or len(y) < m:
        return _naive(y, h, m)
    season = y[-m:]
    return np.array([season[i % m] for i in range(h)])


def _ets(y: np.ndarray, h: int, m: int) -> np.ndarray:
    from statsmodels.tools.sm_exceptions import ConvergenceWarning
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    seasonal = "add" if m > 1 and len(y) >= 2 * m + 2 else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            fit = ExponentialSmoothing(y, trend="add", damped_trend=True, seasonal=seasonal,
                                       seasonal_periods=m if seasonal else None,
                                       initialization_method="estimated").fit()
            out = np.asarray(fit.forecast(h), dtype="float64")
        except (ValueError, np.linalg.LinAlgError):
            return _seasonal_naive(y, h, m)
    return out if np.all(np.isfinite(out)) else _seasonal_naive(y, h, m)


@dataclass
class Boosting:
    """One HistGradientBoosting regressor over all series: lags 1..``lags`` of the series
    divided by its level, the seasonal position, forecasting the next value so divided."""

    lags: int
    m: int
    estimator: Any = None

    def rows(self, y: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        # Every value is taken relative to the latest lag and divided by the series' level:
        # trees cannot answer values beyond those they saw, and a trending series' next
        # value is beyond them, its change from the last value is not.
        scale = _level(y)
        z = y / scale
        idx = np.arange(self.lags, len(z))
        last = z[idx - 1]
        lagged = np.stack([z[idx - k] - last for k in range(2, self.lags + 1)]
                          + [last * 0], axis=1)
        season = ((start + idx) % self.m)[:, None] if self.m > 1 else np.zeros((len(idx), 1))
        return np.hstack([lagged, season]), z[idx] - last

    def fit(self, series: list[tuple[np.ndarray, int]], seconds: float) -> Boosting:
        from sklearn.ensemble import HistGradientBoostingRegressor

        parts = [self.rows(y, s) for y, s in series if len(y) > self.lags + 1]
        if not parts:
            raise TrainingError("The series are too short for lag features")
        X = np.vstack([p[0] for p in parts])  # noqa: N806
        target = np.concatenate([p[1] for p in parts])
        iterations = 100 if seconds > 5 else 40
        self.estimator = HistGradientBoostingRegressor(
            # The seasonal position is an ordinal column, not a declared categorical one:
            # trees split it as well here, and a categorical column sends every predict
            # through a ColumnTransformer (2 of a forecast step's 3 ms).
            max_iter=iterations, learning_rate=0.1, random_state=0).fit(X, target)
        return self

    def importances(self, series: list[tuple[np.ndarray, int]], unseen: int, order: str,
                    target: str) -> dict[str, float]:
        """Permutation importance of the two inputs, on each series' last ``unseen`` rows."""
        parts = [self.rows(y, start) for y, start in series]
        X = np.vstack([p[0][-unseen:] for p in parts])[:20_000]  # noqa: N806
        truth = np.concatenate([p[1][-unseen:] for p in parts])[:20_000]
        base = float(np.mean((self.estimator.predict(X) - truth) ** 2))
        rng = np.random.default_rng(0)
        grown = {}
        for name, columns in ((order, [self.lags]), (target, list(range(self.lags)))):
            shuffled = X.copy()
            shuffled[:, columns] = X[rng.permutation(len(X))][:, columns]
            error = float(np.mean((self.estimator.predict(shuffled) - truth) ** 2))
            grown[name] = max(error - base, 0.0)
        total = sum(grown.values())
        return {k: _round(v / total) if total > 0 else 0.0 for k, v in grown.items()}

    def forecast(self, y: np.ndarray, start: int, h: int) -> np.ndarray:
        return self.forecast_many([y], [start], h)[0]

    def forecast_many(self, ys: list[np.ndarray], starts: list[int], h: int) -> list[np.ndarray]:
        """Each series' forecast, one batch per step (a predict call per step, not per
        series and step)."""
        scales = np.array([_level(y) for y in ys])
        windows = np.stack([y[-self.lags:] for y in ys]) / scales[:, None]
        out = np.zeros((len(ys), h))
        ends = np.array([s + len(y) for y, s in zip(ys, starts, strict=True)])
        for step in range(h):
            season = ((ends + step) % self.m) if self.m > 1 else np.zeros(len(ys))
            last = windows[:, -1:]
            X = np.hstack([(windows - last)[:, ::-1][:, 1:], last * 0,  # noqa: N806
                           season[:, None]])
            value = self.estimator.predict(X) + last[:, 0]
            out[:, step] = value
            windows = np.hstack([windows[:, 1:], value[:, None]])
        return list(out * scales[:, None])


def _level(y: np.ndarray) -> float:
    level = float(np.mean(np.abs(y[-50:])))
    return level if level > 1e-9 else 1.0


# --- evaluation ------------------------------------------------------------------------

def _mase_scale(y: np.ndarray, m: int) -> float:
    lag = m if m > 1 and len(y) > m else 1
    scale = float(np.mean(np.abs(y[lag:] - y[:-lag]))) if len(y) > lag else 0.0
    return scale if scale > 1e-9 else _level(y)


def _smape(actual: np.ndarray, forecast: np.ndarray) -> float:
    denominator = np.abs(actual) + np.abs(forecast)
    ratio = np.where(denominator > 0, 2 * np.abs(actual - forecast) / np.where(
        denominator > 0, denominator, 1), 0.0)
    return float(np.mean(ratio))


@dataclass
class Score:
    method: str
    mase: list[float] = field(default_factory=list)    # mean per cut-off
    smape: list[float] = field(default_factory=list)
    # Per cut-off: errors scaled by each series' MASE scale, shape (series, h).
    scaled: list[np.ndarray] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str | None = None

    def summary(self) -> dict[str, Any]:
        if self.skipped:
            return {"method": self.method, "skipped": self.skipped}
        return {"method": self.method, "mase": _round(np.mean(self.mase)),
                "mase_std": _round(np.std(self.mase)), "smape": _round(np.mean(self.smape)),
                "smape_std": _round(np.std(self.smape)), "seconds": round(self.seconds, 3)}


def _round(value: float) -> float:
    return round(float(value), 4)


def _cutoffs(series: list[Series], h: int) -> list[int]:
    """How many points before the end each cut-off leaves out (h, 2h, …), as many as the
    shortest series allows while keeping MIN_POINTS before the first."""
    shortest = min(len(s.y) for s in series)
    wanted = max(CUTOFFS, min(MAX_CUTOFFS, math.ceil(EMPIRICAL_MIN / len(series))))
    # The deeper cut-offs keep at least half the series before them (the first one at
    # least MIN_POINTS, which training checked), so that each candidate has a history.
    return [h * i for i in range(1, wanted + 1)
            if shortest - h * i >= (MIN_POINTS if i == 1 else max(MIN_POINTS, shortest // 2))]


def _evaluate(method: str, forecaster: Any, series: list[Series], axis: Axis, h: int, m: int,
              backs: list[int], deadline: float) -> Score:
    score = Score(method)
    started = time.perf_counter()
    for back in backs:
        heads = [s.y[:-back] for s in series]
        actual = np.stack([s.y[len(s.y) - back:len(s.y) - back + h] for s in series])
        if time.perf_counter() > deadline:
            score.skipped = "the time budget ran out"
            return score
        predicted = np.stack(forecaster(heads, [_offset(axis, s) for s in series]))
        scales = np.array([_mase_scale(y, m) for y in heads])
        errors = (actual - predicted) / scales[:, None]
        score.scaled.append(errors)
        score.mase.append(float(np.mean(np.abs(errors))))
        score.smape.append(float(np.mean([_smape(a, f) for a, f in
                                          zip(actual, predicted, strict=True)])))
    score.seconds = time.perf_counter() - started
    return score


def _offset(axis: Axis, series: Series) -> int:
    """The series' first point as a count of steps since a fixed epoch, so that the
    seasonal position (count % period) means the same calendar place in every series."""
    return _steps_since_epoch(axis, series.start)


_EPOCH = pd.Timestamp("1970-01-05")  # a Monday: weekly and daily cycles start on one


def _steps_since_epoch(axis: Axis, value: Any) -> int:
    if axis.kind == "integer":
        return int(value) // axis.step
    ts = pd.Timestamp(value)
    months = ts.year * 12 + ts.month - 1
    if axis.step in ("MS", "ME"):
        return months
    if axis.step in ("QS", "QE"):
        return months // 3
    if axis.step in ("YS", "YE"):
        return ts.year
    return int((ts - _EPOCH) // pd.Timedelta(axis.offset()))


def _interval(scaled: list[np.ndarray], level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per step of the horizon, where the scaled errors fall around the forecast: their
    quantiles when there are enough of them (EMPIRICAL_MIN per step); else, as the
    quantiles of so few errors would be their extremes (and cover too little), the
    prediction interval of a normal sample, mean ± t · sd · sqrt(1 + 1/n)."""
    errors = np.concatenate(scaled, axis=0)
    tail = (1 - level) / 2
    if len(errors) >= EMPIRICAL_MIN:
        return np.quantile(errors, tail, axis=0), np.quantile(errors, 1 - tail, axis=0)
    n = len(errors)
    spread = student.ppf(1 - tail, max(n - 1, 1)) * errors.std(axis=0, ddof=1) \
        * np.sqrt(1 + 1 / n) if n > 1 else np.abs(errors[0]) * 2
    centre = errors.mean(axis=0)
    return centre - spread, centre + spread


def _coverage(scaled: list[np.ndarray], level: float) -> float | None:
    """The interval's coverage measured honestly: for each cut-off, the interval made from
    the other cut-offs' errors, checked on this one's."""
    if len(scaled) < 2:
        return None
    hits = []
    for i, errors in enumerate(scaled):
        low, high = _interval([e for j, e in enumerate(scaled) if j != i], level)
        hits.append(np.mean((errors >= low) & (errors <= high)))
    return _round(np.mean(hits))


# --- training ----------------------------------------------------------------------------

@dataclass
class Forecaster:
    """A trained forecasting model (what the artifact holds, unpacked)."""

    target: str
    order: str
    groups: list[str]
    window: int | None
    horizon: int
    axis: Axis
    period: int
    method: str
    boosting: Boosting | None
    low: np.ndarray              # scaled-error quantiles per step
    high: np.ndarray
    history: dict[tuple, tuple[Any, np.ndarray]]  # group -> (order value of y[-1], tail)

    def bundle(self) -> dict[str, Any]:
        return {"format": 1, "kind": KIND, "forecaster": self}


def default_budget(rows: int) -> float:
    return min(MAX_BUDGET_S, BASE_BUDGET_S + rows / PER_SECOND_ROWS)


def train(frame: pd.DataFrame, target: str, options: dict[str, Any], *,
          time_budget_s: float | None = None) -> tuple[bytes, float, dict[str, Any]]:
    """(artifact, accuracy, description) of a forecasting model of ``frame``. The accuracy
    is the chosen method's skill over the seasonal naive forecast: 1 - its MASE / theirs."""
    with one_native_thread():  # see threads.py: spinning OpenMP threads on shared cores
        return _train(frame, target, options, time_budget_s)


def _train(frame: pd.DataFrame, target: str, options: dict[str, Any],
           time_budget_s: float | None) -> tuple[bytes, float, dict[str, Any]]:
    started = time.perf_counter()
    if frame.empty:
        raise TrainingError("The training query returned no rows")
    target = _column(frame, target, "the PREDICT target")
    order = _column(frame, options["order"], "the ORDER BY column")
    groups = [_column(frame, g, "a GROUP BY column") for g in options["group"]]
    if pd.to_numeric(frame[target], errors="coerce").notna().sum() == 0:
        raise TrainingError(f"The PREDICT column '{target}' of a forecasting model must be "
                            "numeric")
    h, window = int(options["horizon"]), options.get("window")
    series, axis, _ = split_series(frame, target, order, groups, None,
                                   where="the training data", error=TrainingError)
    need = max(MIN_POINTS, window or 0) + h
    short = [s for s in series if len(s.y) < need]
    if short:
        raise TrainingError(f"Series {_key_text(groups, short[0].key) or 'of the data'} has "
                            f"{len(short[0].y)} points; forecasting {h} steps needs at least "
                            f"{need} (WINDOW, or {MIN_POINTS}, plus HORIZON) in every series")
    budget = time_budget_s or default_budget(len(frame))
    deadline = started + budget
    m = _period([s.y for s in series], axis, h)
    backs = _cutoffs(series, h)
    lags = max(window or 0, m, min(h, 24), 3)
    # The shortest history a candidate sees (at the deepest cut-off) must still give rows.
    lags = min(lags, (min(len(s.y) for s in series) - max(backs)) // 2)

    def plain(method: Any) -> Any:
        return lambda heads, starts: [method(y, h, m) for y in heads]

    scores = [_evaluate(NAIVE, plain(_naive), series, axis, h, m, backs, deadline),
              _evaluate(SEASONAL_NAIVE, plain(_seasonal_naive), series, axis, h, m, backs,
                        deadline)]
    boosting = None
    at_first_cutoff: list[Boosting] = []  # kept to measure importances on unseen points
    if lags >= 2:
        def boosted(heads: list[np.ndarray], starts: list[int]) -> list[np.ndarray]:
            fitted = Boosting(lags, m).fit(list(zip(heads, starts, strict=True)), budget)
            if not at_first_cutoff:
                at_first_cutoff.append(fitted)
            return fitted.forecast_many(heads, starts, h)
        scores.append(_evaluate(BOOSTING, boosted, series, axis, h, m, backs, deadline))
    # ETS is fitted per series: tried only if the budget left looks like enough for it.
    ets_guess = 0.05 * len(series) * len(backs)
    if time.perf_counter() + ets_guess < deadline:
        scores.append(_evaluate(ETS, plain(_ets), series, axis, h, m, backs, deadline))
    else:
        scores.append(Score(ETS, skipped="the time budget left no room for it"))
    done = [s for s in scores if not s.skipped]
    best = min(done, key=lambda s: np.mean(s.mase))
    importances = None
    if best.method == BOOSTING:
        importances = at_first_cutoff[0].importances(
            [(s.y, _offset(axis, s)) for s in series], backs[0], order, target)
        boosting = Boosting(lags, m).fit([(s.y, _offset(axis, s)) for s in series], budget)
    low, high = _interval(best.scaled, INTERVAL_LEVEL)
    history = {s.key: (_last_order(axis, s), s.y[-KEEP_POINTS:]) for s in series}
    model = Forecaster(target=target, order=order, groups=groups, window=window, horizon=h,
                       axis=axis, period=m, method=best.method, boosting=boosting,
                       low=low, high=high, history=history)
    snaive = next(s for s in scores if s.method == SEASONAL_NAIVE)
    skill = 1 - float(np.mean(best.mase)) / max(float(np.mean(snaive.mase)), 1e-12)
    description = _describe(model, scores, best, snaive, series, backs, len(frame),
                            time.perf_counter() - started, budget, importances)
    buffer = io.BytesIO()
    joblib.dump(model.bundle(), buffer, compress=3)
    return buffer.getvalue(), _round(skill), description


def _last_order(axis: Axis, series: Series) -> Any:
    steps = len(series.y) - 1
    if axis.kind == "integer":
        return int(series.start) + axis.step * steps
    return axis.after(series.start, steps)[-1] if steps else series.start


def _describe(model: Forecaster, scores: list[Score], best: Score, snaive: Score,
              series: list[Series], backs: list[int], rows: int, seconds: float,
              budget: float, importances: dict[str, float] | None) -> dict[str, Any]:
    """What describe answers: {"info": {...}, "features": [...], "model": [...]}."""
    coverage = _coverage(best.scaled, INTERVAL_LEVEL)
    chosen = best.summary()
    accuracies = {key: chosen[key] for key in ("mase", "mase_std", "smape", "smape_std")}
    accuracies["seasonal_naive"] = {key: snaive.summary()[key]
                                    for key in ("mase", "mase_std", "smape", "smape_std")}
    accuracies["interval_level"] = INTERVAL_LEVEL
    accuracies["interval_coverage"] = coverage
    info: dict[str, Any] = {
        "accuracies": accuracies,
        # Boosting only: the share of the one-step error growth when the seasonal position
        # (from the order column) or the target's lags are shuffled, on points after the
        # first cut-off, which the model that is scored did not see.
        "column_importances": importances,
        "inputs": [model.order, *model.groups, model.target],
        "outputs": [model.target],
        "model": model.method,
        "problem": "forecasting",
        "timeseries": {"order_by": model.order, "group_by": model.groups,
                       "window": model.window, "horizon": model.horizon,
                       "order_kind": model.axis.kind, "frequency": model.axis.label,
                       "seasonal_period": model.period,
                       "gaps_filled": sum(s.filled for s in series),
                       "gap_filling": "linear interpolation between the neighbours"},
        "series": len(series),
        "evaluation": {
            "method": f"rolling origin: {len(backs)} cut-offs ({', '.join(map(str, backs))} "
                      f"steps before the end), each forecasting {model.horizon} steps",
            "metric": "mase",
            "cutoff_mase": [_round(v) for v in best.mase],
            "note": "MASE divides each error by the series' in-sample seasonal naive error "
                    f"(period {model.period}); below 1 beats that forecast in-sample",
            "interval": f"{INTERVAL_LEVEL:.0%} interval from the quantiles of the chosen "
                        "method's scaled errors at the cut-offs, per step; its coverage is "
                        "measured at each cut-off with the interval of the other cut-offs"},
        "final_model_note": "the chosen method was refit on every point of every series",
        "time_budget_s": round(budget, 3),
        "training_time_s": round(seconds, 3),
        "training_rows": rows,
    }
    features = [
        {"column": model.order, "type": model.axis.kind, "encoder": "order (time)",
         "role": "order", "source_type": None, "values": None},
        *({"column": g, "type": "categorical", "encoder": "series key", "role": "group",
           "source_type": None, "values": None} for g in model.groups),
        {"column": model.target, "type": "float", "encoder": "identity", "role": "target",
         "source_type": None, "values": None}]
    tried = [{"name": s.method, "performance": s.summary().get("mase"),
              "training_time": round(s.seconds, 3), "selected": int(s is best),
              "accuracy_functions": ["mase"], "performance_std": s.summary().get("mase_std"),
              "folds_scored": len(s.mase), "folds": len(backs), "params": {},
              "stopped": s.skipped, "reduced": None, "error": None} for s in scores]
    return {"info": info, "features": features, "model": tried}


# --- prediction -------------------------------------------------------------------------

def forecast(model: Forecaster, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The next ``horizon`` rows of each series in ``rows`` (the history: order and target
    values per group). A row without an order value only names its group, which then starts
    from the training data's tail."""
    history, named = _history(model, rows)
    out = []
    for key in sorted(set(history) | named, key=str):
        if key in history:
            last, y = history[key]
        elif key in model.history:
            last, y = model.history[key]
        else:
            raise PredictionError(f"Group {_key_text(model.groups, key)} is neither in the "
                                  "training data nor in the history given",
                                  column=model.groups[0] if model.groups else None)
        out.extend(_rows(model, key, last, y))
    return out


def _history(model: Forecaster, rows: list[dict[str, Any]]
             ) -> tuple[dict[tuple, tuple[Any, np.ndarray]], set[tuple]]:
    if not rows:
        return {}, set(model.history) if not model.groups else set()
    frame = pd.DataFrame.from_records(rows)
    folded = {str(c).lower(): c for c in frame.columns}
    for name in [*model.groups]:
        if name not in frame.columns and name.lower() not in folded:
            raise PredictionError(f"The history has no column '{name}' (a GROUP BY column)",
                                  column=name)
    frame = frame.rename(columns={folded[n.lower()]: n for n in
                                  [model.order, model.target, *model.groups]
                                  if n not in frame.columns and n.lower() in folded})
    if model.order not in frame.columns:
        frame[model.order] = None
    if model.target not in frame.columns:
        frame[model.target] = None
    has_time = frame[model.order].notna() & frame[model.target].notna()
    named = {tuple(str(v) for v in r) for r in frame.loc[~has_time, model.groups].itertuples(
        index=False, name=None)} if model.groups else (set() if has_time.any() else {()})
    given = frame[has_time]
    if given.empty:
        return {}, named
    series, _, _ = split_series(given, model.target, model.order, model.groups, model.axis,
                                where="the history", error=PredictionError)
    out = {}
    for s in series:
        if model.window and len(s.y) < model.window:
            raise PredictionError(
                f"The history of {_key_text(model.groups, s.key) or 'the series'} has "
                f"{len(s.y)} points; the model's WINDOW is {model.window}", column=model.order)
        out[s.key] = (_last_order(model.axis, s), s.y)
    return out, named - set(out)


def _rows(model: Forecaster, key: tuple, last: Any, y: np.ndarray) -> list[dict[str, Any]]:
    h, m = model.horizon, model.period
    if model.method == NAIVE:
        values = _naive(y, h, m)
    elif model.method == SEASONAL_NAIVE:
        values = _seasonal_naive(y, h, m)
    elif model.method == ETS:
        values = _ets(y, h, m)
    else:
        start = _start_of(model, last, len(y))
        values = model.boosting.forecast(y, start, h)
    scale = _mase_scale(y, m)
    times = model.axis.after(last, h)
    level = INTERVAL_LEVEL
    out = []
    for step, (when, value) in enumerate(zip(times, values, strict=True)):
        value = float(value)
        # The errors' quantiles may both lie on one side of zero (a biased method): the
        # interval is widened to hold the forecast itself rather than exclude it.
        lower = min(value, value + float(model.low[step]) * scale)
        upper = max(value, value + float(model.high[step]) * scale)
        row = {g: v for g, v in zip(model.groups, key, strict=True)}
        row[model.order] = when
        row[model.target] = value
        row[f"{model.target}_confidence"] = level
        row[f"{model.target}_lower"] = lower
        row[f"{model.target}_upper"] = upper
        row[f"{model.target}_explain"] = json.dumps({
            "predicted_value": value, "confidence": level, "anomaly": None, "truth": None,
            "confidence_lower_bound": lower, "confidence_upper_bound": upper,
            "method": model.method, "horizon_step": step + 1})
        out.append(row)
    return out


def _start_of(model: Forecaster, last: Any, length: int) -> int:
    """The step count (since the epoch) of the first point of a series ending at ``last``."""
    return _steps_since_epoch(model.axis, last) - (length - 1)
