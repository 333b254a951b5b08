"""The eight strategies over every window at once: the engine's hot path, arrays in and arrays out.

Each rule here is the array form of its one-window rule in :mod:`marketcast.backtest.strategies` (which the
live planner steps through one bar at a time) and gives exactly its decisions, fills and state; tests walk
both window by window. The rules that carry state from window to window are sequential in the one-window
form; here is why each still needs no loop over windows:

* ``unprofit_shutdown``: its state (was ``simple``'s last call right?) depends on the forecasts and bars only,
  never on its own trades, so it is the array of those calls shifted by one window.
* ``maxdiff``: window k's offsets maximise the grid scores of windows 0..k-1 (0..k-2 under the next-open exit,
  whose window k-1 settles after window k decided), a running sum of per-window scores that do not depend on
  earlier decisions: a prefix sum (:func:`marketcast.backtest.maxdiff.grid_scores`).
* The walk-forward pick (:mod:`marketcast.backtest.selection`) runs after all strategies settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from marketcast.backtest.fills import Fills, settle_all
from marketcast.backtest.maxdiff import (
    MaxDiffState, grid_scale, grid_scores, learned_offsets, maxdiff_prices, maxdiff_sides,
)
from marketcast.backtest.orders import FLAT, LONG, SHORT, Bar, Decision
from marketcast.backtest.strategies import StrategyParams, initial_state
from marketcast.backtest.views import ForecastViews

NONE = np.nan  # an order without an entry limit (market at the open) or without a take profit


@dataclass(frozen=True)
class Orders:
    """The decisions of many windows: ``side`` in {-1, 0, 1}, ``entry_limit`` and ``take_profit`` (NaN: none).
    ``orders[k]`` is window k's :class:`Decision`."""

    side: np.ndarray
    entry_limit: np.ndarray
    take_profit: np.ndarray

    @classmethod
    def market(cls, side: np.ndarray) -> "Orders":
        """Market orders entered at the open and closed at the close."""
        none = np.full(len(side), NONE)
        return cls(np.asarray(side, dtype=np.int8), none, none)

    def __len__(self) -> int:
        return len(self.side)

    def __iter__(self) -> Iterator[Decision]:
        return (self[k] for k in range(len(self)))

    def __getitem__(self, k: int) -> Decision:
        side = int(self.side[k])
        if side == FLAT:
            return Decision(FLAT)
        entry, tp = float(self.entry_limit[k]), float(self.take_profit[k])
        return Decision(side, None if entry != entry else entry, None if tp != tp else tp)


@dataclass(frozen=True)
class Walk:
    """One strategy over every window: its orders, their fills, MaxDiff's offsets ``[N, 2]`` (else None) and
    the state after the last window (what :func:`marketcast.backtest.strategies.step` would have carried)."""

    orders: Orders
    fills: Fills
    offsets: np.ndarray | None
    final_state: Any


def _side(long: np.ndarray, p: StrategyParams) -> np.ndarray:
    return np.where(long, LONG, SHORT if p.allow_short else FLAT)


def _at(side: np.ndarray, long_price: np.ndarray, short_price: np.ndarray) -> np.ndarray:
    """A price per window by side: ``long_price`` for a long, ``short_price`` for a short, none when flat."""
    return np.where(side == LONG, long_price, np.where(side == SHORT, short_price, NONE))


def simple(v: ForecastViews, p: StrategyParams) -> Orders:
    return Orders.market(_side(v.close_ret > 0, p))


def all_signals(v: ForecastViews, p: StrategyParams) -> Orders:
    up = (v.close_ret > 0) & (v.high_ret > 0) & (v.low_ret > 0)
    down = (v.close_ret < 0) & (v.high_ret < 0) & (v.low_ret < 0) & p.allow_short
    return Orders.market(np.where(up, LONG, np.where(down, SHORT, FLAT)))


def buy_hold(v: ForecastViews, p: StrategyParams) -> Orders:
    return Orders.market(np.full(len(v), LONG))


def ci_guard(v: ForecastViews, p: StrategyParams) -> Orders:
    centre = 0.5 * (v.band_low + v.band_high)
    half = 0.5 * (v.band_high - v.band_low) * p.ci_multiplier
    long = (v.close_ret > 0) & (centre - half > 0)
    short = (v.close_ret <= 0) & (centre + half < 0) & p.allow_short
    return Orders.market(np.where(long, LONG, np.where(short, SHORT, FLAT)))


def entry_takeprofit(v: ForecastViews, p: StrategyParams) -> Orders:
    side = _side(v.close_ret > 0, p)
    return Orders(side.astype(np.int8), np.full(len(v), NONE), _at(side, v.price(v.high_ret), v.price(v.low_ret)))


