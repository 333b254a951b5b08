"""Exit rule ``close`` (:mod:`marketcast.backtest.execution`): a stock position on daily bars leaves at its
entry's session close by a market-on-close order, as the backtest scores it.

A decision made after bar t closes enters during bar t+1 with its take-profit leg (an OTO order). Each look while
bar t+1 trades (the supervisor's watch before the cutoff; in a replay, between the bar's halves) runs
:func:`close_at_the_close` for the entries of bar t:

* not filled yet: nothing (a later look);
* its take-profit filled first: nothing (the position is gone; the backtest's take-profit counts when the bar
  touches it);
* filled, the take-profit not: the leg is cancelled (it reserves the shares: Alpaca refuses a second sell of
  them), the cancel awaited until confirmed, then a ``market`` order with ``time_in_force`` ``cls`` for the
  quantity still held (https://docs.alpaca.markets/docs/orders-at-alpaca, "Time in Force": "eligible to execute
  only in the market closing auction"), journalled under the entry's bar (kind ``on_close``);
* the fill seen at or after the ``cls`` cutoff (:func:`~marketcast.trade.risk.freshness.cls_cutoff`: 3:50 pm ET,
  Alpaca rejects a ``cls`` sent later; or a broker that cannot take one now, ``Broker.takes_cls``: the embedded
  paper venue of ``trade run``, whose clock stands at a bar's close): no ``cls`` is sent (the loop never sends
  what the broker would refuse);
  the exit is journalled as refused with the reason, counted in :attr:`Reconciled.late`, logged, and the take-
  profit keeps working; the next cycle closes the position as a leftover, queued to the next open.

Holding on (``LoopConfig.hold_agreeing``, :mod:`marketcast.backtest.holding`) no ``cls`` goes out on the entry's
session: whether the position leaves is decided after that close. The entry is ``gtc`` (its take-profit leg
inherits it and rests across sessions, :func:`~marketcast.trade.loop.orders.entry_intent`); while the decisions
agree the position is held. The decision that turns (made after bar t closes) leaves it to
:func:`leave_at_the_close`: the next cycle neither closes it at market nor cancels its take-profit; a look while
bar t+1 trades (the paper broker's bar between its halves; live, the stock session after bar t's, before the
cutoff) cancels the loop's take-profit orders on the symbol (they reserve the shares), awaits their
confirmation, and sends a ``cls`` order for what the loop owns, journalled under bar t (kind ``on_close``, id
(symbol, t, ``on_close``): a restart re-finds it). A take-profit that filled first leaves nothing to send, as
the backtest's resting take-profit counts when the bar trades through it. A look after the cutoff journals the
exit as refused; the position, still under its take-profit, is judged again by the next decision.

Pattern-day-trader protection (:func:`marketcast.trade.risk.protections.day_trade`) is asked of every ``cls``
before its leg is cancelled: under $25,000 a 4th day trade in 5 business days is not sent, the take-profit keeps
working, and the position then leaves at the next open as a leftover. A replay's looks carry no wall clock
(``now`` None): the paper broker's bar is trading, before its cutoff.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from marketcast.trade.journal.ids import ENTRY, ON_CLOSE, client_order_id
from marketcast.trade.journal.state import Intent, Journal, request_of
from marketcast.trade.loop.ownership import owned
from marketcast.trade.risk.freshness import before_cls_cutoff, in_a_later_session
from marketcast.trade.risk.protections import PDT_EQUITY, PDT_LIMIT, day_trade
from marketcast.trade.risk.rules import round_qty
from marketcast.trade.types import BUY, CLS, MARKET, SELL

log = logging.getLogger("marketcast.trade")


def close_at_the_close(rec, decision_ts: str, result) -> None:
    """For each filled entry of ``decision_ts`` on a symbol that exits at the close (``rec.on_close``), in the
    reconciler ``rec``'s scope: cancel its take-profit, confirmed, then send its ``cls`` exit (module docstring)."""
    for entry in rec.journal.intents():
        if (entry.kind == ENTRY and entry.decision_ts == decision_ts and entry.status == "submitted"
                and rec.scope(entry.symbol) and rec.on_close(entry.symbol)):
            _entry_exit(rec, entry, decision_ts, result)


def held_of(journal: Journal, entry: Intent) -> float:
    """What ``entry`` still holds by the journal: its fills less the exits booked under its id (its take-profit
    leg; a broker that settles within the bar books the close there too, and leaves nothing to send)."""
    cid = entry.client_order_id
    return journal.filled_qty(cid) - sum(journal.filled_qty(cid, kind) for kind in ("take_profit", "close"))


def leave_at_the_close(rec, decision_ts: str, result) -> None:
    """Holding on: each position the decision at ``decision_ts`` turned against (``rec.leaving``) leaves by a
    ``cls`` order while the session after that decision's bar trades (module docstring); outside it, nothing."""
    for symbol, qty in sorted(rec.leaving.items()):
        live = rec.now is not None and in_a_later_session(rec.now, decision_ts)
        if not rec.broker.takes_cls(symbol) or not (rec.now is None or live):
            continue  # the cycle after bar t's close, or a look before the next session: the leg keeps working
        side, sign = (BUY, 1.0) if qty > 0 else (SELL, -1.0)
        _exit(rec, symbol, side, decision_ts, result, lambda: max(0.0, sign * _owned(rec, symbol)),
              lambda book: [o for o in book.own_orders if o.symbol == symbol and o.side != side],
              "the look came after the cls cutoff (3:50 pm ET, 10 minutes before an early close): the position "
              "keeps its take-profit and is judged again by the next decision")


