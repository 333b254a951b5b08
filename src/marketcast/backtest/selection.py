"""The walk-forward pick: which strategy to trade at the next bar, judged on the windows settled so far.

One rule for the backtest's walk-forward track record (``walk_forward_oos_*`` in the JSON) and the live
planner (:mod:`marketcast.trade.planner`), so the backtest reports the record of the rule the live loop
follows.

The rule (:class:`SelectionRule`, ``--select-lookback``):

1. Look back over the last ``lookback`` settled windows (default 70; ``None`` = every settled window). Early
   on there are fewer.
2. A strategy is eligible when it traded (had a filled order) at least once in them: a strategy that never
   trades is never picked, it would only be flat by accident.
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


@dataclass(frozen=True)
class SelectionRule:
    """Pick the eligible strategy with the best compounded net return over the last ``lookback`` windows."""

    lookback: int | None = DEFAULT_LOOKBACK

    def __post_init__(self) -> None:
        if self.lookback is not None and self.lookback < 1:
            raise ConfigError(f"--select-lookback must be >= 1 (or 0 for every settled window), got {self.lookback}")

    def describe(self) -> str:
        span = "every settled window" if self.lookback is None else f"the last {self.lookback} settled windows"
        return (f"at each bar, the strategy with the highest compounded net return over {span} among those that "
                "traded in them (ties: higher Sharpe, then listing order); flat when none traded")

    def pick(self, returns: Mapping[str, Sequence[float]], filled: Mapping[str, Sequence[bool]]) -> str | None:
        """The strategy to trade next, from each strategy's settled windows (oldest first; only the last
        ``lookback`` count)."""
        best, best_key = None, None
        for name, series in returns.items():
            r = np.asarray(series, dtype=np.float64)
            f = np.asarray(filled[name], dtype=bool)
            if self.lookback is not None:
                r, f = r[-self.lookback:], f[-self.lookback:]
            if not f.any():
                continue
            key = (float(np.prod(1.0 + r)), sharpe_ratio(r, 1))
            if best_key is None or key > best_key:
                best, best_key = name, key
        return best

    def walk_forward(self, returns: Mapping[str, np.ndarray], filled: Mapping[str, np.ndarray]) -> dict:
        """What trading each window's pick earned: ``picked`` (a name or None per window), ``returns`` and
        ``filled`` (0 and False where flat)."""
        names = list(returns)
        r = {n: np.asarray(returns[n], dtype=np.float64) for n in names}
        f = {n: np.asarray(filled[n], dtype=bool) for n in names}
        n_windows = len(r[names[0]])
        picked: list[str | None] = []
        out, fills = np.zeros(n_windows), np.zeros(n_windows, dtype=bool)
        for k in range(n_windows):
            start = 0 if self.lookback is None else max(0, k - self.lookback)
            name = self.pick({m: r[m][start:k] for m in names}, {m: f[m][start:k] for m in names})
            picked.append(name)
            if name is not None:
                out[k], fills[k] = r[name][k], f[name][k]
        return {"picked": picked, "returns": out, "filled": fills}
