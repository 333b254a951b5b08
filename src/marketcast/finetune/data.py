"""Training and validation windows from the user's bars, none of which reaches past ``--until``.

Each symbol's bars are cut at ``until`` (every bar of every example, targets included, is on or before that day;
:func:`marketcast.forecast.tuning.bars_used`). The last 10 % of what remains (at least one horizon) is held out:
training windows end before it, validation windows score the ``horizon`` steps right after their context, all
inside it. Windows are index arithmetic over one float32 array per symbol, never copies of the bars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Callable

import numpy as np
import pandas as pd
import torch

from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.forecast.tuning import bars_used, fingerprint

FIELDS = ("close", "high", "low")  # Toto's three variates (marketcast.forecast.toto.forecaster.FIELDS)
VALIDATION_SHARE = 0.10
MAX_VALIDATION_WINDOWS = 256


@dataclass(frozen=True)
class Windows:
    """Examples of ``length`` steps: ``series[k]`` is symbol k's ``[V, n]`` array; ``train`` and ``validation``
    hold ``(symbol index, end)`` pairs, a window being ``series[k][:, end - length:end]``."""

    series: list[np.ndarray]
    length: int
    train: np.ndarray
    validation: np.ndarray
    symbols: dict
    stamps: list[np.ndarray] | None = None  # per symbol ``[n, 5]`` calendar features (Kronos)

    def batch(self, picks: np.ndarray) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Windows ``picks`` (rows of ``train``/``validation``) stacked as float32 ``[B, V, length]`` (with their
        int64 ``[B, length, 5]`` calendar features when the windows carry them)."""
        values = torch.from_numpy(np.stack([self.series[k][:, e - self.length:e] for k, e in picks]))
        if self.stamps is None:
            return values
        return values, torch.from_numpy(np.stack([self.stamps[k][e - self.length:e] for k, e in picks]))


def close_high_low(frame: pd.DataFrame) -> np.ndarray:
    """Toto's variates ``[3, n]``."""
    return frame[list(FIELDS)].to_numpy(dtype=np.float32).T


def parse_until(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise ConfigError(f"--until {text!r} is not a date; use YYYY-MM-DD, e.g. 2017-12-29") from None


def make_windows(bars: list[Bars], until: date, context: int, horizon: int, patch: int,
                 features: Callable[[pd.DataFrame], np.ndarray] = close_high_low,
                 stamps: Callable[[pd.DatetimeIndex], np.ndarray] | None = None) -> Windows:
    """The examples of ``bars`` up to ``until`` for a context of ``context`` bars (rounded up to whole patches)
    and a validation horizon of ``horizon`` steps (the window carries whole patches after the context).

    A cutoff after a symbol's last bar, or one that leaves too few bars for a window and its validation span,
    is one :class:`ConfigError` line saying what would work. ``features`` gives a model's variates ``[V, n]``
    from the bars, ``stamps`` its calendar features ``[n, 5]`` (None: the model has none)."""
    ctx = math.ceil(context / patch) * patch
    ahead = math.ceil(horizon / patch) * patch
    length = ctx + ahead
    series, train, validation, symbols, calendar = [], [], [], {}, []
    for k, b in enumerate(bars):
        index = b.frame.index
        where = f"{b.symbol} ({b.source or 'bars'})"
        if until >= index[-1].date():
            raise ConfigError(f"--until {until} is on or after the last bar of {where} ({index[-1]:%Y-%m-%d}); "
                              "tune on an earlier cutoff so bars remain after it to test on")
        used = bars_used(b.frame, until)
        n = len(used)
        held = max(math.ceil(VALIDATION_SHARE * n), ahead)
        need = length + held
        if n < need:
            raise ConfigError(
                f"--until {until} leaves {n} bars of {where} (from {index[0]:%Y-%m-%d}); a --context of {context} "
                f"(rounded up to {ctx}, patches of {patch}) and --horizon {horizon} need at least {need} with "
                f"10 % held out for validation; choose a later --until or a shorter --context")
        series.append(np.ascontiguousarray(features(used), dtype=np.float32))
        if stamps is not None:
            calendar.append(np.ascontiguousarray(stamps(used.index), dtype=np.int64))
        cut = n - held
        train += [(k, e) for e in range(length, cut + 1)]
        # the scored steps [end - ahead, end - ahead + horizon) must lie in the held-out span [cut, n)
        validation += [(k, e) for e in range(max(length, cut + ahead), n + 1)]
        symbols[b.symbol.upper()] = {"fingerprint": fingerprint(b.frame, until), "bars": n,
                                     "first": used.index[0].isoformat(), "last": used.index[-1].isoformat(),
                                     "train_windows": cut - length + 1, "source": b.source}
    val = np.asarray(validation, dtype=np.int64).reshape(-1, 2)
    if len(val) > MAX_VALIDATION_WINDOWS:  # evenly spread, the same every evaluation
        val = val[np.linspace(0, len(val) - 1, MAX_VALIDATION_WINDOWS).round().astype(int)]
    return Windows(series, length, np.asarray(train, dtype=np.int64).reshape(-1, 2), val, symbols,
                   calendar if stamps is not None else None)
