"""Forecasting models: ORDER BY a time column, GROUP BY series keys, WINDOW and HORIZON.

Training reads every series onto a regular grid (the step is inferred; missing steps are
filled by linear interpolation), then compares candidates by rolling-origin evaluation:
at several cut-offs near the end of each series, each candidate sees the series up to the
cut-off and forecasts the next ``horizon`` steps, which are scored by MASE (the error over
the in-sample error of the seasonal naive forecast) and sMAPE. The candidate with the lowest
mean MASE is kept; its scaled errors at the cut-offs give the forecast interval.

Candidates, cheapest first (the time budget is checked within each candidate's cut-offs:
one that would overrun it is stopped, and describe says where):

- ``Naive`` and ``SeasonalNaive``: the forecasts a person would make by hand;
- ``Lag features --> HistGradientBoosting``: one scikit-learn model across all series, on
  lags of the series (scaled by each series' level), the seasonal position and the query's
  other (exogenous) columns, forecasting one step at a time;
- ``Theta``, ``ETS`` (damped Holt-Winters) and ``ARIMA`` (a small order search by AIC), from
  statsmodels, fitted per series. Their parameters are kept: a forecast runs them over the
  history without fitting.

The interval comes from the split-conformal quantiles of the chosen method's out-of-sample
errors, per step of the horizon, at a quantile level raised until intervals made without
one cut-off hold the stated level on it; describe's coverage is measured by cross-fitting.

A forecasting artifact is joblib bytes of a dict with ``"kind": "forecast"``; ``load_model``
of ``prediction.py`` hands such a bundle to ``load``, and ``predict`` to ``forecast``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator
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
CUTOFFS, MAX_CUTOFFS = 3, 5
# Errors per step of the horizon from which the interval is their quantiles.
EMPIRICAL_MIN = 40
# The highest quantile level calibration may make the interval at.
MAX_LEVEL = 0.99
# Out-of-sample errors per step of the horizon the evaluation aims at for the interval
# (more origins per cut-off when the series are few).
CALIBRATION = 200
# The interval's errors are scaled by the series' recent seasonal naive error: over the
# last RECENT_SEASONS seasons, and at least RECENT_POINTS points.
RECENT_SEASONS, RECENT_POINTS = 8, 48
# Points of each series kept in the artifact: a forecast for a group named without history
# starts from them (and the per-series methods run from them).
KEEP_POINTS = 1000
# Default time budget: BASE_BUDGET_S, plus one second per PER_SECOND_ROWS rows, up to MAX.
BASE_BUDGET_S, PER_SECOND_ROWS, MAX_BUDGET_S = 10.0, 20_000, 60.0
# A text column with at most this many values is an exogenous category (more: left out).
MAX_CATEGORIES = 50
# Seasonal periods tried for a series (besides the calendar's), by autocorrelation.
PERIODS = (4, 7, 12, 24, 52)
MIN_POINTS = 8
NAIVE, SEASONAL_NAIVE, BOOSTING = "Naive", "SeasonalNaive", "Lag features --> HistGradientBoosting"
COMBINATION = "Combination"


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
    x: np.ndarray | None = None  # exogenous columns on the same grid (NaN in gaps)


# --- exogenous columns -------------------------------------------------------------------

@dataclass
class Exogenous:
    """A column of the training query besides the order, group and target columns, used by
    the boosting model: a number, or a category (its index among ``categories``; one the
    training data did not hold reads as missing)."""

    name: str
    categories: list[str] | None = None


def exogenous_columns(frame: pd.DataFrame, used: list[str]
                      ) -> tuple[list[Exogenous], dict[str, str]]:
    """The columns to use (numbers, and texts with at most MAX_CATEGORIES values) and those
    left out with the reason."""
    taken, left = [], {}
    for name in frame.columns:
        if name in used:
            continue
        column = frame[name]
        present = column.dropna()
        if present.empty:
            left[str(name)] = "no values"
            continue
        if any(isinstance(v, dict | list | bytes) for v in present.head(1000)):
            left[str(name)] = "holds lists, objects or bytes"
            continue
        numbers = pd.to_numeric(present.astype("float64") if pd.api.types.is_bool_dtype(
            present) else present, errors="coerce")
        if numbers.notna().all() and not pd.api.types.is_datetime64_any_dtype(present):
            taken.append(Exogenous(str(name)))
            continue
        distinct = sorted({str(v) for v in present})
        if len(distinct) <= MAX_CATEGORIES:
            taken.append(Exogenous(str(name), distinct))
        else:
            left[str(name)] = f"a text or date column with more than {MAX_CATEGORIES} values"
    return taken, left


def _encode(frame: pd.DataFrame, columns: list[Exogenous], *, where: str,
            error: type[Exception]) -> np.ndarray:
    """The exogenous columns as a float matrix (NaN: missing). A column the frame lacks is
    missing throughout; a number column holding a text is an error naming it."""
    out = np.full((len(frame), len(columns)), np.nan)
    folded = {str(c).lower(): c for c in frame.columns}
    for i, spec in enumerate(columns):
        name = spec.name if spec.name in frame.columns else folded.get(spec.name.lower())
        if name is None:
            continue
        column = frame[name]
        if spec.categories is None:
            if pd.api.types.is_bool_dtype(column):
                column = column.astype("float64")
            numbers = pd.to_numeric(column, errors="coerce")
            odd = numbers.isna() & column.notna()
            if odd.any():
                raise error(f"The column '{spec.name}' holds {shown(column[odd].iloc[0])} in "
                            f"{where}: the model reads numbers there")
            out[:, i] = numbers.to_numpy(dtype="float64")
        else:
            index = {v: n for n, v in enumerate(spec.categories)}
            out[:, i] = [np.nan if v is None or (isinstance(v, float) and math.isnan(v))
                         else index.get(str(v), np.nan) for v in column]
    return out


def _column(frame: pd.DataFrame, name: str, role: str) -> str:
    found = find_column(frame.columns, name)
    if found is None:
        raise TrainingError(f"Column '{name}' ({role}) is not among the training columns: "
                            f"{', '.join(map(str, frame.columns))}")
    return found


def split_series(frame: pd.DataFrame, target: str, order: str, groups: list[str],
                 axis: Axis | None, *, where: str, error: type[Exception],
                 exogenous: list[Exogenous] | None = None) -> tuple[list[Series], Axis, str]:
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
    data = pd.DataFrame({"t": times, "y": values, "k": keys})
    if exogenous:
        encoded = _encode(frame, exogenous, where=where, error=error)
        for i in range(len(exogenous)):
            data[f"x{i}"] = encoded[:, i]
    data = data.dropna(subset=["t"])
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
        x = None
        if exogenous:
            x = np.full((len(y), len(exogenous)), np.nan)
            x[pos] = g[[f"x{i}" for i in range(len(exogenous))]].to_numpy(dtype="float64")
        key = tuple(g["k"].iloc[0].split("\x1f")) if groups else ()
        out.append(Series(key, _plain(g["t"].iloc[0]) if axis.kind != "integer"
                          else int(g["t"].iloc[0]), y, filled, x))
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


# Per-series statistical methods. Each fits its parameters once per series (``fit``) and
# forecasts from the end of any history with them (``forecast``, no fitting): what the
# rolling-origin evaluation scores from later origins and what a prediction runs.

@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silences statsmodels' convergence, overflow and index warnings."""
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        for category in (ConvergenceWarning, RuntimeWarning, UserWarning, FutureWarning):
            warnings.simplefilter("ignore", category)
        yield


