"""Benchmark: is Kelly sizing from measured skill still an on/off switch, and does the size fall with the spread?

Runs the baseline backtest with ``--sizing kelly`` (quarter Kelly, cap 1) on the embedded daily files (the
default 70 windows; 1,000 windows; the earlier period 2005-2008) and on a synthetic heavy-tailed, skewed daily
series (GARCH(1,1) volatility, Jones-Faddy skew-t innovations with skewness -1.2 and excess kurtosis 8), and prints,
over every order a strategy placed (side not flat, all strategies pooled): the share at the cap, the share at 0,
and the Spearman rank correlation of size with the forecast's spread (the 10-90 % width of the close samples)
among the sizes strictly between 0 and the cap; each next to the same orders sized at face value (skill 1, the
rule before: :func:`marketcast.backtest.sizing.order_sizes` of the same samples). Writes
benchmarks/results/sizing_bench.json (docs/backtest.md quotes it).

    PYTHONPATH=src python benchmarks/sizing_bench.py [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import jf_skew_t, spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, write_report  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import run_backtest  # noqa: E402
from marketcast.backtest.sizing import order_sizes  # noqa: E402
from marketcast.data import load_symbol  # noqa: E402
from marketcast.data.bars import Bars  # noqa: E402
from marketcast.forecast.baseline import BaselineForecaster  # noqa: E402


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


def orders(result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every placed order's size, its size at face value (skill 1) and its forecast's 10-90 % close width."""
    samples = {f: s[:result.windows] for f, s in result.sample_returns.items()}
    width = np.quantile(samples["close"], 0.9, axis=1) - np.quantile(samples["close"], 0.1, axis=1)
    cfg = result.config
    sized, face, widths = [], [], []
    for run in result.strategies.values():
        o = run.decisions
        traded = o.side != 0
        flat = order_sizes(o.side, o.entry_limit, o.take_profit, result.views.close, samples, "kelly",
                           kelly_cap=cfg.kelly_cap, kelly_fraction=cfg.kelly_fraction, skill=1.0)
        sized.append(run.sizes[traded])
        face.append(flat[traded])
        widths.append(width[traded])
    return np.concatenate(sized), np.concatenate(face), np.concatenate(widths)


def figures(sizes: np.ndarray, widths: np.ndarray, cap: float) -> dict:
    inner = (sizes > 0) & (sizes < cap)
    rho = float(spearmanr(sizes[inner], widths[inner]).statistic) if inner.sum() > 2 else None
    return {"at_cap": float((sizes == cap).mean()), "at_zero": float((sizes == 0).mean()),
            "inner": int(inner.sum()), "spearman_inner": rho, "median": float(np.median(sizes))}


def cases():
    for symbol in ("SP500", "NASDAQ"):
        bars = load_symbol(symbol)
        yield f"{symbol} default (70 windows)", bars, 70
        yield f"{symbol} 1,000 windows", bars, 1000
        cut = bars.frame.index.searchsorted(pd.Timestamp("2009-01-01", tz="UTC"))
        early = bars.head(int(cut))
        first = int(early.frame.index.searchsorted(pd.Timestamp("2005-01-01", tz="UTC")))
        yield f"{symbol} 2005-2008", early, len(early) - 1 - first
    for seed in (0, 1):
        yield f"synthetic skewed, heavy-tailed (seed {seed}), 1,000 windows", skewed_series(seed=seed), 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "sizing_bench.json"))
    args = parser.parse_args(argv)
    from marketcast.console import console

    rows = []
    header = f"{'case':58} {'orders':>6} {'cap':>6} {'cap@1':>6} {'zero':>6} {'inner':>6} {'rho':>7} {'rho@1':>7}"
    print(header)
    for label, bars, windows in cases():
        config = BacktestConfig(sizing="kelly", windows=windows, spa=False, bootstrap_reps=10)
        result = run_backtest(bars, BaselineForecaster(), config)
        sizes, face, widths = orders(result)
        row = {"case": label, "windows": windows, "orders": len(sizes),
               "measured": figures(sizes, widths, config.kelly_cap),
               "face_value": figures(face, widths, config.kelly_cap),
               "skill": {n: s.describe() for n, s in result.skills.items()}}
        rows.append(row)
        m, f = row["measured"], row["face_value"]
        rho = "n/a" if m["spearman_inner"] is None else f"{m['spearman_inner']:+.3f}"
        rho1 = "n/a" if f["spearman_inner"] is None else f"{f['spearman_inner']:+.3f}"
        print(f"{label:58} {len(sizes):6d} {m['at_cap']:6.1%} {f['at_cap']:6.1%} {m['at_zero']:6.1%} "
              f"{m['inner']:6d} {rho:>7} {rho1:>7}")
    write_report(args.out, {"benchmark": "sizing", "policy": "kelly 0.25, cap 1, baseline forecaster",
                            "rows": rows}, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
