"""Sample paths that reach zero, and sample paths that are no numbers: the rule every consumer applies.

A price cannot go below zero, but a model's samples can: Toto's Student-T mixture has heavy tails (and toto-ts
turns a non-finite draw into 0), random weights spread widely, a baseline may replay a crash in a volatile
regime. Consumers read a forecast as returns relative to the decision bar's close ``close_t``, so the rule is
stated in returns: a sample price below ``FLOOR_FRACTION * close_t`` (a return of -99.9 %: the asset all but
lost) is set to that floor, and the paths floored are counted in the forecast's meta (``floored_paths`` of
``paths``, ``floor_fraction``), which the backtest's JSON reports, with one warning line. Flooring every field
at the same level keeps each bar consistent (high >= close >= low stay ordered).

A non-finite sample is not a price at all: the forecast cannot be used, and the error names the symbol and
the window.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import pandas as pd

from marketcast.errors import ForecastError, ForecastWarning
from marketcast.forecast.base import Forecast

FLOOR_FRACTION = 1e-3


def _window(symbol: str, stamp) -> str:
    ts = pd.Timestamp(stamp)
    return f"{symbol} window ending {ts:%Y-%m-%d}" if ts == ts.normalize() else f"{symbol} window ending {ts}"


def floor_paths(forecast: Forecast, last_close: np.ndarray, window_ends: Sequence, symbol: str) -> Forecast:
    """``forecast`` with every sample price at least ``FLOOR_FRACTION`` of its window's ``last_close``.

    ``window_ends`` are the decision times of the ``B`` windows (for messages). Raises
    :class:`ForecastError` naming the first window with a non-finite sample.
    """
    samples = np.asarray(forecast.samples, dtype=np.float64)
    model = forecast.meta.get("model", "the model")
    finite = np.isfinite(samples)
    if not finite.all():
        per_window = (~finite).reshape(len(samples), -1).sum(axis=1)
        b = int(np.argmax(per_window > 0))
        raise ForecastError(
            f"{model} returned {per_window[b]:,} non-finite sample values (of {samples[b].size:,}) for the "
            f"{_window(symbol, window_ends[b])}; its forecast cannot be used: try --dtype float32, another "
            "--context or other --weights")
    floor = FLOOR_FRACTION * np.asarray(last_close, dtype=np.float64)[:, None, None, None]
    low = samples < floor
    floored = int(low.any(axis=(1, 3)).sum())  # (window, sample) paths with any price at the floor
    paths = samples.shape[0] * samples.shape[2]
    meta = {**forecast.meta, "floored_paths": floored, "paths": paths, "floor_fraction": FLOOR_FRACTION}
    if floored:
        first = int(np.argmax(low.any(axis=(1, 2, 3))))
        warnings.warn(ForecastWarning(
            f"{model}: {floored:,} of {paths:,} {symbol} sample paths went below {FLOOR_FRACTION:.1%} of the "
            f"decision bar's close (first in the {_window(symbol, window_ends[first])}); they were floored there "
            "(a -99.9% return)"), stacklevel=2)
    knots = forecast.quantiles  # the floor is monotone: the same max on the knots keeps them the samples' law
    knots = None if knots is None else np.maximum(np.asarray(knots, dtype=np.float64), floor)
    return Forecast(np.maximum(samples, floor), forecast.fields, meta, knots, forecast.quantile_levels)
