"""The Monte Carlo error judged against re-runs: one backtest per seed on the same bars, and what each seed's band,
close calls and sides say about the others (tests/backtest/test_mc_seed_check.py and benchmarks/mc_seed_check.py
share it; benchmarks may not import ``tests``).

Computed from the runs' own figures only (returns, bands, per-window sides), not from the estimator's code."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_many
from marketcast.backtest.strategies import StrategyParams
from marketcast.backtest.vectorised import decision_sides
from marketcast.forecast.baseline import BaselineForecaster

RATIO = (1.5, 4.0)  # band / seed sd the issue accepts, unless the band is flagged unreliable


def heavy_tailed_bars(n: int = 900, seed: int = 5):
    """A synthetic daily series with Student-t(3) returns (1 % scale): fat tails and excess kurtosis."""
    import pandas as pd

    from marketcast.data.bars import Bars

    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(0.01 * rng.standard_t(3, n) / np.sqrt(3.0)))
    open_ = close * np.exp(rng.normal(0, 0.004, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, 0.005, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, 0.005, n)))
    index = pd.date_range("2015-01-01", periods=n, freq="D", tz="UTC", name="timestamp")
    frame = pd.DataFrame(np.column_stack([open_, high, low, close]), columns=["open", "high", "low", "close"],
                         index=index)
    return Bars("HEAVY", frame, "crypto", "synthetic")


def seed_runs(bars, seeds: int = 10, config: BacktestConfig | None = None) -> list:
    """One backtest of ``bars`` per seed 0 .. seeds - 1 (SPA off: it reads no sample)."""
    config = config or BacktestConfig(spa=False)
    forecaster = BaselineForecaster()
    return [run_many([bars], forecaster, replace(config, seed=s, spa=False))[0] for s in range(seeds)]


def check(runs: list) -> dict:
    """Per figure (each strategy, ``walk-forward``): the seed sd of the returns, each seed's band over it (median,
    min, max), in how many seeds the band is flagged unreliable, and how many other seeds each seed's band covers
    (also counted over the seeds whose band is not flagged: ``coverage_unflagged``, the bands the strip shows); the
    close calls: how often a window's side differs from another seed's, in the windows a seed called close and
    in the others (pooled over strategies, seeds and the other seeds)."""
    first = runs[0]
    params = StrategyParams.from_config(first.config, first.asset_class, first.annualisation.periods_per_year)
    figures = {}
    names = [*runs[0].strategies, "walk-forward"]
    for name in names:
        if name == "walk-forward":
            values = [r.walk_forward["metrics"]["return"] for r in runs]
            errors = [r.monte_carlo.walk_forward for r in runs]
        else:
            values = [r.strategies[name].metrics["return"] for r in runs]
            errors = [r.monte_carlo.strategies[name] for r in runs]
        sd = float(np.std(values, ddof=1))
        bands = np.array([e.band for e in errors])
        inside = [[abs(values[j] - values[i]) <= bands[i] + 1e-12 for j in range(len(runs)) if j != i]
                  for i in range(len(runs))]
        covered = sum(map(sum, inside))
        trusted = [row for row, e in zip(inside, errors) if not e.unreliable]  # the bands the strip does not flag
        figures[name] = {"seed_sd": sd, "band_median": float(np.median(bands)), "band_min": float(bands.min()),
                         "band_max": float(bands.max()),
                         "ratio": float(np.median(bands)) / sd if sd >= 1e-12 else None,  # None: never moved
                         "flagged": int(sum(e.unreliable for e in errors)), "covered": int(covered),
                         "seeds": len(runs), "pairs": len(runs) * (len(runs) - 1),
                         "covered_unflagged": int(sum(map(sum, trusted))), "pairs_unflagged": sum(map(len, trusted))}
    flips = {True: [0, 0], False: [0, 0]}
    for name in runs[0].strategies:
        if name == "buy_hold":
            continue
        sides = np.array([decision_sides(name, r.views, params) for r in runs])  # [seeds, N]
        for i, r in enumerate(runs):
            close = np.asarray(r.monte_carlo.close[name])
            differ = (sides != sides[i]).sum(axis=0)  # other seeds whose side differs, per window
            for flag in (True, False):
                flips[flag][0] += int(differ[close == flag].sum())
                flips[flag][1] += int((close == flag).sum()) * (len(runs) - 1)
    rate = {k: v[0] / v[1] if v[1] else None for k, v in flips.items()}
    return {"figures": figures, "flip_rate_close": rate[True], "flip_rate_other": rate[False],
            "close_share": flips[True][1] / max(1, flips[True][1] + flips[False][1]),
            "coverage": sum(f["covered"] for f in figures.values()) / sum(f["pairs"] for f in figures.values()),
            "coverage_unflagged": sum(f["covered_unflagged"] for f in figures.values())
            / max(1, sum(f["pairs_unflagged"] for f in figures.values()))}
