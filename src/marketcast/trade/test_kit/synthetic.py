"""A seeded synthetic 24/7 crypto series for the chaos harness: no package here ships daily BTC or ETH bars
(backtesting.py's BTC is monthly), and a kill on a weekend crypto cycle needs a bar on every calendar day. It
is a random walk, not market data; it has the shape of one (a bar each UTC day, weekends and holidays
included), which is all the harness asks of it."""

from __future__ import annotations

import numpy as np
import pandas as pd


def crypto_frame(start: str, end: str, seed: int = 7, price: float = 300.0) -> pd.DataFrame:
    """Daily OHLCV bars stamped at UTC midnight on every calendar day in [start, end]: a geometric random walk
    from ``price`` (3 % daily steps, 1 % wicks), the same for the same seed; a day's bar does not depend on
    ``end`` (its two draws come in one row), so a longer span extends a shorter one."""
    index = pd.date_range(start, end, freq="D", tz="UTC", name="timestamp")
    draws = np.random.default_rng(seed).normal(0.0, 1.0, (len(index), 2))
    close = price * np.exp(np.cumsum(0.03 * draws[:, 0]))
    open_ = np.r_[price, close[:-1]]
    wick = np.abs(0.01 * draws[:, 1])
    return pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * (1 + wick),
                         "low": np.minimum(open_, close) * (1 - wick), "close": close,
                         "volume": np.full(len(index), 5e4)}, index=index)