def _or_seasonal_naive(run: Any, y: np.ndarray, h: int, m: int) -> np.ndarray:
    """``run()``'s forecast, or the seasonal naive one where statsmodels fails or answers
    values that are not finite."""
    with _quiet():
        try:
            out = np.asarray(run(), dtype="float64")
        except (ValueError, np.linalg.LinAlgError):
            return _seasonal_naive(y, h, m)
    return out if np.all(np.isfinite(out)) else _seasonal_naive(y, h, m)


def _import_statsmodels() -> None:
    import statsmodels.tsa.arima.model
    import statsmodels.tsa.holtwinters
    import statsmodels.tsa.seasonal
    import statsmodels.tsa.stattools  # noqa: F401


class PerSeries(ABC):
    """A method fitted per series. ``forecast``'s ``aligned`` says that ``y`` starts where
    the parameters were fitted (ETS's initial states then apply; else they are estimated
    from ``y`` by a heuristic)."""

    name = ""

    @abstractmethod
    def fit(self, y: np.ndarray, m: int) -> Any:
        """The parameters fitted to series ``y`` of season ``m`` (None: it could not be)."""

    @abstractmethod
    def forecast(self, y: np.ndarray, h: int, m: int, params: Any, aligned: bool
                 ) -> np.ndarray:
        """The next ``h`` values after ``y``, with ``params`` and no fitting."""

    @abstractmethod
    def common(self, fitted: list[Any]) -> Any:
        """The parameters for a series the training data does not hold."""


