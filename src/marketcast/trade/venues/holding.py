"""How the paper broker holds: positions and working orders that live across bars, as Alpaca keeps them.

The embedded paper broker (:mod:`marketcast.trade.venues.paper`) settles every order within its bar by the
backtest's rule unless it is made with ``hold=True``; then this module plays each bar through what is working
the way the venue does (https://docs.alpaca.markets/docs/orders-at-alpaca):

* "Time in Force": a ``day`` order not filled by the close ends ``expired``; a ``gtc`` order works on (crypto
  takes ``gtc``/``ioc`` only, https://docs.alpaca.markets/docs/crypto-orders).
* "OTO Orders" / "Bracket Orders": a stock entry's take-profit is a leg of its own, ``held`` until the entry
  fills, then working; it inherits the entry's time in force. Crypto has no multi-leg orders, so the loop sends
  its take-profit itself once it sees the fill (:meth:`~marketcast.trade.loop.reconcile.Reconciler.housekeep`).
* GTC lifetime: Alpaca's pages give none ("Time in Force" says only "good until canceled"); issue 43 names the
  90 days after which US brokers commonly cancel an unfilled ``gtc`` order (moomoo: "After 90 days, any unfilled
  GTC orders will be cancelled"), and the fake Alpaca ends them so: here too a ``gtc`` order still working
  :data:`GTC_DAYS` days after its submission ends ``expired`` when the next bar opens (:func:`lapsed`); a
  position held on that long then has no take-profit until the loop closes it.
* "Time in Force", ``cls``: a market-on-close order, "eligible to execute only in the market closing auction"
  (stocks; crypto takes ``gtc``/``ioc`` only), fills at the bar's close. "CLS orders submitted after 3:50pm but
  before 7:00pm ET will be rejected": the paper broker's clock has no minutes, so it takes a ``cls`` only while
  a bar of the symbol trades (between the bar's halves, before its cutoff) and refuses one sent at any other
  time (:data:`CLS_LATE`: after a bar's close, the cutoff is past). A replay's look between the halves is
  taken as before the cutoff; ``trade run`` checks the wall clock (:func:`marketcast.trade.risk.freshness.cls_cutoff`).
* Positions carry from bar to bar with their average entry price (weighted over what added to them, unchanged
  by what reduced them; the position entity), marked at the last close.

A bar is played in two halves so the loop can look between them, as the live supervisor's watches do between
two bar closes: :func:`open_half` fills what was working when the bar opened (an entry with its leg by
:func:`marketcast.backtest.fills.settle`, so an order whose exit fills within the bar is settled exactly as the
backtest settles it; any other order by :func:`~marketcast.backtest.fills.limit_fill`, a market order at the
open), then the loop looks (a crypto take-profit goes out), then :func:`close_half` fills what was sent during the
bar only if the bar closes beyond its limit (the price must cross it after it was sent: the backtest's
pessimistic same-bar rule; a market order at the close) and ends the day orders.

Cash moves with each fill; the fee is ``per_side`` of the entry notional on each side and a short pays its
borrow per bar held on covering, as :class:`~marketcast.backtest.orders.Costs` charges them, so a round trip in
one bar books the backtest's net return to the cent.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from marketcast.backtest.fills import limit_fill, settle
from marketcast.backtest.orders import LONG, SHORT, Bar, Costs, Decision
from marketcast.trade.types import BUY, MARKET, OPEN_STATUSES

WORKING = OPEN_STATUSES + ("held",)
GTC_DAYS = 90  # an unfilled gtc order ends this many days after its submission (the module's docstring)
CLS_LATE = "CLS orders submitted after 3:50pm but before 7:00pm ET will be rejected"  # orders-at-alpaca, Time in Force


@dataclass(frozen=True)
class Booked:
    """One execution as the broker books it: the signed quantity, its price and what it cost (fee + borrow)."""

    signed: float
    price: float
    cost: float


def book_fill(c, symbol: str, side: str, qty: float, price: float, costs: Costs, ts: str,
              bars_held: int) -> Booked:
    """Move the position of ``symbol`` by one fill and return what it did to cash. The part that reduces the
    position pays ``per_side`` on its entry notional (its average price) and, covering a short, the borrow for
    ``bars_held`` bars; the part that opens pays ``per_side`` on its own notional."""
    row = c.execute("SELECT qty, avg, opened_at FROM positions WHERE symbol=?", (symbol,)).fetchone()
    held, avg = (row[0], row[1]) if row else (0.0, 0.0)
    signed = qty if side == BUY else -qty
    reducing = 0.0 if held == 0 or (held > 0) == (signed > 0) else min(abs(signed), abs(held))
    opening = abs(signed) - reducing
    cost = costs.per_side * (reducing * avg + opening * price)
    if held < 0 and reducing:
        cost += reducing * avg * costs.borrow * max(1, bars_held)
    new = held + signed
    if abs(new) < 1e-12:
        c.execute("DELETE FROM positions WHERE symbol=?", (symbol,))
    elif held == 0 or (held > 0) != (new > 0):  # opened, or flipped through zero: the rest opens here
        c.execute("INSERT OR REPLACE INTO positions VALUES (?,?,?,?)", (symbol, new, price, ts))
    elif opening:
        c.execute("UPDATE positions SET qty=?, avg=? WHERE symbol=?",
                  (new, (abs(held) * avg + opening * price) / abs(new), symbol))
    else:
        c.execute("UPDATE positions SET qty=? WHERE symbol=?", (new, symbol))
    return Booked(signed, price, cost)


def lapsed(o, stamp: pd.Timestamp) -> bool:
    """Whether ``gtc`` order ``o`` is :data:`GTC_DAYS` days old or more at bar ``stamp`` (then it ends there)."""
    return o["time_in_force"] == "gtc" and stamp - pd.Timestamp(o["submitted_at"]) >= pd.Timedelta(days=GTC_DAYS)


def open_price(o, bar: Bar, fill_mode: str) -> float | None:
    """Where an order working since the bar opened fills: a market order at the open, a limit when the bar
    trades through it (at the open on a gap)."""
    if o["type"] == MARKET:
        return bar.open
    return limit_fill(o["side"] == BUY, o["limit_price"], bar, fill_mode)


def entry_with_leg(o, leg, bar: Bar, costs: Costs, fill_mode: str, same_bar: str) -> tuple[float, float | None] | None:
    """An entry and its take-profit leg on the bar they both may trade in, by the backtest's rule: (entry price,
    the leg's price if the leg fills in this bar too), or None if the entry does not fill."""
    side = LONG if o["side"] == BUY else SHORT
    s = settle(Decision(side, None if o["type"] == MARKET else o["limit_price"], leg["limit_price"]), bar, costs,
               fill_mode, same_bar)
    if not s.filled:
        return None
    return s.entry_price, (s.exit_price if s.exit_reason == "take_profit" else None)


def late_price(o, bar: Bar) -> float | None:
    """Where an order sent while the bar traded fills: a market order at the close, a limit at its limit only if
    the bar closes beyond it (the price crossed it after the order went out)."""
    if o["type"] == MARKET:
        return bar.close
    limit = o["limit_price"]
    beyond = bar.close <= limit if o["side"] == BUY else bar.close >= limit
    return limit if beyond else None


def bars_between(index: pd.DatetimeIndex, start: str, end: pd.Timestamp) -> int:
    """The bars of a symbol after ``start`` up to and including ``end`` (how long a short was borrowed)."""
    return int(index.searchsorted(end, side="right") - index.searchsorted(pd.Timestamp(start), side="right"))
