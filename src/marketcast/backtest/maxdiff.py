"""MaxDiff: buy the forecast low, sell the forecast high, with price offsets learned from the past only.

The original system grid-searched its offsets on the very window it then scored. Here the offsets used at
window k maximise the summed net return of windows 0..k-1 (an expanding window, each already settled on a
bar <= t), so nothing about window k's own outcome can leak into its decision.

Offsets and search grid
-----------------------
Long (the forecast high move is larger in magnitude than the low move):
    entry (buy limit)   = forecast_low  * (1 + e)      take profit (sell limit) = forecast_high * (1 + x)
Short (otherwise; never for crypto, which is long-only):
    entry (sell limit)  = forecast_high * (1 - e)      take profit (buy limit)  = forecast_low  * (1 - x)
So a positive ``e`` moves the entry towards the market (fills more often) and a positive ``x`` asks for a
bigger take profit, for both sides. ``e`` and ``x`` each range over :data:`OFFSETS` = -1.0 % .. +1.0 % in
0.1 % steps (21 values, 441 pairs). Until ``min_history`` windows have settled the offsets are zero. Ties
go to the pair with the smallest ``|e| + |x|`` (zero first), then the smaller ``e``, then the smaller ``x``.

:func:`settle_grid` is a vectorised copy of :func:`marketcast.backtest.fills.settle` used only to score the
grid; the trade of record is always settled by ``settle`` itself (tests check the two agree exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marketcast.backtest.fills import PENETRATION
from marketcast.backtest.orders import LONG, SHORT, Bar, Costs, Decision

OFFSETS = np.round(np.arange(-10, 11) * 0.001, 6)
GRID_ENTRY, GRID_EXIT = (a.ravel() for a in np.meshgrid(OFFSETS, OFFSETS, indexing="ij"))
_PREFERENCE = np.lexsort((GRID_EXIT, GRID_ENTRY, np.abs(GRID_ENTRY) + np.abs(GRID_EXIT)))
_RANK = np.empty_like(_PREFERENCE)
_RANK[_PREFERENCE] = np.arange(len(_PREFERENCE))


def maxdiff_side(high_ret: float, low_ret: float, allow_short: bool) -> int:
    """Long bias when the forecast high move is larger than the low move; short (or flat) otherwise."""
    if abs(high_ret) > abs(low_ret):
        return LONG
    return SHORT if allow_short else 0


def maxdiff_prices(side: int, high: float, low: float, e, x):
    """(entry limit, take profit) for forecast prices ``high``/``low`` and offsets ``e``/``x`` (arrays ok)."""
    if side == LONG:
        return low * (1.0 + e), high * (1.0 + x)
    return high * (1.0 - e), low * (1.0 - x)


@dataclass(frozen=True)
class MaxDiffState:
    """Summed net return of every grid pair over the windows settled so far."""

    scores: np.ndarray
    count: int = 0

    @classmethod
    def initial(cls) -> "MaxDiffState":
        return cls(np.zeros(len(GRID_ENTRY)), 0)

    def offsets(self, min_history: int) -> tuple[float, float]:
        """The learned (e, x); zero until ``min_history`` windows have settled."""
        if self.count < min_history:
            return 0.0, 0.0
        best = np.flatnonzero(self.scores == self.scores.max())
        pick = best[np.argmin(_RANK[best])]
        return float(GRID_ENTRY[pick]), float(GRID_EXIT[pick])

    def add(self, grid_net: np.ndarray) -> "MaxDiffState":
        return MaxDiffState(self.scores + grid_net, self.count + 1)


def settle_grid(
    side: int,
    entry_limit: np.ndarray,
    take_profit: np.ndarray,
    bar: Bar,
    costs: Costs,
    fill_mode: str = "touch",
    same_bar: str = "pessimistic",
) -> np.ndarray:
    """Net returns of limit-entry/take-profit orders on one bar, vectorised over the price arrays.

    Mirrors ``settle`` for decisions with both an entry limit and a take profit (unfilled = 0).
    """
    entry_limit = np.asarray(entry_limit, dtype=np.float64)
    take_profit = np.asarray(take_profit, dtype=np.float64)
    if side == 0:
        return np.zeros(np.broadcast(entry_limit, take_profit).shape)
    o, h, lo, c = bar
    margin = PENETRATION if fill_mode == "penetrate" else 0.0
    long = side > 0
    if long:
        filled = lo <= entry_limit * (1.0 - margin)
        entry = np.minimum(o, entry_limit)
        tp_hit = h >= take_profit * (1.0 + margin)
        tp_price = np.maximum(o, take_profit)
    else:
        filled = h >= entry_limit * (1.0 + margin)
        entry = np.maximum(o, entry_limit)
        tp_hit = lo <= take_profit * (1.0 - margin)
        tp_price = np.minimum(o, take_profit)
    at_open = entry == o
    # entry inside the bar: the take-profit fills at its limit, and only after the entry (fills.settle)
    after_entry = np.minimum(take_profit, c) if long else np.maximum(take_profit, c)
    if same_bar == "nearest":
        extreme_first = (o - lo) <= (h - o) if long else (h - o) <= (o - lo)
        same = np.where(extreme_first, take_profit, after_entry)
    else:
        same = after_entry
    marketable = take_profit <= entry if long else take_profit >= entry  # fills at the entry price at once
    same = np.where(marketable, entry, same)
    exit_price = np.where(tp_hit, np.where(at_open, tp_price, same), c)
    gross = side * (exit_price / entry - 1.0)
    net = gross - 2.0 * costs.per_side
    return np.where(filled, net, 0.0)


def decide_maxdiff(view, state: MaxDiffState, allow_short: bool, min_history: int) -> Decision:
    """The MaxDiff order for bar t+1 with the offsets learned from earlier windows."""
    side = maxdiff_side(view.high_ret, view.low_ret, allow_short)
    if side == 0:
        return Decision(0)
    e, x = state.offsets(min_history)
    entry, tp = maxdiff_prices(side, view.price(view.high_ret), view.price(view.low_ret), e, x)
    return Decision(side, entry_limit=float(entry), take_profit=float(tp))


def learn_maxdiff(view, bar_next: Bar, state: MaxDiffState, allow_short: bool, costs: Costs,
                  fill_mode: str, same_bar: str) -> MaxDiffState:
    """Add the settled window (view at t, bar t+1) to the grid scores."""
    side = maxdiff_side(view.high_ret, view.low_ret, allow_short)
    entry, tp = maxdiff_prices(side or LONG, view.price(view.high_ret), view.price(view.low_ret),
                               GRID_ENTRY, GRID_EXIT)
    return state.add(settle_grid(side, entry, tp, bar_next, costs, fill_mode, same_bar))