class EtsMethod(PerSeries):
    """statsmodels' Holt-Winters: damped additive trend, additive season when the series
    holds two seasons and more."""

    name = "ETS"

    def fit(self, y: np.ndarray, m: int) -> Any:
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        seasonal = m > 1 and len(y) >= 2 * m + 2
        with _quiet():
            try:
                fit = ExponentialSmoothing(y, trend="add", damped_trend=True,
                                           seasonal="add" if seasonal else None,
                                           seasonal_periods=m if seasonal else None,
                                           initialization_method="estimated").fit()
            except (ValueError, np.linalg.LinAlgError):
                return None
        p = fit.params
        return {"seasonal": seasonal,
                "smoothing": [float(p["smoothing_level"]), float(p["smoothing_trend"]),
                              float(p["smoothing_seasonal"]) if seasonal else None,
                              float(p["damping_trend"])],
                "initial": [float(p["initial_level"]), float(p["initial_trend"]),
                            np.asarray(p["initial_seasons"], dtype="float64") if seasonal
                            else None]}

    def forecast(self, y: np.ndarray, h: int, m: int, params: Any, aligned: bool
                 ) -> np.ndarray:
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        if params is None:
            return _seasonal_naive(y, h, m)
        seasonal = params["seasonal"] and len(y) >= 2 * m + 2
        if aligned and params["initial"] is not None and seasonal == params["seasonal"]:
            level, trend, seasons = params["initial"]
            start = {"initialization_method": "known", "initial_level": level,
                     "initial_trend": trend, "initial_seasonal": seasons}
        else:
            start = {"initialization_method": "legacy-heuristic"}
        alpha, beta, gamma, phi = params["smoothing"]
        return _or_seasonal_naive(lambda: ExponentialSmoothing(
            y, trend="add", damped_trend=True, seasonal="add" if seasonal else None,
            seasonal_periods=m if seasonal else None, **start).fit(
            smoothing_level=alpha, smoothing_trend=beta,
            smoothing_seasonal=gamma if seasonal else None, damping_trend=phi,
            optimized=False).forecast(h), y, h, m)

    def common(self, fitted: list[Any]) -> Any:
        known = [p for p in fitted if p is not None]
        if not known:
            return None
        seasonal = sum(p["seasonal"] for p in known) * 2 >= len(known)
        same = [p for p in known if p["seasonal"] == seasonal]
        smoothing = [float(np.median([p["smoothing"][i] for p in same])) if
                     same[0]["smoothing"][i] is not None else None for i in range(4)]
        return {"seasonal": seasonal, "smoothing": smoothing, "initial": None}


class ThetaMethod(PerSeries):
    """The Theta method (statsmodels' ThetaModel, θ = 2): simple exponential smoothing of
    the deseasonalised series plus half its linear trend, reseasonalised. ``fit`` estimates
    the smoothing weight; the drift, the season and the level are computed from the
    history at each forecast (closed forms, no fitting)."""

    name = "Theta"

    @staticmethod
    def _deseasonalise(y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray | None, bool]:
        """(series without its season, the season's m factors or None, multiplicative)."""
        from statsmodels.tsa.seasonal import seasonal_decompose
        from statsmodels.tsa.stattools import acf

        if m <= 1 or len(y) < 2 * m + 1:
            return y, None, False
        d = np.diff(y)
        rho = acf(d, nlags=m, fft=True)
        # ThetaModel's test: the season's autocorrelation against a chi² at 10 %.
        if not len(d) * rho[-1] ** 2 / max(np.sum(rho[:-1] ** 2), 1e-12) > 2.705543454095404:
            return y, None, False
        multiplicative = bool(np.all(y > 0))
        parts = seasonal_decompose(y, model="mul" if multiplicative else "add", period=m)
        season = np.asarray(parts.seasonal[:m], dtype="float64")
        if multiplicative and season.min() <= 0:
            multiplicative = False
            season = np.asarray(seasonal_decompose(y, model="add", period=m).seasonal[:m],
                                dtype="float64")
        return (y / season[np.arange(len(y)) % m] if multiplicative
                else y - season[np.arange(len(y)) % m]), season, multiplicative

    def fit(self, y: np.ndarray, m: int) -> Any:
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        z, _, _ = self._deseasonalise(y, m)
        with _quiet():
            try:
                fit = ExponentialSmoothing(z, initial_level=z[0],
                                           initialization_method="known").fit()
            except (ValueError, np.linalg.LinAlgError):
                return None
        return {"alpha": float(fit.params["smoothing_level"])}

    def forecast(self, y: np.ndarray, h: int, m: int, params: Any, aligned: bool
                 ) -> np.ndarray:
        from scipy.signal import lfilter

        if params is None:
            return _seasonal_naive(y, h, m)
        alpha = min(max(params["alpha"], 1e-4), 1.0)
        z, season, multiplicative = self._deseasonalise(y, m)
        n = len(z)
        drift = float(np.polyfit(np.arange(n, dtype="float64"), z, 1)[0])
        # SES from a known first level z[0]: l_t = α z_t + (1 − α) l_{t−1}.
        levels = lfilter([alpha], [1, alpha - 1], z, zi=[(1 - alpha) * z[0]])[0]
        steps = np.arange(h, dtype="float64")
        out = levels[-1] + 0.5 * drift * (steps + 1 / alpha - (1 - alpha) ** n / alpha)
        if season is not None:
            cycle = season[(n + np.arange(h)) % m]
            out = out * cycle if multiplicative else out + cycle
        return out if np.all(np.isfinite(out)) else _seasonal_naive(y, h, m)

    def common(self, fitted: list[Any]) -> Any:
        known = [p["alpha"] for p in fitted if p is not None]
        return {"alpha": float(np.median(known))} if known else None