def highlow(v: ForecastViews, p: StrategyParams) -> Orders:
    side = _side(v.close_ret > 0, p)
    return Orders(side.astype(np.int8), _at(side, v.price(v.low_ret), v.price(v.high_ret)), np.full(len(v), NONE))


STATELESS: dict[str, Callable[[ForecastViews, StrategyParams], Orders]] = {
    "simple": simple, "all_signals": all_signals, "buy_hold": buy_hold, "ci_guard": ci_guard,
    "entry_takeprofit": entry_takeprofit, "highlow": highlow,
}


def unprofit_shutdown(v: ForecastViews, bars: Bar, p: StrategyParams) -> tuple[Orders, bool]:
    """``simple``, flat after a window where ``simple``'s direction was wrong; the state after the last window."""
    right = np.where(v.close_ret > 0, LONG, SHORT) * (bars.close - bars.open) > 0
    trade = np.concatenate([[True], right[:-1]])  # no settled window yet: trade
    return Orders.market(np.where(trade, _side(v.close_ret > 0, p), FLAT)), bool(right[-1])


def maxdiff(v: ForecastViews, bars: Bar, p: StrategyParams, exit_open: np.ndarray | None = None,
            state: bool = True) -> tuple[Orders, np.ndarray, MaxDiffState | None]:
    """MaxDiff's orders with each window's offsets learned from the windows settled by its decision, each
    scored with the exit the run's rule gives it (``exit_open``, as :func:`walk`); the offsets; the state (None
    without ``state``: the state scores each of its pending windows again, one call each)."""
    scores = grid_scores(v, bars, p.allow_short, p.costs, p.fill_mode, p.same_bar, p.maxdiff_grid, exit_open)
    lag = min(p.settle_delay, len(v))
    offsets = learned_offsets(scores[:-1], p.maxdiff_min_history, p.maxdiff_grid, grid_scale(v, p.maxdiff_grid),
                              lag)
    side = maxdiff_sides(v.high_ret, v.low_ret, p.allow_short)
    entry, tp = maxdiff_prices(side, v.price(v.high_ret), v.price(v.low_ret), offsets[:, 0], offsets[:, 1])
    flat = side == FLAT
    orders = Orders(side, np.where(flat, NONE, entry), np.where(flat, NONE, tp))
    if not state:
        return orders, offsets, None
    n = len(v) - lag  # windows settled after the last one: the rest wait in the state, as MaxDiffState.add
    pending = tuple(grid_scores(v[k:k + 1], Bar(*(x[k:k + 1] for x in bars)), p.allow_short, p.costs, p.fill_mode,
                                p.same_bar, p.maxdiff_grid, None if exit_open is None else exit_open[k:k + 1])[1]
                    for k in range(n, len(v)))
    return orders, offsets, MaxDiffState(scores[n].copy(), n, pending)


def decision_sides(name: str, views: ForecastViews, p: StrategyParams) -> np.ndarray:
    """``[N]`` the side each window's forecast asks strategy ``name`` for, its state aside (``unprofit_shutdown``:
    ``simple``'s call; ``maxdiff``: its bias from the forecast high and low): what the Monte Carlo close calls
    (:mod:`marketcast.backtest.montecarlo`) compare across batches of samples."""
    if name == "maxdiff":
        return maxdiff_sides(views.high_ret, views.low_ret, p.allow_short)
    return STATELESS["simple" if name == "unprofit_shutdown" else name](views, p).side


def walk(name: str, views: ForecastViews, bars: Bar, p: StrategyParams, exit_open: np.ndarray | None = None,
         state: bool = True) -> Walk:
    """Strategy ``name`` decided on every view and settled on its bar t+1 (``bars``: a :class:`Bar` of arrays
    ``[N]``), starting from the strategy's initial state; ``exit_open`` ``[N]``: bar t+2's open where the
    execution rule exits there (NaN: at bar t+1's close; :mod:`marketcast.backtest.execution`). MaxDiff learns
    its offsets from the grid returns of the windows settled by each decision, exiting where these fills do.
    Without ``state`` (the Monte Carlo batches, which decide nothing next) MaxDiff's final state is None."""
    offsets, final = None, initial_state(name)
    if name == "maxdiff":
        orders, offsets, final = maxdiff(views, bars, p, exit_open, state)
    elif name == "unprofit_shutdown":
        orders, final = unprofit_shutdown(views, bars, p)
    else:
        orders = STATELESS[name](views, p)
    fills = settle_all(orders.side, orders.entry_limit, orders.take_profit, *bars, p.costs, p.fill_mode, p.same_bar,
                       exit_open)
    return Walk(orders, fills, offsets, final)
