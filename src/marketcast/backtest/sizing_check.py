"""The sizing check of issue 54 on data the sizing was not built on: the embedded daily files (the default 70
windows, 1,000 windows, the earlier period 2005-2008) and a synthetic heavy-tailed, skewed daily series; per run,
every placed order's size and its forecast's spread (tests/backtest/test_calibrated_sizing.py and
benchmarks/sizing_bench.py share it; benchmarks may not import ``tests``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import jf_skew_t, spearmanr

from marketcast.data.bars import Bars


def skewed_series(n: int = 1400, seed: int = 0) -> Bars:
    """Daily bars whose close-to-close log returns follow GARCH(1,1) (omega 2e-6, alpha 0.08, beta 0.9) with
    standardised Jones-Faddy skew-t innovations (a 2.5, b 4: skewness -1.17, excess kurtosis 8.3 before GARCH);
    each bar opens near the previous close, high and low a half-normal excursion beyond open and close."""
    rng = np.random.default_rng(seed)
    dist = jf_skew_t(2.5, 4.0)
    mean, var = dist.stats(moments="mv")
    z = (dist.rvs(size=n, random_state=rng) - mean) / np.sqrt(var)
    r, h = np.empty(n), 2e-6 / (1 - 0.08 - 0.9)
    for t in range(n):
        r[t] = 0.0003 + np.sqrt(h) * z[t]
        h = 2e-6 + 0.08 * (r[t] - 0.0003) ** 2 + 0.9 * h
    close = 100 * np.exp(np.cumsum(r))
    open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0, 0.001, n))
    wick = np.sqrt(var) * 0.004
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, wick, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, wick, n)))
    index = pd.bdate_range("2001-01-01", periods=n, tz="UTC", name="timestamp")
    frame = pd.DataFrame({"open": open_, "high": high, "low": low, "close": close}, index=index)
    return Bars("SKEWED", frame, "stock", "synthetic")


def earlier_period(bars: Bars) -> tuple[Bars, int]:
    """``bars`` up to the end of 2008 and the number of windows that decide in 2005-2008."""
    early = bars.head(int(bars.frame.index.searchsorted(pd.Timestamp("2009-01-01", tz="UTC"))))
    first = int(early.frame.index.searchsorted(pd.Timestamp("2005-01-01", tz="UTC")))
    return early, len(early) - 1 - first


def placed_orders(result) -> tuple[np.ndarray, np.ndarray]:
    """Every placed order's size (side not flat, all strategies pooled) and its forecast's spread (the 10-90 %
    width of the close samples)."""
    close = result.sample_returns["close"][:result.windows]
    width = np.quantile(close, 0.9, axis=1) - np.quantile(close, 0.1, axis=1)
    sizes, widths = [], []
    for run in result.strategies.values():
        traded = run.decisions.side != 0
        sizes.append(run.sizes[traded])
        widths.append(width[traded])
    return np.concatenate(sizes), np.concatenate(widths)


def figures(sizes: np.ndarray, widths: np.ndarray, cap: float) -> dict:
    """The share of orders at the cap and at 0, and the Spearman rank correlation of size with spread among the
    ``inner`` sizes strictly between 0 and the cap (None with fewer than 3)."""
    inner = (sizes > 0) & (sizes < cap)
    rho = float(spearmanr(sizes[inner], widths[inner]).statistic) if inner.sum() > 2 else None
    return {"at_cap": float((sizes == cap).mean()), "at_zero": float((sizes == 0).mean()),
            "inner": int(inner.sum()), "spearman_inner": rho, "median": float(np.median(sizes))}
