"""MaxDiff: buy the forecast low, sell the forecast high, with price offsets learned from the past only.

The original system grid-searched its offsets on the very window it then scored. Here the offsets used at
window k maximise the summed net return of the windows settled by its decision bar t (an expanding window),
so nothing about window k's own outcome can leak into its decision. Each past window is scored with the exit
the run's rule gives it (:mod:`marketcast.backtest.execution`), as its fills are: under ``close`` at bar t+1's
close, so windows 0..k-1; under ``next-open`` at bar t+2's open, after window k + 1 decided, so windows
0..k-2 (the ``delay`` of :meth:`MaxDiffState.add` and :func:`learned_offsets`, the walk-forward pick's lag).

Offsets and search grid
-----------------------
Long (the forecast high move is larger in magnitude than the low move):
    entry (buy limit)   = forecast_low  * (1 + e)      take profit (sell limit) = forecast_high * (1 + x)
Short (otherwise; never for crypto, which is long-only):
    entry (sell limit)  = forecast_high * (1 - e)      take profit (buy limit)  = forecast_low  * (1 - x)
So a positive ``e`` moves the entry towards the market (fills more often) and a positive ``x`` asks for a
bigger take profit, for both sides.

The grid is scaled to the market's recent volatility (``BacktestConfig.maxdiff_grid``, ``--maxdiff-grid``):

* ``"atr"`` (default): ``e = m_e * s_k`` and ``x = m_x * s_k`` where the multiples ``m_e``, ``m_x`` each range
  over :data:`MULTIPLES` = -1.0 .. +1.0 in 0.1 steps and ``s_k`` is window k's ATR% (``WindowView.atr``,
  :func:`marketcast.backtest.views.atr_fraction`): the mean true range (Wilder 1978) of the last
  :data:`~marketcast.backtest.views.ATR_PERIOD` = 14 bars up to the decision bar t, divided by close_t. It is
  computed from bars <= t only, so an offset of 0.5 means half a typical bar's range, whether the bars are
  EURUSD hours (a few basis points) or BTC days (a few percent). What is learned are the multiples: a
  market and its volatility-scaled twin learn the same multiples and offsets scaled accordingly.
* ``"percent"``: the fixed grid of the first version, ``e`` and ``x`` over :data:`OFFSETS` = -1.0 % .. +1.0 %
  in 0.1 % steps (``s_k`` = 1 for every window); decisions equal those of that version exactly.

Either way 21 values each, 441 pairs, and the scores are summed per pair (pair k of one window is pair k of
every other, at that window's own scale). Until ``min_history`` windows have settled the offsets are zero.
Ties go to the pair with the smallest ``|e| + |x|`` (zero first), then the smaller ``e``, then the smaller
``x`` (one pair order for both grids, :data:`_PREFERENCE`). A window whose ATR is 0 (no range at all) has
zero offsets.

:func:`settle_grid` scores the grid with :func:`marketcast.backtest.fills.settle_all`, which equals ``settle``
exactly (tests check it). :func:`learn_all` scores every window of a backtest at once: the offsets are a
sequential rule (window k's depend on windows 0..k-1), but the grid scores they maximise are a running sum of
per-window scores that do not depend on earlier decisions, so a prefix sum over the windows gives every
window's state, added in the same order as :meth:`MaxDiffState.add` (equal to the one-window path exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marketcast.backtest.fills import settle_all
from marketcast.backtest.orders import LONG, SHORT, Bar, Costs, Decision

OFFSETS = np.round(np.arange(-10, 11) * 0.001, 6)  # the "percent" grid: fractions of the price
MULTIPLES = np.round(np.arange(-10, 11) * 0.1, 6)  # the "atr" grid: multiples of the window's ATR%
GRIDS = {"atr": MULTIPLES, "percent": OFFSETS}
GRID_ENTRY, GRID_EXIT = (a.ravel() for a in np.meshgrid(OFFSETS, OFFSETS, indexing="ij"))
PAIRS = {name: tuple(a.ravel() for a in np.meshgrid(g, g, indexing="ij")) for name, g in GRIDS.items()}
_PREFERENCE = np.lexsort((GRID_EXIT, GRID_ENTRY, np.abs(GRID_ENTRY) + np.abs(GRID_EXIT)))
_RANK = np.empty_like(_PREFERENCE)
_RANK[_PREFERENCE] = np.arange(len(_PREFERENCE))
_CHUNK = 512  # windows whose grid is settled at once (arrays of 512 x 441)


def grid_pairs(grid: str) -> tuple[np.ndarray, np.ndarray]:
    """(entry, exit) values of the 441 pairs of ``grid`` ("atr": multiples of ATR%, "percent": fractions)."""
    if grid not in PAIRS:
        raise ValueError(f"maxdiff grid must be one of {', '.join(GRIDS)}, got {grid!r}")
    return PAIRS[grid]


def grid_scale(view, grid: str):
    """What the grid's values are multiplied by for ``view`` (a window or arrays of windows): its ATR% for
    "atr", 1 for "percent"."""
    grid_pairs(grid)
    return view.atr if grid == "atr" else (1.0 if np.ndim(view.atr) == 0 else np.ones_like(view.atr))


def maxdiff_side(high_ret: float, low_ret: float, allow_short: bool) -> int:
    """Long bias when the forecast high move is larger than the low move; short (or flat) otherwise."""
    if abs(high_ret) > abs(low_ret):
        return LONG
    return SHORT if allow_short else 0


def maxdiff_sides(high_ret: np.ndarray, low_ret: np.ndarray, allow_short: bool) -> np.ndarray:
    """:func:`maxdiff_side` of every window."""
    return np.where(np.abs(high_ret) > np.abs(low_ret), LONG, SHORT if allow_short else 0).astype(np.int8)


def maxdiff_prices(side, high, low, e, x):
    """(entry limit, take profit) for forecast prices ``high``/``low`` and offsets ``e``/``x``; any argument may
    be an array (a short wherever ``side`` is not long)."""
    long = np.asarray(side) == LONG
    return np.where(long, low * (1.0 + e), high * (1.0 - e)), np.where(long, high * (1.0 + x), low * (1.0 - x))


@dataclass(frozen=True)
class MaxDiffState:
    """Summed net return of every grid pair over the windows settled so far; ``pending``: the grid returns of
    the last windows whose exit the rule makes wait past the next decision (``delay`` of :meth:`add`), oldest
    first, learnt from once they have settled."""

    scores: np.ndarray
    count: int = 0
    pending: tuple = ()

    @classmethod
    def initial(cls) -> "MaxDiffState":
        return cls(np.zeros(len(GRID_ENTRY)), 0)

    def multiples(self, min_history: int, grid: str = "atr") -> tuple[float, float]:
        """The learned (m_e, m_x) of ``grid``; zero until ``min_history`` windows have settled."""
        entry, exit_ = grid_pairs(grid)
        if self.count < min_history:
            return 0.0, 0.0
        best = np.flatnonzero(self.scores == self.scores.max())
        pick = best[np.argmin(_RANK[best])]
        return float(entry[pick]), float(exit_[pick])

    def offsets(self, min_history: int, grid: str = "atr", scale: float = 1.0) -> tuple[float, float]:
        """The learned (e, x) = (m_e, m_x) * ``scale`` (the window's :func:`grid_scale`)."""
        m_e, m_x = self.multiples(min_history, grid)
        return float(m_e * scale), float(m_x * scale)

    def add(self, grid_net: np.ndarray, delay: int = 0) -> "MaxDiffState":
        """This state with one more window's grid returns, held back while the ``delay`` later windows decide
        (1 under the next-open exit: window k settles at bar t+2's open, after window k + 1 decided)."""
        scores, count, queue = self.scores, self.count, (*self.pending, grid_net)
        while len(queue) > delay:
            scores, count, queue = scores + queue[0], count + 1, queue[1:]
        return MaxDiffState(scores, count, queue)


def settle_grid(
    side: int,
    entry_limit: np.ndarray,
    take_profit: np.ndarray,
    bar: Bar,
    costs: Costs,
    fill_mode: str = "touch",
    same_bar: str = "pessimistic",
    exit_open: float | None = None,
) -> np.ndarray:
    """Net returns of limit-entry/take-profit orders on one bar, over the price arrays (unfilled = 0), exiting
    at ``exit_open`` (bar t+2's open) when given, else at the bar's close."""
    return settle_all(side, entry_limit, take_profit, *bar, costs, fill_mode, same_bar, exit_open).net


def decide_maxdiff(view, state: MaxDiffState, allow_short: bool, min_history: int, grid: str = "atr") -> Decision:
    """The MaxDiff order for bar t+1 with the offsets learned from earlier windows."""
    side = maxdiff_side(view.high_ret, view.low_ret, allow_short)
    if side == 0:
        return Decision(0)
    e, x = state.offsets(min_history, grid, grid_scale(view, grid))
    entry, tp = maxdiff_prices(side, view.price(view.high_ret), view.price(view.low_ret), e, x)
    return Decision(side, entry_limit=float(entry), take_profit=float(tp))


def grid_scores(views, bars: Bar, allow_short: bool, costs: Costs, fill_mode: str, same_bar: str,
                grid: str = "atr", exit_open=None) -> np.ndarray:
    """``[N + 1, pairs]``: row k is the summed grid returns of windows 0..k-1 (row 0 zeros, row N all N) for the
    views of N windows, their bars t+1 (a :class:`Bar` of arrays) and ``exit_open`` (``[N]`` or None, as
    :func:`settle_all`: bar t+2's open where the run's exit rule exits there, NaN at bar t+1's close)."""
    n = len(views)
    exit_open = np.full(n, np.nan) if exit_open is None else np.asarray(exit_open, dtype=np.float64)
    grid_e, grid_x = grid_pairs(grid)
    scale = np.asarray(grid_scale(views, grid), dtype=np.float64)
    side = maxdiff_sides(views.high_ret, views.low_ret, allow_short)
    high, low = views.price(views.high_ret), views.price(views.low_ret)
    out = np.empty((n + 1, len(GRID_ENTRY)))
    out[0] = 0.0
    for a in range(0, n, _CHUNK):
        rows = np.arange(a, min(a + _CHUNK, n))
        net = np.zeros((len(rows), len(GRID_ENTRY)))  # flat windows score 0
        for one_side in (LONG, SHORT):  # each side's orders settled together: one fill rule per call
            at = rows[side[rows] == one_side]
            entry, tp = maxdiff_prices(one_side, high[at, None], low[at, None], scale[at, None] * grid_e,
                                       scale[at, None] * grid_x)
            net[at - a] = settle_all(one_side, entry, tp, *(x[at, None] for x in bars), costs, fill_mode,
                                     same_bar, exit_open[at, None]).net
        np.cumsum(np.concatenate([out[a:a + 1], net]), axis=0, out=out[a:a + len(rows) + 1])  # as MaxDiffState.add
    return out


def learned_offsets(scores: np.ndarray, min_history: int, grid: str = "atr", scale=1.0, delay: int = 0
                    ) -> np.ndarray:
    """``[N, 2]`` (e, x) of :meth:`MaxDiffState.offsets` before each window k, given ``scores`` ``[N, pairs]``
    (row k: windows 0..k-1 summed, :func:`grid_scores`): row k - ``delay`` (the windows settled by window k's
    decision, :meth:`MaxDiffState.add`), the learned multiples times ``scale`` (``[N]`` or a number: each
    window's :func:`grid_scale`)."""
    grid_e, grid_x = grid_pairs(grid)
    settled = np.arange(len(scores)) - delay
    rows = scores[np.maximum(settled, 0)] if delay else scores
    pick = _PREFERENCE[np.argmax(rows[:, _PREFERENCE], axis=1)]  # the first maximum in preference order
    learned = (settled >= min_history)[:, None]
    multiples = np.where(learned, np.column_stack([grid_e[pick], grid_x[pick]]), 0.0)
    return multiples * np.broadcast_to(np.asarray(scale, dtype=np.float64), len(scores))[:, None]


def learn_maxdiff(view, bar_next: Bar, state: MaxDiffState, allow_short: bool, costs: Costs,
                  fill_mode: str, same_bar: str, grid: str = "atr", exit_open: float | None = None,
                  delay: int = 0) -> MaxDiffState:
    """Add the window (view at t, bar t+1, and ``exit_open`` bar t+2's open where the exit rule exits there) to
    the grid scores (each pair at the window's scale), learnt from after ``delay`` more windows decided."""
    side = maxdiff_side(view.high_ret, view.low_ret, allow_short)
    grid_e, grid_x = grid_pairs(grid)
    scale = grid_scale(view, grid)
    entry, tp = maxdiff_prices(side or LONG, view.price(view.high_ret), view.price(view.low_ret),
                               scale * grid_e, scale * grid_x)
    return state.add(settle_grid(side, entry, tp, bar_next, costs, fill_mode, same_bar, exit_open), delay)
