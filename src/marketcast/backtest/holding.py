"""Holding (``--hold``, ``hold`` in the config): the walk-forward pick's position is held while the current pick's
decision stays on its side, as ``trade replay --hold`` trades it (``LoopConfig.hold_agreeing``,
:mod:`marketcast.trade.loop.cycle` and :mod:`marketcast.trade.loop.topup`; the paper broker that holds as Alpaca
does, :mod:`marketcast.trade.venues.holding`).

Window k decides at bar t (after it closes) and trades on bar t+1:

* Flat at bar t: window k's decision enters on bar t+1 as every backtest enters (:func:`~.fills.settle`: at the
  open, or at its limit). Its take-profit counts in the entry bar by the backtest's rule where the broker attaches
  it to the entry (a stock's OTO leg); where the loop sends it apart once it sees the fill (crypto, whose orders
  have no legs) it goes out while bar t+1 trades, so it fills there only if the bar closes beyond it
  (:func:`~marketcast.trade.venues.holding.late_price`). What the bar leaves open is held, marked at its close.
* Holding at bar t and window k's decision is on the position's side: held. Nothing is entered; the position is
  bought up to the decision's size when it is short of it by more than :data:`TOP_UP_BAND` of it (a market order
  at bar t+1's open, paying its side's costs: :mod:`~marketcast.trade.loop.topup`). Costs are paid only when the
  position changes.
* Holding at bar t and window k's decision is flat, the other side, or no pick: the position leaves, and window k
  enters nothing (the loop does not enter a symbol it holds or works):

  - ``--exit next-open``, and every bar without a closing auction after it (24/7 bars, an intraday stock bar
    before the session's last): at bar t+1's open (the close sent after bar t, queued to the open);
  - ``--exit close`` when bar t+1 ends a stock session: by a market-on-close order at bar t+1's close, its
    take-profit resting until then (:mod:`marketcast.backtest.execution`).

* A take-profit rests after its entry bar while the position is held where it lives on at the broker: a crypto
  one (``gtc``, sent apart), and under ``--exit close`` a stock's (a ``gtc`` leg, kept working until the cls
  order goes out). A top-up cancels a resting take-profit first (the broker refuses a market order that could
  trade against the account's own opposite order) and a new one for the whole position, at the top-up's
  decision's take-profit (or the old one's price), goes out once it filled, while the bar trades: it fills in
  that bar only at a close beyond it (:func:`~marketcast.trade.venues.holding.late_price`). A resting
  take-profit fills on a later bar that trades through it, at its limit or at that bar's open on a gap
  (:func:`~.fills.limit_fill`). Under ``--exit next-open`` a stock's leg is a ``day`` order
  and ends with its entry bar: the held position has no resting exit.

Each window's return is what the book earned over its bar t+1: the held position marked from bar t's close to
bar t+1's close (or to its exit), less what changed hands in it (each side ``per_side`` of the entry notional; a
short's borrow for every bar held, at least one, on covering, as the paper broker books it). The last window's
open position is marked at its close (exit reason ``marked``). Nothing here reads a bar after window k's bar
t+1: a decision made at bar t changes what happens from bar t+1 on only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marketcast.backtest.costs import Costs
from marketcast.backtest.execution import check_exit
from marketcast.backtest.fills import CLOSE, NEXT_OPEN, TAKE_PROFIT, limit_fill, settle
from marketcast.backtest.orders import FLAT, Bar, Decision

TOP_UP_BAND = 0.10
"""A held position is bought up only when it is short of its target by more than this fraction of the target
(the one band: the loop's top-ups, :mod:`marketcast.trade.loop.topup`, import it, so ``backtest --hold`` scores
what the loop buys). The target moves with the bar's close and the equity every bar, so without a band a position
would be traded a little at nearly every bar (each a cancel of its take-profit, a fee and a new take-profit); 10 %
keeps a top-up for a real gap, as a rebalancing band does (LEAN's ``SetHoldings`` trades any difference; its
portfolio construction models skip changes below a minimum order margin for the same reason)."""

MARKED = 5  # a trade still open after the last window, marked at its close (Fills' reason codes go to 4)
REASON_NAMES = {CLOSE: "close", TAKE_PROFIT: "take_profit", NEXT_OPEN: "next_open", MARKED: "marked"}


@dataclass(frozen=True)
class HeldTrades:
    """One row per held trade: ``side``, ``entry_window`` / ``exit_window`` (the windows whose bar t+1 it entered
    and left on), ``entry_price`` (the first fill), ``exit_price``, ``reason`` (:data:`REASON_NAMES`), ``gross``
    (``side * (exit / entry - 1)`` of the first fill) and ``top_ups`` (how many times it was bought up)."""

    side: np.ndarray
    entry_window: np.ndarray
    exit_window: np.ndarray
    entry_price: np.ndarray
    exit_price: np.ndarray
    reason: np.ndarray
    gross: np.ndarray
    top_ups: np.ndarray

    def __len__(self) -> int:
        return len(self.side)


@dataclass(frozen=True)
class Held:
    """The walk-forward pick held: per window ``returns`` (net, on the book's equity), ``filled`` (a position
    was open during the window's bar) and ``entered`` (the window's decision opened one), and the ``trades``."""

    returns: np.ndarray
    filled: np.ndarray
    entered: np.ndarray
    trades: HeldTrades


def describe(rule: str) -> str:
    """``--hold`` in one sentence, as every report names it."""
    where = "at the next bar's open" if check_exit(rule) == "next-open" else \
        "by the session's close (a 24/7 bar: at the next open)"
    return ("hold: the walk-forward pick's position is held while its decision stays on its side, bought up beyond "
            f"a {TOP_UP_BAND:.0%} band, costs only when it changes; it leaves {where} once the decision turns")


def resting(rule: str, apart: bool) -> bool:
    """Whether a take-profit rests after its entry bar while the position is held (module docstring)."""
    return apart or check_exit(rule) == "close"


@dataclass
class _Position:
    """The held position: ``side``, ``units`` per unit of starting equity, their ``avg`` price, the ``first`` fill,
    the resting take-profit ``tp`` (NaN: none), the window it ``opened`` on and its ``ups`` (top-ups)."""

    side: int
    units: float
    avg: float
    first: float
    tp: float
    opened: int
    ups: int = 0

    def row(self, k: int, price: float, reason: int) -> tuple:
        return (self.side, self.opened, k, self.first, price, reason, self.side * (price / self.first - 1.0),
                self.ups)


def hold(side, entry_limit, take_profit, size, bars: tuple, costs: Costs, rule: str, auction, apart: bool,
         fill_mode: str = "touch", same_bar: str = "pessimistic") -> Held:
    """Hold the decisions of consecutive windows (module docstring). ``side`` / ``entry_limit`` /
    ``take_profit`` / ``size`` ``[N]``: each window's decision (NaN: market entry, no take-profit; a size of 0 or
    a flat side enters nothing); ``bars`` ``(open, high, low, close)``, each ``[N + 1]``: bar t of window 0, then
    each window's bar t+1; ``auction`` ``[N]``: window k's bar t+1 ends a stock session
    (:func:`marketcast.backtest.execution.session_last`); ``apart``: the broker does not attach take-profits to
    entries (crypto)."""
    o, h, lo, c = (np.asarray(a, dtype=np.float64) for a in bars)
    n = len(side)
    rests = resting(rule, apart)
    close_auction = np.asarray(auction, dtype=bool) & (rule == "close")
    returns, filled, entered = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    rows: list[tuple] = []
    pos: _Position | None = None
    equity = 1.0
    for k in range(n):
        b = k + 1  # window k's bar t+1 in ``bars``
        bar = Bar(o[b], h[b], lo[b], c[b])
        s = int(side[k]) if size[k] > 0 else FLAT  # sized to nothing: flat, as the planner trades it
        tp = float(take_profit[k])
        if pos is not None:
            filled[k] = True
            pnl, left = _held_bar(pos, s, float(size[k]) * equity, tp, bar, c[k], k - pos.opened, costs, rests,
                                  bool(close_auction[k]), fill_mode)
            if left is not None:
                rows.append(pos.row(k, *left))
                pos = None
        elif s != FLAT:
            limit = float(entry_limit[k])
            got = settle(Decision(s, None if limit != limit else limit, None if tp != tp or apart else tp), bar,
                         costs, fill_mode, same_bar)
            pnl = 0.0
            if got.filled:
                entered[k] = filled[k] = True
                pos = _Position(s, float(size[k]) * equity / got.entry_price, got.entry_price, got.entry_price, tp,
                                k)
                pnl, left = _entry_bar(pos, got, bar, costs, apart)
                if left is not None:
                    rows.append(pos.row(k, *left))
                    pos = None
        else:
            pnl = 0.0
        returns[k] = pnl / equity
        equity += pnl
    if pos is not None:
        rows.append(pos.row(n - 1, c[n], MARKED))
    cols = list(zip(*rows)) if rows else [()] * 8
    kinds = (np.int8, np.int64, np.int64, np.float64, np.float64, np.int8, np.float64, np.int64)
    return Held(returns, filled, entered, HeldTrades(*(np.array(col, dtype=t) for col, t in zip(cols, kinds))))


def _held_bar(pos: _Position, side: int, target_value: float, tp: float, bar: Bar, mark: float, bars_held: int,
              costs: Costs, rests: bool, auction: bool, fill_mode: str) -> tuple[float, tuple | None]:
    """What ``pos`` (held at bar t, marked at ``mark``, its close, entered ``bars_held`` bars before ``bar``)
    earns in ``bar`` (t+1) under the decision ``side`` at t of ``target_value`` (its size times the equity) and
    take-profit ``tp``: ``(pnl, (exit price, reason) or None)``."""
    topped = False
    if side == pos.side:  # held: bought up to the decision's size beyond the band, at the open
        target = target_value / mark
        if target > 0 and target - pos.units > TOP_UP_BAND * target:
            add = target - pos.units
            pnl = -costs.per_side * add * bar.open + pos.side * add * (mark - bar.open)  # marked from its price
            pos.avg = (pos.units * pos.avg + add * bar.open) / target
            pos.units, pos.ups, topped = target, pos.ups + 1, True
            if rests and tp == tp:  # a top-up's new take-profit covers the whole position, sent while it trades
                pos.tp = tp
        else:
            pnl = 0.0
        price, reason = _resting_exit(pos.side, pos.tp if rests else np.nan, bar, fill_mode, late=rests and topped)
    elif auction:  # a market-on-close order by the close, the take-profit resting until then
        pnl = 0.0
        price, reason = _resting_exit(pos.side, pos.tp if rests else np.nan, bar, fill_mode)
        if reason is None:
            price, reason = bar.close, CLOSE
    else:  # the close sent after bar t fills at bar t+1's open
        pnl, price, reason = 0.0, bar.open, NEXT_OPEN
    if reason is None:
        return pnl + pos.side * pos.units * (bar.close - mark), None
    return pnl + pos.side * pos.units * (price - mark) - _exit_costs(pos, costs, bars_held), (price, reason)


def _entry_bar(pos: _Position, got, bar: Bar, costs: Costs, apart: bool) -> tuple[float, tuple | None]:
    """What the position entered at ``got.entry_price`` earns in its entry bar: ``(pnl, (exit price, reason) or
    None)`` (a take-profit filled there; a crypto one, sent once the entry filled, only at a close beyond it)."""
    pnl = -costs.per_side * pos.units * pos.first
    if apart:
        left = (pos.tp, TAKE_PROFIT) if pos.tp == pos.tp and _beyond(pos.side, pos.tp, bar.close) else None
    else:
        left = (got.exit_price, TAKE_PROFIT) if got.exit_reason == "take_profit" else None
    if left is None:
        return pnl + pos.side * pos.units * (bar.close - pos.first), None
    return pnl + pos.side * pos.units * (left[0] - pos.first) - _exit_costs(pos, costs, 0), left


def _resting_exit(pos: int, tp: float, bar: Bar, fill_mode: str, late: bool = False) -> tuple[float | None, int | None]:
    """Where a resting take-profit ``tp`` (NaN: none) fills in ``bar`` (None, None: it does not). ``late``: sent
    while the bar traded, it fills only at a close beyond it."""
    if tp != tp:
        return None, None
    if late:
        return (tp, TAKE_PROFIT) if _beyond(pos, tp, bar.close) else (None, None)
    price = limit_fill(pos < 0, tp, bar, fill_mode)
    return (None, None) if price is None else (price, TAKE_PROFIT)


def _beyond(pos: int, tp: float, close: float) -> bool:
    """A take-profit sent while the bar traded fills at a close at or beyond it (the paper broker's
    :func:`~marketcast.trade.venues.holding.late_price`)."""
    return close >= tp if pos > 0 else close <= tp


def _exit_costs(pos: _Position, costs: Costs, bars_held: int) -> float:
    """What leaving costs, per unit of starting equity: ``per_side`` of the entry notional and, covering a short,
    its borrow for every bar held (at least one), as the paper broker books it
    (:func:`marketcast.trade.venues.holding.book_fill`)."""
    cost = costs.per_side * pos.units * pos.avg
    return cost + (pos.units * pos.avg * costs.borrow * max(1, bars_held) if pos.side < 0 else 0.0)
