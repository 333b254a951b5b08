"""Every number reported for one series of per-window returns, in one place: the metrics of
:mod:`~marketcast.backtest.metrics`, the trust in its Sharpe ratio (:mod:`~marketcast.backtest.stats`) and its
standing against the buy-and-hold benchmark (:mod:`~marketcast.backtest.benchmark`)."""

from __future__ import annotations

import numpy as np

from marketcast.backtest.benchmark import relative_metrics
from marketcast.backtest.metrics import strategy_metrics
from marketcast.backtest.stats import probabilistic_sharpe, sharpe_interval


def sharpe_trust(returns: np.ndarray, periods_per_year: float, reps: int, level: float, seed: int) -> dict:
    """``psr`` and the bootstrap interval ``sharpe_ci_low`` / ``sharpe_ci_high`` of the annualised Sharpe."""
    ci = sharpe_interval(returns, periods_per_year, reps, level, seed)
    return {"psr": probabilistic_sharpe(returns),
            "sharpe_ci_low": None if ci is None else ci[0], "sharpe_ci_high": None if ci is None else ci[1]}


def score(returns: np.ndarray, filled: np.ndarray, periods_per_year: float, benchmark: np.ndarray,
          reps: int = 1000, level: float = 0.95, seed: int = 0) -> dict:
    """Metrics, PSR, bootstrap Sharpe interval, and alpha/beta/information ratio against ``benchmark``."""
    return {**strategy_metrics(returns, filled, periods_per_year),
            **sharpe_trust(returns, periods_per_year, reps, level, seed),
            **relative_metrics(returns, benchmark, periods_per_year)}