def _owned(rec, symbol: str) -> float:
    """What the loop holds of ``symbol`` by its journal, every fill booked."""
    return owned(rec.journal.booked(), rec.journal.adjustments(), rec.assets([symbol])).get(symbol, 0.0)


def _entry_exit(rec, entry: Intent, decision_ts: str, result) -> None:
    _exit(rec, entry.symbol, entry.side, decision_ts, result, lambda: held_of(rec.journal, entry),
          lambda book: [o for o in book.own_orders if o.parent_client_order_id == entry.client_order_id],
          "the entry's fill was seen after the cls cutoff (3:50 pm ET, 10 minutes before an early close): the "
          "position exits at the next open")


def _exit(rec, symbol: str, side: str, decision_ts: str, result, held_now, reserving, late: str) -> None:
    """Send the ``cls`` exit of the loop's ``held_now()`` of a ``side`` position: asked of the cutoff and
    pattern-day-trader protection, then the ``reserving(book)`` take-profits cancelled and confirmed."""
    cid = client_order_id(symbol, decision_ts, ON_CLOSE)
    stored = rec.journal.intent(cid)
    if stored is not None:  # sent (or refused) at an earlier look; written ahead before a kill: send it now
        if stored.status == "pending":
            rec._submit(stored, result.closes, result)
        return
    held = held_now()
    if held <= 0:
        return
    intent = Intent(cid, decision_ts, "exit at the close", symbol, SELL if side == BUY else BUY, held, MARKET,
                    None, None, CLS, kind=ON_CLOSE)
    if not rec.broker.takes_cls(symbol) or (rec.now is not None and not before_cls_cutoff(rec.now)):
        why = late if rec.now is None else late.replace(" after", f" at {rec.now}, after", 1)
        rec.desk.refuse(intent, (why,))
        result.late.append(cid)
        log.warning("%s: %s", symbol, why)
        return
    if (refused := _day_trade(rec, intent)) is not None:  # asked before the leg goes: it keeps working then
        result.deferred[symbol] = refused
        log.warning("%s: cls %s not sent: %s; the position leaves at the next open", symbol, cid, refused)
        return
    legs = reserving(result.book)
    for leg in legs:
        if leg.status != "pending_cancel":
            rec.desk.cancel(leg, decision_ts, "the position exits at the close (cls)", True)
    if legs:
        still = rec.desk.await_cancels([leg.id for leg in legs])
        if still:
            result.deferred[symbol] = f"cancel of the take-profit {still[0]} not confirmed yet: the cls waits"
            log.warning("%s: %s", symbol, result.deferred[symbol])
            return
        result.book = rec._read(result)[0]  # the leg may have filled before the cancel: booked now
        held = held_now()
        if held <= 0:
            return
    asset = rec.assets([symbol])[symbol]
    position = next((p for p in rec.broker.positions() if p.symbol == symbol), None)
    free = 0.0 if position is None or (position.qty > 0) != (side == BUY) else abs(position.available)
    size = round_qty(min(held, free), asset.qty_step)
    if size <= 0:
        result.deferred[symbol] = f"the entry holds {held:g} but the position has {free:g} free"
        log.warning("%s: cls not sent: %s", symbol, result.deferred[symbol])
        return
    rec._submit(replace(intent, qty=size), result.closes, result)


def _day_trade(rec, intent: Intent) -> str | None:
    """Pattern-day-trader protection's refusal of the ``cls`` ``intent``, if it would be refused, asked with the
    account and orders as they stand (the take-profit leg still working)."""
    symbol = intent.symbol
    position = next((p for p in rec.broker.positions() if p.symbol == symbol), None)
    standing = rec.checks.precheck.standing(symbol, rec.broker.account(), rec.broker.open_orders(), position,
                                            0.0 if position is None else position.avg_entry_price)
    refusal = day_trade(request_of(intent), rec.assets([symbol])[symbol], standing)
    return None if refusal is None else refusal.message


def day_trade_note(rule: str, equity: float, asset_classes) -> str | None:
    """The one line the loop says at start under exit rule ``close`` with stocks and less than $25,000: every
    stock round trip is then a day trade, and Alpaca's pattern-day-trader protection
    (:func:`marketcast.trade.risk.protections.day_trade`) allows 3 in 5 business days."""
    if rule != "close" or equity >= PDT_EQUITY or "stock" not in set(asset_classes):
        return None
    return (f"exit close: every stock round trip is a day trade, and with equity {equity:,.2f} under "
            f"{PDT_EQUITY:,.0f} Alpaca's pattern-day-trader rule allows {PDT_LIMIT} day trades in 5 business days: "
            f"the {PDT_LIMIT + 1}th cls exit is refused and that position exits at the next open")
