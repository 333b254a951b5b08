"""Every number reported for one series of per-window returns, in one place: the metrics of
:mod:`~marketcast.backtest.metrics`, the trust in its Sharpe ratio (:mod:`~marketcast.backtest.stats`) and its
standing against the buy-and-hold benchmark (:mod:`~marketcast.backtest.benchmark`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from marketcast.backtest.benchmark import relative_metrics
from marketcast.backtest.metrics import strategy_metrics
from marketcast.backtest.selection import DEFAULT_MIN_TRADES
from marketcast.backtest.stats import probabilistic_sharpe, sharpe_intervals, trust_reason


def sharpe_trust(returns: np.ndarray, periods_per_year: float, reps: int, level: float, seed: int,
                 min_trades: int = DEFAULT_MIN_TRADES) -> dict:
    """``psr`` and the bootstrap interval ``sharpe_ci_low`` / ``sharpe_ci_high`` of the annualised Sharpe of a
    series in the market every window (buy and hold), with ``psr_ci_reason`` where they are not shown."""
    held = np.ones(len(returns), dtype=bool)
    return _trust([returns], [held], periods_per_year, reps, level, seed, min_trades, "windows held")[0]


def _trust(series: Sequence[np.ndarray], filled: Sequence[np.ndarray], periods_per_year: float, reps: int,
           level: float, seed: int, min_trades: int, unit: str = "trades") -> list[dict]:
    """PSR and interval of each series, None where :func:`~marketcast.backtest.stats.trust_reason` gives a reason."""
    cis = sharpe_intervals(np.array(series, dtype=np.float64), periods_per_year, reps, level, seed)
    out = []
    for r, f, ci in zip(series, filled, cis):
        why = trust_reason(r, f, min_trades, unit)
        shown = why is None and ci is not None
        out.append({"psr": probabilistic_sharpe(r) if why is None else None,
                    "sharpe_ci_low": ci[0] if shown else None, "sharpe_ci_high": ci[1] if shown else None,
                    "psr_ci_reason": why})
    return out


def score_many(returns: Mapping[str, np.ndarray], filled: Mapping[str, np.ndarray], periods_per_year: float,
               benchmark: np.ndarray, reps: int = 1000, level: float = 0.95, seed: int = 0,
               min_trades: int = DEFAULT_MIN_TRADES) -> dict[str, dict]:
    """:func:`score` of several series of the same windows; their bootstrap intervals in one pass."""
    trust = _trust([returns[n] for n in returns], [filled[n] for n in returns], periods_per_year, reps, level, seed,
                   min_trades)
    return {name: {**strategy_metrics(r, filled[name], periods_per_year), **t,
                   **relative_metrics(r, benchmark, periods_per_year)}
            for (name, r), t in zip(returns.items(), trust)}


def score(returns: np.ndarray, filled: np.ndarray, periods_per_year: float, benchmark: np.ndarray,
          reps: int = 1000, level: float = 0.95, seed: int = 0, min_trades: int = DEFAULT_MIN_TRADES) -> dict:
    """Metrics, PSR, bootstrap Sharpe interval (where the sample supports them), and alpha/beta/information ratio
    against ``benchmark``."""
    return score_many({"": returns}, {"": filled}, periods_per_year, benchmark, reps, level, seed, min_trades)[""]