class ArimaMethod(PerSeries):
    """statsmodels' ARIMA with a small order search by AIC: (0,1,1) and (1,1,1) with a
    drift, and with a seasonal (0,1,1) part instead when the series has a season and three
    of them. A forecast runs the Kalman filter with the fitted parameters."""

    name = "ARIMA"

    @staticmethod
    def _specs(y: np.ndarray, m: int) -> list[dict[str, Any]]:
        plain = [{"order": (0, 1, 1), "seasonal_order": (0, 0, 0, 0), "trend": "t"},
                 {"order": (1, 1, 1), "seasonal_order": (0, 0, 0, 0), "trend": "t"}]
        if m > 1 and len(y) >= 3 * m + 2:
            return [{**s, "seasonal_order": (0, 1, 1, m), "trend": "n"} for s in plain] \
                + plain
        return plain

    def fit(self, y: np.ndarray, m: int) -> Any:
        from statsmodels.tsa.arima.model import ARIMA

        best = None
        with _quiet():
            for spec in self._specs(y, m):
                try:
                    fit = ARIMA(y, **spec).fit()
                except (ValueError, np.linalg.LinAlgError):
                    continue
                if np.isfinite(fit.aic) and (best is None or fit.aic < best[0]):
                    best = (fit.aic, {**spec, "params": np.asarray(fit.params, "float64")})
        return best[1] if best else None

    def forecast(self, y: np.ndarray, h: int, m: int, params: Any, aligned: bool
                 ) -> np.ndarray:
        from statsmodels.tsa.arima.model import ARIMA

        if params is None or (params["seasonal_order"][3] and len(y) < 2 * m + 2):
            return _seasonal_naive(y, h, m)
        return _or_seasonal_naive(lambda: ARIMA(
            y, order=params["order"], seasonal_order=params["seasonal_order"],
            trend=params["trend"]).filter(params["params"]).forecast(h), y, h, m)

    def common(self, fitted: list[Any]) -> Any:
        known = [p for p in fitted if p is not None]
        if not known:
            return None
        shapes = [(p["order"], p["seasonal_order"]) for p in known]
        usual = max(set(shapes), key=shapes.count)
        same = [p for p in known if (p["order"], p["seasonal_order"]) == usual]
        return {**same[0], "params": np.median(np.stack([p["params"] for p in same]), axis=0)}


PER_SERIES: dict[str, PerSeries] = {m.name: m for m in (ThetaMethod(), EtsMethod(),
                                                        ArimaMethod())}


