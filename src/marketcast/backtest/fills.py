"""Limit-fill rules: an order fills only if bar t+1 trades through its price.

* ``touch``: a buy limit fills when low <= limit (sell: high >= limit), as backtesting.py.
* ``penetrate``: the bar must trade *through* the limit by at least one basis point, as LEAN's strict rule.
* A bar that opens beyond the limit (a gap) fills at the open, never at the better limit price.
* Entry and take-profit in one bar: OHLC cannot tell which came first. ``pessimistic`` (default) books the
  worse of the two paths; ``nearest`` assumes the extreme nearer the open came first (O-L-H-C or O-H-L-C).
  A take-profit only exists once the entry has filled, so after an entry inside the bar it fills at its
  limit (never at a gap open that happened before the entry), and it fills after all when the bar closes
  beyond it (the price must have crossed it after the entry).
* Where the position exits when no take-profit filled is the execution rule's
  (:mod:`marketcast.backtest.execution`): bar t+1's close, or with ``exit_open`` bar t+2's open (the overnight
  gap included; a short pays the same one bar of borrow: open to next open is one bar).

:func:`settle` settles one decision (the live loop, the paper broker and the reference); :func:`settle_all`
settles many at once with the same float operations (the engine, every window; MaxDiff, every grid pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from marketcast.backtest.orders import FLAT, NO_FILL, Bar, Costs, Decision, Settlement

FILL_MODES = ("touch", "penetrate")
SAME_BAR_MODES = ("pessimistic", "nearest")
PENETRATION = 1e-4  # one basis point


def limit_fill(buy: bool, limit: float, bar: Bar, mode: str = "touch") -> float | None:
    """Fill price of a limit order on ``bar`` (``None`` if it does not fill)."""
    if mode not in FILL_MODES:
        raise ValueError(f"fill mode {mode!r} is not one of {FILL_MODES}")
    margin = PENETRATION if mode == "penetrate" else 0.0
    if buy:
        return min(bar.open, limit) if bar.low <= limit * (1.0 - margin) else None
    return max(bar.open, limit) if bar.high >= limit * (1.0 + margin) else None


def settle(
    decision: Decision,
    bar: Bar,
    costs: Costs,
    fill_mode: str = "touch",
    same_bar: str = "pessimistic",
    size: float = 1.0,
    exit_open: float | None = None,
) -> Settlement:
    """Settle ``decision`` (made at bar t) on bar t+1 with ``size`` of the allowed capital (0: not traded);
    without a take-profit fill it exits at bar t+1's close, or at ``exit_open`` (bar t+2's open) when given."""
    if same_bar not in SAME_BAR_MODES:
        raise ValueError(f"same-bar mode {same_bar!r} is not one of {SAME_BAR_MODES}")
    side = decision.side
    if side == FLAT or not size > 0:
        return NO_FILL
    long = side > 0
    if decision.entry_limit is None:
        entry, entered_at_open = bar.open, True
    else:
        entry = limit_fill(long, decision.entry_limit, bar, fill_mode)
        if entry is None:
            return NO_FILL
        entered_at_open = entry == bar.open

    exit_price, reason = bar.close, "close"
    if decision.take_profit is not None:
        tp = limit_fill(not long, decision.take_profit, bar, fill_mode)
        if tp is not None:
            if entered_at_open:
                exit_price, reason = tp, "take_profit"
            else:
                exit_price, reason = _same_bar(long, decision.take_profit, entry, bar, same_bar)
    if reason == "close" and exit_open is not None:
        exit_price, reason = exit_open, "next_open"

    gross = side * (exit_price / entry - 1.0)
    return Settlement(
        filled=True,
        entry_price=entry,
        exit_price=exit_price,
        exit_reason=reason,
        gross_return=gross,
        fees=2.0 * costs.per_side + (costs.borrow if side < 0 else 0.0),
        size=float(size),
    )


def _same_bar(long: bool, tp: float, entry: float, bar: Bar, same_bar: str) -> tuple[float, str]:
    """Exit of an entry filled inside the bar (at ``entry``) whose take-profit limit ``tp`` the bar also traded.

    A take-profit already marketable at the entry fills there. Else, entry extreme first: it fills at ``tp``;
    take-profit extreme first: it fills only if the price comes back through ``tp`` after the entry, i.e.
    when the close is beyond it; else the position exits at the close.
    """
    if (tp <= entry) if long else (tp >= entry):
        return entry, "take_profit"
    after_entry = min(tp, bar.close) if long else max(tp, bar.close)  # the path with the entry second
    if same_bar == "nearest":
        entry_extreme_first = (bar.open - bar.low) <= (bar.high - bar.open) if long else (
            (bar.high - bar.open) <= (bar.open - bar.low)
        )
        exit_price = tp if entry_extreme_first else after_entry
    else:
        exit_price = after_entry  # the worse of both paths: tp itself is never worse than after_entry
    return (exit_price, "take_profit") if exit_price == tp else (exit_price, "close")


# --- every window at once --------------------------------------------------------------------------------

CLOSE, TAKE_PROFIT, NEXT_OPEN, WASH, DAY_TRADE = 1, 2, 3, 4, 5  # Fills.reason codes (0: no fill)
REASONS = {CLOSE: "close", TAKE_PROFIT: "take_profit", NEXT_OPEN: "next_open", WASH: "refused_wash",
           DAY_TRADE: "refused_day_trade"}


@dataclass(frozen=True)
class Fills:
    """Settlements of many orders as arrays (the vectorised engine's record): ``filled``, ``entry_price`` and
    ``exit_price`` (NaN where unfilled), ``reason`` (0 unfilled, :data:`CLOSE`, :data:`TAKE_PROFIT`), ``gross``
    and ``fees`` (0 where unfilled), per unit of the allowed capital (:data:`NEXT_OPEN`: exited at bar t+2's open;
    :data:`WASH`, not filled: the entry was refused as a wash, :meth:`refused`); ``size`` the part of it each trade used
    (None: 1.0 everywhere, fixed sizing). ``fills[k]`` is the :class:`Settlement` that :func:`settle` gives."""

    filled: np.ndarray
    entry_price: np.ndarray
    exit_price: np.ndarray
    reason: np.ndarray
    gross: np.ndarray
    fees: np.ndarray
    size: np.ndarray | None = None

    @property
    def net(self) -> np.ndarray:
        """Net return on the allowed capital: ``size * (gross - fees)``."""
        return self.gross - self.fees if self.size is None else self.size * (self.gross - self.fees)

    def sized(self, size: np.ndarray) -> "Fills":
        """These fills with each order's ``size`` ``[N]`` of the capital (kept as decided, filled or not); a
        size of 0 is no trade (as :func:`settle` with ``size=0``)."""
        size = np.asarray(size, dtype=np.float64)
        return self._only(self.filled & (size > 0), np.where(self.filled, 0, self.reason), size)

    def refused(self, refused: np.ndarray, reason: int = WASH) -> "Fills":
        """These fills with the ``refused`` orders ``[N]`` not traded (``reason``: :data:`WASH`, or
        :data:`DAY_TRADE` for an entry the pattern-day-trader rule refuses; sizes kept as decided)."""
        refused = np.asarray(refused, dtype=bool)
        return self._only(self.filled & ~refused, np.where(refused, reason, self.reason), self.size)

    def _only(self, traded: np.ndarray, reason_else: np.ndarray, size: np.ndarray | None) -> "Fills":
        nan = np.float64(np.nan)
        return Fills(traded, np.where(traded, self.entry_price, nan), np.where(traded, self.exit_price, nan),
                     np.where(traded, self.reason, reason_else).astype(np.int8), np.where(traded, self.gross, 0.0),
                     np.where(traded, self.fees, 0.0), size)

    def __len__(self) -> int:
        return len(self.filled)

    def __iter__(self) -> Iterator[Settlement]:
        return (self[k] for k in range(len(self)))

    def __getitem__(self, k: int) -> Settlement:
        if not self.filled[k]:
            return NO_FILL
        return Settlement(True, float(self.entry_price[k]), float(self.exit_price[k]), REASONS[int(self.reason[k])],
                          float(self.gross[k]), float(self.fees[k]), 1.0 if self.size is None else float(self.size[k]))


def _by_side(long: np.ndarray):
    """``pick(when_long, when_short)``: the first's values where ``long``, the second's elsewhere, computing
    only the rule of a side that occurs (MaxDiff's grid settles one side per call)."""
    if long.all():
        return lambda when_long, when_short: when_long()
    if not long.any():
        return lambda when_long, when_short: when_short()
    return lambda when_long, when_short: np.where(long, when_long(), when_short())


def settle_all(side, entry_limit, take_profit, bar_open, bar_high, bar_low, bar_close, costs: Costs,
               fill_mode: str = "touch", same_bar: str = "pessimistic", exit_open=None) -> Fills:
    """:func:`settle` of many orders at once, element by element over broadcast arrays, with the same float
    operations (so equal to it exactly): ``side`` in {-1, 0, 1}, ``entry_limit`` NaN for a market entry at the
    open, ``take_profit`` NaN for none, the OHLC of each order's bar t+1, and ``exit_open`` (None, or NaN
    where the exit is bar t+1's close) bar t+2's open where the exit is there."""
    if fill_mode not in FILL_MODES:
        raise ValueError(f"fill mode {fill_mode!r} is not one of {FILL_MODES}")
    if same_bar not in SAME_BAR_MODES:
        raise ValueError(f"same-bar mode {same_bar!r} is not one of {SAME_BAR_MODES}")
    # not broadcast up front: MaxDiff's grid passes each window's bar as [N, 1] against [N, 441] prices, and a
    # rule that reads the bar alone is computed once a window (the same values: element by element either way)
    side, limit, tp, o, h, lo, c, o2 = (np.asarray(a) for a in (
        side, entry_limit, take_profit, bar_open, bar_high, bar_low, bar_close,
        np.nan if exit_open is None else exit_open))
    shape = np.broadcast_shapes(*(a.shape for a in (side, limit, tp, o, h, lo, c, o2)))
    margin = PENETRATION if fill_mode == "penetrate" else 0.0
    long = side > 0
    by_side = _by_side(long)
    market = np.isnan(limit)
    with np.errstate(invalid="ignore"):
        limit = np.where(market, o, limit)
        reached = by_side(lambda: lo <= limit * (1.0 - margin), lambda: h >= limit * (1.0 + margin))
        filled = np.broadcast_to((side != 0) & (market | reached), shape)  # every field of the fills has the shape
        entry = np.where(market, o, by_side(lambda: np.minimum(o, limit), lambda: np.maximum(o, limit)))
        at_open = entry == o
        # False where tp is NaN
        tp_hit = by_side(lambda: h >= tp * (1.0 + margin), lambda: lo <= tp * (1.0 - margin))
        tp_fill = by_side(lambda: np.maximum(o, tp), lambda: np.minimum(o, tp))
        # an entry inside the bar: the take profit fills after it (see _same_bar)
        marketable = by_side(lambda: tp <= entry, lambda: tp >= entry)
        after_entry = by_side(lambda: np.minimum(tp, c), lambda: np.maximum(tp, c))
        if same_bar == "nearest":
            entry_first = by_side(lambda: (o - lo) <= (h - o), lambda: (h - o) <= (o - lo))
            inside = np.where(entry_first, tp, after_entry)
        else:
            inside = after_entry
        inside = np.where(marketable, entry, inside)
        exit_price = np.where(tp_hit, np.where(at_open, tp_fill, inside), c)
        took_profit = tp_hit & (at_open | marketable | (exit_price == tp))
        at_next_open = ~took_profit & ~np.isnan(o2)
        exit_price = np.where(at_next_open, o2, exit_price)
        gross = side * (exit_price / entry - 1.0)
    nan = np.float64(np.nan)
    return Fills(
        filled=filled.copy(),
        entry_price=np.where(filled, entry, nan),
        exit_price=np.where(filled, exit_price, nan),
        reason=np.where(filled, np.where(took_profit, TAKE_PROFIT, np.where(at_next_open, NEXT_OPEN, CLOSE)),
                        0).astype(np.int8),
        gross=np.where(filled, gross, 0.0),
        fees=np.where(filled, 2.0 * costs.per_side + np.where(side < 0, costs.borrow, 0.0), 0.0),
    )
