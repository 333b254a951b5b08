"""The walk-forward pick: which strategy to trade at the next bar, judged on the windows settled so far.

One rule for the backtest's walk-forward track record (``walk_forward_oos_*`` in the JSON) and the live
planner (:mod:`marketcast.trade.loop.planner`), so the backtest reports the record of the rule the live loop
follows.

The rule (:class:`SelectionRule`, ``--select-lookback``, ``--min-trades``):

1. Look back over the last ``lookback`` settled windows (default 70; ``None`` = every settled window). Early
   on there are fewer.
2. A strategy is eligible when it traded (had a filled order) at least ``min_trades`` times in them (default
   10, ``--min-trades``): a strategy that never trades would only be flat by accident, and one with a trade or
   three can lead by the luck of those few (on GOOG ``ci_guard`` led with one trade). Early on, before any
   strategy has ``min_trades`` trades in its lookback, nothing is eligible.
3. The eligible strategy with the highest compounded net return over those windows wins; ties go to the
   higher Sharpe ratio, then to the strategy listed first.
4. No eligible strategy: stay flat (no pick).

In the backtest, the pick for window k (decided at bar t_k) looks at windows k - lookback .. k - 1, each
settled on a bar <= t_k; window 0 has nothing settled and stays flat. The live planner looks at the same
windows before its decision bar. What the live loop then trades is a subset of these picks: its entry gates
(forecast edge, Sharpe, drawdown, liquidity, a quote) can still say no.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from marketcast.backtest.metrics import sharpe_ratio
from marketcast.errors import ConfigError

DEFAULT_LOOKBACK = 70  # the original live loop's 70 walk-forward windows
DEFAULT_MIN_TRADES = 10  # trades a strategy needs in the lookback to be picked or called best


@dataclass(frozen=True)
class SelectionRule:
    """Pick the eligible strategy (at least ``min_trades`` trades) with the best compounded net return over the
    last ``lookback`` windows."""

    lookback: int | None = DEFAULT_LOOKBACK
    min_trades: int = DEFAULT_MIN_TRADES

    def __post_init__(self) -> None:
        if self.lookback is not None and self.lookback < 1:
            raise ConfigError(f"--select-lookback must be >= 1 (or 0 for every settled window), got {self.lookback}")
        if isinstance(self.min_trades, bool) or not isinstance(self.min_trades, int) or self.min_trades < 1:
            raise ConfigError(f"--min-trades must be an integer >= 1, got {self.min_trades!r}")
        if self.lookback is not None and self.lookback < self.min_trades:
            raise ConfigError(f"--min-trades {self.min_trades} is more than --select-lookback {self.lookback} windows "
                              "hold: no strategy could ever be picked; lower --min-trades or raise --select-lookback")

    def eligible(self, trades: int) -> bool:
        """Whether a strategy with ``trades`` trades may be picked or called best."""
        return trades >= self.min_trades

    def describe(self) -> str:
        span = "every settled window" if self.lookback is None else f"the last {self.lookback} settled windows"
        return (f"at each bar, the strategy with the highest compounded net return over {span} among those with "
                f"at least {self.min_trades} trades in them (ties: higher Sharpe, then listing order); flat when "
                "none has")

    def pick(self, returns: Mapping[str, Sequence[float]], filled: Mapping[str, Sequence[bool]]) -> str | None:
        """The strategy to trade next, from each strategy's settled windows (oldest first; only the last
        ``lookback`` count)."""
        best, best_key = None, None
        for name, series in returns.items():
            r = np.asarray(series, dtype=np.float64)
            f = np.asarray(filled[name], dtype=bool)
            if self.lookback is not None:
                r, f = r[-self.lookback:], f[-self.lookback:]
            if not self.eligible(int(f.sum())):
                continue
            key = (float(np.prod(1.0 + r)), sharpe_ratio(r, 1))
            if best_key is None or key > best_key:
                best, best_key = name, key
        return best

    def walk_forward(self, returns: Mapping[str, np.ndarray], filled: Mapping[str, np.ndarray],
                     delay: int = 0) -> dict:
        """What trading each window's pick earned: ``picked`` (a name or None per window), ``returns`` and
        ``filled`` (0 and False where flat).

        Window k's pick is :meth:`pick` over windows k - delay - lookback .. k - delay - 1: ``delay`` 0 when each
        window settles on a bar <= the next decision bar, 1 when it settles at the open after it (an exit at the
        next open, :mod:`marketcast.backtest.execution`); flat for the first ``delay`` windows. For every k at
        once: each strategy's compounded return over each lookback is a running product (the same sequential
        multiplications as ``np.prod`` of the slice) and its trade count a difference of running sums; only
        windows where strategies tie on the best compounded return compare their Sharpe ratios one by one.
        """
        names = list(returns)
        r = np.array([np.asarray(returns[n], dtype=np.float64) for n in names])  # [strategies, windows]
        f = np.array([np.asarray(filled[n], dtype=bool) for n in names])
        n_windows = r.shape[1]
        growth, trades = self._lookback_growth(1.0 + r), self._lookback_trades(f)
        eligible = trades >= self.min_trades
        best = np.where(eligible, growth, -np.inf).max(axis=0)
        tied = eligible & (growth == best)
        pick = np.where(tied.any(axis=0), np.argmax(tied, axis=0), -1)
        for k in np.flatnonzero(tied.sum(axis=0) > 1):  # the higher Sharpe, then the first listed
            start = 0 if self.lookback is None else max(0, k - self.lookback)
            sharpes = [sharpe_ratio(r[s, start:k], 1) if tied[s, k] else -np.inf for s in range(len(names))]
            pick[k] = int(np.argmax(sharpes))
        if delay:  # window k trades the pick made on the windows settled by its decision: pick[k - delay]
            pick = np.concatenate([np.full(min(delay, n_windows), -1), pick[:n_windows - delay]])
        flat = pick < 0
        cols = np.arange(n_windows)
        return {"picked": [None if p < 0 else names[p] for p in pick],
                "returns": np.where(flat, 0.0, r[pick, cols]), "filled": np.where(flat, False, f[pick, cols])}

    def _lookback_growth(self, growth: np.ndarray) -> np.ndarray:
        """``[S, N]``: the product of ``growth`` over each window's lookback (window k: k - lookback .. k - 1;
        1 for window 0), multiplied in order as ``np.prod`` does."""
        s, n = growth.shape
        out = np.ones((s, n))
        out[:, 1:] = np.cumprod(growth, axis=1)[:, :-1]  # windows whose lookback starts at window 0
        if self.lookback is not None and n > self.lookback + 1:
            windows = np.lib.stride_tricks.sliding_window_view(growth, self.lookback, axis=1)
            out[:, self.lookback + 1:] = np.prod(windows[:, 1:n - self.lookback], axis=-1)
        return out

    def _lookback_trades(self, filled: np.ndarray) -> np.ndarray:
        """``[S, N]``: filled trades over each window's lookback."""
        total = np.concatenate([np.zeros((len(filled), 1), dtype=np.int64), np.cumsum(filled, axis=1)], axis=1)
        k = np.arange(filled.shape[1])
        start = np.zeros_like(k) if self.lookback is None else np.maximum(0, k - self.lookback)
        return total[:, k] - total[:, start]