@dataclass
class Boosting:
    """One HistGradientBoosting regressor over all series: lags 1..``lags`` of the series
    divided by its level, the seasonal position and the ``exogenous`` columns' values at
    the last known row, forecasting the next value so divided."""

    lags: int
    m: int
    exogenous: int = 0
    estimator: Any = None

    def rows(self, y: np.ndarray, start: int, x: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
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
        parts = [lagged, season]
        if self.exogenous:
            parts.append(x[idx - 1] if x is not None
                         else np.full((len(idx), self.exogenous), np.nan))
        return np.hstack(parts), z[idx] - last

    def fit(self, series: list[tuple[np.ndarray, int, np.ndarray | None]], seconds: float
            ) -> Boosting:
        from sklearn.ensemble import HistGradientBoostingRegressor

        parts = [self.rows(y, s, x) for y, s, x in series if len(y) > self.lags + 1]
        if not parts:
            raise TrainingError("The series are too short for lag features")
        X = np.vstack([p[0] for p in parts])  # noqa: N806
        target = np.concatenate([p[1] for p in parts])
        iterations = 100 if seconds > 5 else 40
        self.estimator = HistGradientBoostingRegressor(
            # The seasonal position is an ordinal column, not a declared categorical one:
            # trees split it as well here, and a categorical column sends every predict
            # through a ColumnTransformer (2 of a forecast step's 3 ms). So are exogenous
            # categories (their index).
            max_iter=iterations, learning_rate=0.1, random_state=0).fit(X, target)
        return self

    def importances(self, series: list[tuple[np.ndarray, int, np.ndarray | None]],
                    unseen: int, names: dict[str, list[int]]) -> dict[str, float]:
        """Permutation importance of each input (``names``: its columns), on each series'
        last ``unseen`` rows."""
        parts = [self.rows(y, start, x) for y, start, x in series]
        X = np.vstack([p[0][-unseen:] for p in parts])[:20_000]  # noqa: N806
        truth = np.concatenate([p[1][-unseen:] for p in parts])[:20_000]
        base = float(np.mean((self.estimator.predict(X) - truth) ** 2))
        rng = np.random.default_rng(0)
        grown = {}
        for name, columns in names.items():
            shuffled = X.copy()
            shuffled[:, columns] = X[rng.permutation(len(X))][:, columns]
            error = float(np.mean((self.estimator.predict(shuffled) - truth) ** 2))
            grown[name] = max(error - base, 0.0)
        total = sum(grown.values())
        return {k: _round(v / total) if total > 0 else 0.0 for k, v in grown.items()}

    def forecast(self, y: np.ndarray, start: int, h: int, x: np.ndarray | None = None
                 ) -> np.ndarray:
        return self.forecast_many([y], [start], h, [x])[0]

    def forecast_many(self, ys: list[np.ndarray], starts: list[int], h: int,
                      xs: list[np.ndarray | None] | None = None) -> list[np.ndarray]:
        """Each series' forecast, one batch per step (a predict call per step, not per
        series and step). The exogenous columns keep their last known values over the
        horizon."""
        scales = np.array([_level(y) for y in ys])
        windows = np.stack([y[-self.lags:] for y in ys]) / scales[:, None]
        out = np.zeros((len(ys), h))
        ends = np.array([s + len(y) for y, s in zip(ys, starts, strict=True)])
        known = None
        if self.exogenous:
            known = np.stack([x[-1] if x is not None and len(x)
                              else np.full(self.exogenous, np.nan)
                              for x in (xs or [None] * len(ys))])
        for step in range(h):
            season = ((ends + step) % self.m) if self.m > 1 else np.zeros(len(ys))
            last = windows[:, -1:]
            parts = [(windows - last)[:, ::-1][:, 1:], last * 0, season[:, None]]
            if known is not None:
                parts.append(known)
            value = self.estimator.predict(np.hstack(parts)) + last[:, 0]
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


def _spread(y: np.ndarray, m: int) -> float:
    """What the interval's errors are scaled by: the seasonal naive error of the series'
    recent points (a series whose swings grew is judged by its latest ones)."""
    return _mase_scale(y[-max(RECENT_SEASONS * m, RECENT_POINTS):], m)


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
    # Per cut-off: the errors of every origin scored there, each divided by its series'
    # recent spread (_spread), shape (series × origins, h).
    scaled: list[np.ndarray] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str | None = None
    # Per cut-off: (actual values, forecasts, MASE scales, spreads), for the combination.
    truth: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def add(self, actual: np.ndarray, predicted: np.ndarray, mase_scales: np.ndarray,
            spreads: np.ndarray) -> None:
        """A cut-off's forecasts (every origin's, one row per series and origin)."""
        errors = actual - predicted
        self.truth.append((actual, predicted, mase_scales, spreads))
        self.scaled.append(errors / spreads[:, None])
        self.mase.append(float(np.mean(np.abs(errors / mase_scales[:, None]))))
        self.smape.append(float(np.mean([_smape(a, f) for a, f in
                                         zip(actual, predicted, strict=True)])))

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


def _origins(series: list[Series], h: int, backs: list[int]) -> Any:
    """How many forecast origins each cut-off scores: the cut-off itself, and when the
    series are few, the next steps after it too (up to the next cut-off), forecast with the
    parameters fitted at the cut-off, so that the interval rests on about CALIBRATION
    errors per step of the horizon."""
    per = math.ceil(CALIBRATION / (len(series) * len(backs)))
    return lambda back: max(1, min(h, back - h + 1, per))


class Overrun(Exception):
    """A candidate stopped: finishing it would overrun the training time budget."""


@dataclass
class Progress:
    """Checks a candidate's time within its cut-offs: after each unit of work (a series
    fitted, or a cut-off for the methods fitted across series), the time it has taken so
    far, extended to all its units (the cut-offs' and the final refit's), must end before
    the deadline."""

    deadline: float
    units: int
    started: float = field(default_factory=time.perf_counter)
    done: int = 0

    def tick(self, where: str, count: int = 1) -> None:
        self.done += count
        now = time.perf_counter()
        if now > self.deadline:
            raise Overrun(f"stopped at {where}: the time budget ran out")
        projected = self.started + (now - self.started) / self.done * self.units
        # One unit says little (a first fit pays for caches): the projection waits for two.
        if 2 <= self.done < self.units and projected > self.deadline:
            raise Overrun(f"stopped at {where}: finishing it (about "
                          f"{projected - self.started:.1f} s in all) would overrun the time "
                          f"budget ({self.deadline - self.started:.1f} s were left for it)")


class Plain:
    """A method with nothing to fit (the naive forecasts)."""

    def __init__(self, name: str, method: Any, h: int, m: int) -> None:
        self.name, self.method, self.h, self.m = name, method, h, m

    def units(self, series: int, cutoffs: int) -> int:
        return cutoffs

    def fit(self, heads: list[np.ndarray], starts: list[int], progress: Progress,
            where: str) -> Plain:
        return self

    def forecast_many(self, ys: list[np.ndarray], starts: list[int]) -> list[np.ndarray]:
        return [self.method(y, self.h, self.m) for y in ys]


class Fitted:
    """A per-series method's parameters for each series, fitted at a cut-off; forecasts from
    later origins extend the same series (their initial states still apply)."""

    def __init__(self, method: PerSeries, h: int, m: int, params: list[Any]) -> None:
        self.method, self.h, self.m, self.params = method, h, m, params

    def forecast_many(self, ys: list[np.ndarray], starts: list[int]) -> list[np.ndarray]:
        return [self.method.forecast(y, self.h, self.m, p, True)
                for y, p in zip(ys, self.params, strict=True)]


class Separate:
    """A per-series method as a candidate."""

    def __init__(self, method: PerSeries, h: int, m: int) -> None:
        self.name, self.method, self.h, self.m = method.name, method, h, m

    def units(self, series: int, cutoffs: int) -> int:
        return series * (cutoffs + 1)

    def fit(self, heads: list[np.ndarray], starts: list[int], progress: Progress,
            where: str) -> Fitted:
        params = []
        for number, y in enumerate(heads):
            params.append(self.method.fit(y, self.m))
            progress.tick(f"series {number + 1} of {len(heads)}, {where}")
        return Fitted(self.method, self.h, self.m, params)


class Pooled:
    """The gradient boosting model: one fit across every series per cut-off."""

    name = BOOSTING

    def __init__(self, series: list[Series], lags: int, h: int, m: int, exogenous: int,
                 budget: float) -> None:
        self.series, self.lags, self.h, self.m = series, lags, h, m
        self.exogenous, self.budget = exogenous, budget
        self.first: Boosting | None = None  # kept to measure importances on unseen points

    def units(self, series: int, cutoffs: int) -> int:
        return cutoffs + 1

    def fit(self, heads: list[np.ndarray], starts: list[int], progress: Progress,
            where: str) -> Any:
        fitted = Boosting(self.lags, self.m, self.exogenous).fit(
            list(zip(heads, starts, self.known(heads), strict=True)), self.budget)
        if self.first is None:
            self.first = fitted
        progress.tick(where)
        return BoostingAt(fitted, self)

    def known(self, ys: list[np.ndarray]) -> list[np.ndarray | None]:
        """The exogenous columns of each series up to the end of its history ``ys``."""
        return [s.x[:len(y)] if s.x is not None else None
                for s, y in zip(self.series, ys, strict=True)]


@dataclass
class BoostingAt:
    """A boosting model fitted at a cut-off."""

    model: Boosting
    pooled: Pooled

    def forecast_many(self, ys: list[np.ndarray], starts: list[int]) -> list[np.ndarray]:
        return self.model.forecast_many(ys, starts, self.pooled.h, self.pooled.known(ys))


def _evaluate(candidate: Any, series: list[Series], axis: Axis, h: int, m: int,
              backs: list[int], origins: Any, deadline: float) -> Score:
    score = Score(candidate.name)
    progress = Progress(deadline, candidate.units(len(series), len(backs)))
    starts = [_offset(axis, s) for s in series]
    try:
        for number, back in enumerate(backs):
            where = f"cut-off {number + 1} of {len(backs)}"
            fitted = candidate.fit([s.y[:-back] for s in series], starts, progress, where)
            parts: list[list[np.ndarray]] = [[], [], [], []]
            for j in range(origins(back)):
                ends = [len(s.y) - back + j for s in series]
                ys = [s.y[:end] for s, end in zip(series, ends, strict=True)]
                parts[0].append(np.stack([s.y[end:end + h]
                                          for s, end in zip(series, ends, strict=True)]))
                parts[1].append(np.stack(fitted.forecast_many(ys, starts)))
                parts[2].append(np.array([_mase_scale(y, m) for y in ys]))
                parts[3].append(np.array([_spread(y, m) for y in ys]))
                if time.perf_counter() > deadline:
                    raise Overrun(f"stopped at {where}: the time budget ran out")
            score.add(*(np.concatenate(p, axis=0) for p in parts))
    except Overrun as stop:
        score.skipped = str(stop)
    score.seconds = time.perf_counter() - progress.started
    return score


def _combined(scores: list[Score]) -> Score | None:
    """The mean forecast of the per-series methods that were not stopped, scored on the
    same origins (their forecasts there are averaged: nothing is fitted again)."""
    parts = [s for s in scores if s.method in PER_SERIES and not s.skipped]
    if len(parts) < 2:
        return None
    score = Score(f"{COMBINATION} ({', '.join(s.method for s in parts)})",
                  seconds=sum(s.seconds for s in parts))
    for k, (actual, _, mase_scales, spreads) in enumerate(parts[0].truth):
        predicted = np.mean([s.truth[k][1] for s in parts], axis=0)
        score.add(actual, predicted, mase_scales, spreads)
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
    """Per step of the horizon, where the scaled out-of-sample errors fall around the
    forecast. With EMPIRICAL_MIN errors and more, their split-conformal quantiles (the
    ⌈(n+1)·q⌉-th smallest of n, which holds the level on new errors from the same
    distribution); else, as the quantiles of so few errors would be their extremes, the
    prediction interval of a normal sample, mean ± t · sd · sqrt(1 + 1/n)."""
    errors = np.concatenate(scaled, axis=0)
    n, tail = len(errors), (1 - level) / 2
    if n >= EMPIRICAL_MIN:
        ordered = np.sort(errors, axis=0)
        upper = min(n, math.ceil((n + 1) * (1 - tail))) - 1
        lower = max(0, n - 1 - upper)
        return ordered[lower], ordered[upper]
    spread = student.ppf(1 - tail, max(n - 1, 1)) * errors.std(axis=0, ddof=1) \
        * np.sqrt(1 + 1 / n) if n > 1 else np.abs(errors[0]) * 2
    centre = errors.mean(axis=0)
    return centre - spread, centre + spread


def _held(scaled: list[np.ndarray], level: float) -> float:
    """How often each cut-off's errors fall in the interval (at quantile level ``level``)
    made from the other cut-offs' errors, averaged over the cut-offs."""
    hits = []
    for i, errors in enumerate(scaled):
        low, high = _interval([e for j, e in enumerate(scaled) if j != i], level)
        hits.append(np.mean((errors >= low) & (errors <= high)))
    return float(np.mean(hits))


def _calibrate(scaled: list[np.ndarray], level: float) -> float:
    """The quantile level the interval is made at: the lowest from ``level`` up (by 0.01,
    at most MAX_LEVEL) whose intervals, made without one cut-off, held ``level`` of that
    cut-off's errors. Errors that differ from one cut-off to the next (a series that
    changed) so widen the interval."""
    if len(scaled) < 2:
        return level
    for q in np.arange(level, MAX_LEVEL + 1e-9, 0.01):
        if _held(scaled, float(q)) >= level:
            return round(float(q), 2)
    return MAX_LEVEL


def _coverage(scaled: list[np.ndarray], level: float) -> float | None:
    """The interval's coverage measured honestly, by cross-fitting: for each cut-off, the
    interval made (calibrated too) from the other cut-offs' errors only, checked on this
    one's."""
    if len(scaled) < 2:
        return None
    hits = []
    for i, errors in enumerate(scaled):
        others = [e for j, e in enumerate(scaled) if j != i]
        low, high = _interval(others, _calibrate(others, level))
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
    # The per-series methods' parameters ({method: parameters}) fitted on each group's
    # kept tail, and those for a group the training data does not hold (None in artifacts
    # made before they were kept: such a model fits at predict).
    params: dict[tuple, Any] | None = None
    common: Any = None
    # The boosting model's exogenous columns, and each group's last known values of them
    # (a forecast of a group without history carries them over the horizon).
    exogenous: list[Exogenous] = field(default_factory=list)
    known: dict[tuple, np.ndarray] | None = None

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
    exogenous, left_out = exogenous_columns(frame, [target, order, *groups])
    series, axis, _ = split_series(frame, target, order, groups, None,
                                   where="the training data", error=TrainingError,
                                   exogenous=exogenous)
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

    origins = _origins(series, h, backs)
    candidates: list[Any] = [Plain(NAIVE, _naive, h, m),
                             Plain(SEASONAL_NAIVE, _seasonal_naive, h, m)]
    pooled = Pooled(series, lags, h, m, len(exogenous), budget) if lags >= 2 else None
    if pooled:
        candidates.append(pooled)
    _import_statsmodels()  # before the per-series methods' time is taken
    candidates.extend(Separate(method, h, m) for method in PER_SERIES.values())
    scores = [_evaluate(c, series, axis, h, m, backs, origins, deadline) for c in candidates]
    combination = _combined(scores)
    if combination:
        scores.append(combination)
    done = [s for s in scores if not s.skipped]
    best = min(done, key=lambda s: np.mean(s.mase))
    for score in scores:
        score.truth = []  # the forecasts at the cut-offs were kept for the combination only
    importances = boosting = params = common = None
    if best.method == BOOSTING:
        whole = [(s.y, _offset(axis, s), s.x) for s in series]
        importances = pooled.first.importances(whole, backs[0], {
            order: [lags], target: list(range(lags)),
            **{e.name: [lags + 1 + i] for i, e in enumerate(exogenous)}})
        boosting = Boosting(lags, m, len(exogenous)).fit(whole, budget)
    else:
        names = method_parts(best.method)
        if names:
            params = {s.key: {name: PER_SERIES[name].fit(s.y[-KEEP_POINTS:], m)
                              for name in names} for s in series}
            common = {name: PER_SERIES[name].common([p[name] for p in params.values()])
                      for name in names}
    quantile_level = _calibrate(best.scaled, INTERVAL_LEVEL)
    low, high = _interval(best.scaled, quantile_level)
    history = {s.key: (_last_order(axis, s), s.y[-KEEP_POINTS:]) for s in series}
    model = Forecaster(target=target, order=order, groups=groups, window=window, horizon=h,
                       axis=axis, period=m, method=best.method, boosting=boosting,
                       low=low, high=high, history=history, params=params, common=common,
                       exogenous=exogenous if boosting else [],
                       known={s.key: s.x[-1] for s in series} if boosting and exogenous
                       else None)
    snaive = next(s for s in scores if s.method == SEASONAL_NAIVE)
    skill = 1 - float(np.mean(best.mase)) / max(float(np.mean(snaive.mase)), 1e-12)
    description = _describe(model, scores, best, snaive, series, backs, origins, len(frame),
                            time.perf_counter() - started, budget, importances)
    # The level the errors' quantiles were taken at for the stated one to hold (above it
    # when the errors at one cut-off were not like the others').
    description["info"]["evaluation"]["interval_quantile_level"] = quantile_level
    description["info"]["exogenous"] = {
        "used": [e.name for e in exogenous] if boosting else [],
        "left_out": {**left_out, **({e.name: f"only the boosting model reads them; "
                                             f"{best.method} was chosen" for e in exogenous}
                                    if not boosting else {})},
        "over_the_horizon": "each series' last known values are carried forward"}
    description["info"]["inputs"].extend(e.name for e in exogenous if boosting)
    description["features"].extend(
        {"column": e.name, "type": "categorical" if e.categories else "float",
         "encoder": "value at the last known row", "role": "exogenous",
         "source_type": None, "values": e.categories} for e in exogenous if boosting)
    buffer = io.BytesIO()
    joblib.dump(model.bundle(), buffer, compress=3)
    return buffer.getvalue(), _round(skill), description


def _last_order(axis: Axis, series: Series) -> Any:
    steps = len(series.y) - 1
    if axis.kind == "integer":
        return int(series.start) + axis.step * steps
    return axis.after(series.start, steps)[-1] if steps else series.start


def _describe(model: Forecaster, scores: list[Score], best: Score, snaive: Score,
              series: list[Series], backs: list[int], origins: Any, rows: int,
              seconds: float, budget: float, importances: dict[str, float] | None
              ) -> dict[str, Any]:
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
                      f"steps before the end), each forecasting {model.horizon} steps; the "
                      "parameters fitted at a cut-off also forecast from the next origins "
                      "before the following cut-off when the series are few",
            "origins_per_cutoff": [origins(b) for b in backs],
            "metric": "mase",
            "cutoff_mase": [_round(v) for v in best.mase],
            "note": "MASE divides each error by the series' in-sample seasonal naive error "
                    f"(period {model.period}); below 1 beats that forecast in-sample",
            "interval": f"{INTERVAL_LEVEL:.0%} interval, per step of the horizon, from the "
                        "split-conformal quantiles of the chosen method's out-of-sample "
                        "errors at the cut-offs (each divided by its series' recent seasonal "
                        "naive error); its coverage is measured at each cut-off with the "
                        "interval made from the other cut-offs' errors only"},
        "final_model_note": "the chosen method was refit on every point of every series",
        # Candidates the time budget stopped (checked within each cut-off, as they go).
        "stopped": {s.method: s.skipped for s in scores if s.skipped},
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
            last, y, x = history[key]
        elif key in model.history:
            last, y = model.history[key]
            kept = (getattr(model, "known", None) or {}).get(key)
            x = kept[None, :] if kept is not None else None
        else:
            raise PredictionError(f"Group {_key_text(model.groups, key)} is neither in the "
                                  "training data nor in the history given",
                                  column=model.groups[0] if model.groups else None)
        out.extend(_rows(model, key, last, y, x))
    return out


