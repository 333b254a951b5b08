"""Every number reported for one series of per-window returns, in one place: the metrics of
:mod:`~marketcast.backtest.metrics`, the trust in its Sharpe ratio (:mod:`~marketcast.backtest.stats`) and its
standing against the buy-and-hold benchmark (:mod:`~marketcast.backtest.benchmark`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from marketcast.backtest.benchmark import relative_metrics
from marketcast.backtest.metrics import strategy_metrics
from marketcast.backtest.stats import probabilistic_sharpe, sharpe_intervals


def sharpe_trust(returns: np.ndarray, periods_per_year: float, reps: int, level: float, seed: int) -> dict:
    """``psr`` and the bootstrap interval ``sharpe_ci_low`` / ``sharpe_ci_high`` of the annualised Sharpe."""
    return _trust([returns], periods_per_year, reps, level, seed)[0]


def _trust(series: Sequence[np.ndarray], periods_per_year: float, reps: int, level: float, seed: int) -> list[dict]:
    cis = sharpe_intervals(np.array(series, dtype=np.float64), periods_per_year, reps, level, seed)
    return [{"psr": probabilistic_sharpe(r), "sharpe_ci_low": None if ci is None else ci[0],
             "sharpe_ci_high": None if ci is None else ci[1]} for r, ci in zip(series, cis)]


def score_many(returns: Mapping[str, np.ndarray], filled: Mapping[str, np.ndarray], periods_per_year: float,
               benchmark: np.ndarray, reps: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, dict]:
    """:func:`score` of several series of the same windows; their bootstrap intervals in one pass."""
    trust = _trust([returns[n] for n in returns], periods_per_year, reps, level, seed)
    return {name: {**strategy_metrics(r, filled[name], periods_per_year), **t,
                   **relative_metrics(r, benchmark, periods_per_year)}
            for (name, r), t in zip(returns.items(), trust)}


def score(returns: np.ndarray, filled: np.ndarray, periods_per_year: float, benchmark: np.ndarray,
          reps: int = 1000, level: float = 0.95, seed: int = 0) -> dict:
    """Metrics, PSR, bootstrap Sharpe interval, and alpha/beta/information ratio against ``benchmark``."""
    return score_many({"": returns}, {"": filled}, periods_per_year, benchmark, reps, level, seed)[""]