def _history(model: Forecaster, rows: list[dict[str, Any]]
             ) -> tuple[dict[tuple, tuple[Any, np.ndarray, np.ndarray | None]], set[tuple]]:
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
                                where="the history", error=PredictionError,
                                exogenous=getattr(model, "exogenous", None))
    out = {}
    for s in series:
        if model.window and len(s.y) < model.window:
            raise PredictionError(
                f"The history of {_key_text(model.groups, s.key) or 'the series'} has "
                f"{len(s.y)} points; the model's WINDOW is {model.window}", column=model.order)
        out[s.key] = (_last_order(model.axis, s), s.y, s.x)
    return out, named - set(out)


def _rows(model: Forecaster, key: tuple, last: Any, y: np.ndarray, x: np.ndarray | None
          ) -> list[dict[str, Any]]:
    h, m = model.horizon, model.period
    if model.method == NAIVE:
        values = _naive(y, h, m)
    elif model.method == SEASONAL_NAIVE:
        values = _seasonal_naive(y, h, m)
    elif method_parts(model.method):
        values = _per_series(model, key, last, y)
    else:
        start = _start_of(model, last, len(y))
        values = model.boosting.forecast(y, start, h, x)
    scale = _spread(y, m)
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


def method_parts(method: str) -> list[str]:
    """The per-series methods a method name stands for (none: not a per-series method)."""
    if method in PER_SERIES:
        return [method]
    if method.startswith(COMBINATION + " ("):
        return method[len(COMBINATION) + 2:-1].split(", ")
    return []


def _per_series(model: Forecaster, key: tuple, last: Any, y: np.ndarray) -> np.ndarray:
    """A per-series method's forecast (a combination's: the mean of its methods') with the
    parameters kept for the group (no fitting). A history that holds the point where the
    group's kept tail starts is read from there, where the fitted initial states apply; any
    other history (or a group the training data does not hold, with the parameters common
    to the groups) starts from states estimated from its own first points."""
    h, m = model.horizon, model.period
    names = method_parts(model.method)
    if model.params is None:  # an artifact made before parameters were kept
        method = PER_SERIES[model.method]
        return method.forecast(y, h, m, method.fit(y, m), True)
    if key not in model.params:
        return np.mean([PER_SERIES[name].forecast(y, h, m, model.common[name], False)
                        for name in names], axis=0)
    kept_last, tail = model.history[key]
    first = _steps_since_epoch(model.axis, kept_last) - (len(tail) - 1)
    skip = first - (_steps_since_epoch(model.axis, last) - (len(y) - 1))
    aligned = 0 <= skip < len(y) - MIN_POINTS
    y = y[skip:] if aligned else y
    return np.mean([PER_SERIES[name].forecast(y, h, m, model.params[key][name], aligned)
                     for name in names], axis=0)


def _start_of(model: Forecaster, last: Any, length: int) -> int:
    """The step count (since the epoch) of the first point of a series ending at ``last``."""
    return _steps_since_epoch(model.axis, last) - (length - 1)
