"""Holding on (:attr:`~marketcast.trade.loop.cycle.LoopConfig.hold_agreeing`), the loop buys a held position up
toward the bar's target quantity, as LEAN's ``SetHoldings`` rebalances a holding to its target weight with a
market order for the difference. The target is what this bar's entry would be sized to
(:func:`~marketcast.trade.risk.portfolio.allocate`, at this bar's price and equity, with the other symbols'
exposure and slots as they stand); only a shortfall beyond :data:`TOP_UP_BAND` of it is bought.

A crypto position's take-profit is a sell limit the loop sent apart; it rests while the position is held, and so
does a stock's ``gtc`` take-profit leg under exit rule ``close`` (:mod:`~marketcast.trade.loop.on_close`). A buy
on the same symbol could fill against it, and Alpaca refuses an order that could interact with the account's own
opposite order as a potential wash trade ("against a market order: always rejected",
https://docs.alpaca.markets/docs/user-protection, "Preventing Wash Trades at Alpaca"; a cancel is a request, the
order ``pending_cancel`` until the venue confirms it, https://docs.alpaca.markets/docs/orders-at-alpaca, "Order
Lifecycle"). So a top-up goes, each step journalled before the next: the top-up's intent (``pending``, id (symbol,
bar, ``top_up``)) -> the cancel of the loop's take-profit (a cancel row, reason "in the way of top_up ...
(potential wash trade)") -> the cancel confirmed -> the top-up sent -> once it fills, a take-profit for the whole
position at this bar's take-profit (:meth:`~marketcast.trade.loop.reconcile.Reconciler._take_profits`, id (symbol,
bar, ``take_profit@top_up@<filled qty>``)). A cycle re-run after a kill anywhere in between finds the pending
top-up and finishes it (a cancel already confirmed is not asked again); a top-up whose bar passed unsent is
abandoned by the next reconcile, and the position is then held without a resting exit, as after a lapsed
take-profit, until the decision turns. Only the loop's own orders are cancelled: a foreign order in the way
leaves the top-up unsent, with the reason logged.

A position above its target is left as it is (no trim): selling the excess at market would sell part of the
position below its resting take-profit's price and trade on every fall of the equity; what the loop holds still
leaves at that take-profit or at the close when the decision turns.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from marketcast.backtest.holding import TOP_UP_BAND  # the one band: backtest --hold scores what the loop buys
from marketcast.backtest.orders import LONG
from marketcast.trade.journal.ids import TAKE_PROFIT, TOP_UP, client_order_id
from marketcast.trade.journal.state import Intent, decision_json
from marketcast.trade.loop.ownership import dust
from marketcast.trade.risk.check import OrderContext
from marketcast.trade.risk.portfolio import allocate
from marketcast.trade.risk.precheck import unit_draw
from marketcast.trade.risk.rules import round_price, round_qty
from marketcast.trade.types import BUY, MARKET, SELL

if TYPE_CHECKING:
    from marketcast.trade.loop.cycle import CycleReport, TradingLoop

log = logging.getLogger("marketcast.trade")


def shortfall(target: float, held: float, band: float = TOP_UP_BAND) -> float:
    """What to buy to reach ``target`` from ``held`` (both unsigned): the difference when it exceeds ``band`` x
    ``target``, else 0."""
    gap = target - held
    return gap if target > 0 and gap > band * target else 0.0


def top_ups(loop: TradingLoop, report: CycleReport) -> list[str]:
    """Top up each position the loop holds on at this cycle's bar (the reconciler's ``held_on``) whose target
    quantity exceeds it by more than the band; returns the client order ids sent (or already there)."""
    held_on = loop.reconciler.held_on
    book = report.reconciled.book
    if not held_on or book is None:
        return []
    sent = []
    account = loop.broker.account()  # after this cycle's entries: their working orders draw on it
    loop.desk.account = account
    for symbol, qty in sorted(held_on.items()):
        if symbol not in report.planned_on or report.gated.get(symbol):  # another clock's, or stale/gated now
            continue
        cid = client_order_id(symbol, report.decision_ts, TOP_UP)
        existing = loop.journal.intent(cid)
        if existing is not None:  # journalled before a kill: finish it (sent already: nothing to do)
            if existing.status == "pending" and _clear_and_send(loop, existing, report.asks[symbol]):
                sent.append(cid)
            continue
        intent = _sized(loop, report, symbol, qty, account)
        if intent is None:
            continue
        p = book.positions.get(symbol)
        context = OrderContext(account, loop.broker.open_orders(), p, report.asks[symbol], report.bids[symbol],
                               report.planned_on[symbol][0].close, 0.0,
                               abs(qty) * (0.0 if p is None else p.avg_entry_price))
        verdict = loop.checks.top_up(intent, context)
        if verdict.waits:
            log.warning("%s: top-up %s not sent: %s", symbol, cid, verdict.waits)
        elif verdict.refusal:
            loop.desk.refuse(intent, [verdict.refusal])
        elif _clear_and_send(loop, verdict.order, report.asks[symbol]):
            sent.append(cid)
    return sent


def _sized(loop: TradingLoop, report: CycleReport, symbol: str, qty: float, account) -> Intent | None:
    """The top-up of the held ``qty`` to this bar's target (a market order on the held side), or None when the
    shortfall, or what the buying power lets the loop buy of it, is within the band."""
    signal = report.planned_on[symbol][0]
    book = report.reconciled.book
    assets = loop.reconciler.assets(set(book.owned) | {symbol})
    asset = assets[symbol]
    side = BUY if qty > 0 else SELL
    price = round_price(signal.close, asset, side)
    held, exposure = _others(book, assets, symbol)
    for entry in report.planned:  # this cycle's entries, sent before: they count as the plan counted them
        held, exposure = held | {entry.symbol}, exposure + entry.qty * (entry.limit_price or report.asks[entry.symbol])
    sized = allocate([signal], account.equity, loop.config.portfolio, exposure, held, {symbol: asset.qty_step},
                     {symbol: price}, loop.config.risk.entry_cap)
    target = sized[0].qty if sized else 0.0
    gap = shortfall(target, abs(qty))
    if gap <= 0:
        return None
    draw = unit_draw(qty > 0, None, report.asks[symbol], asset.crypto)
    size = round_qty(min(gap, account.buying_power_for(asset.crypto) / draw), asset.qty_step)
    if size <= TOP_UP_BAND * target or size < max(dust(asset), asset.min_order_size or 0.0):
        return None  # what the buying power leaves is within the band: not worth a cancel, a fee and a resend
    log.info("%s: the loop holds %g, this bar's target is %g: top-up of %g", symbol, qty, target, size)
    take_profit = None
    attaches = loop.broker.attaches_take_profit(symbol)
    if not attaches or loop._held_to_the_close(symbol):  # its resting take-profit is cancelled for the top-up:
        # a new one for the whole position follows it (reconcile's _whole_take_profit), at this bar's price
        resting = [o.limit_price for o in book.own_orders if o.symbol == symbol and o.side != side
                   and (o.parent_client_order_id is not None or
                        ((i := loop.journal.intent(o.client_order_id)) is not None and i.kind == TAKE_PROFIT))]
        take_profit = signal.decision.take_profit if signal.decision.take_profit is not None else \
            (resting[0] if resting else None)
    # a stock's goes in the decision only: on the order it would be an OTO leg for the top-up's quantity alone
    return Intent(client_order_id(symbol, report.decision_ts, TOP_UP), report.decision_ts, TOP_UP, symbol, side,
                  size, MARKET, None, None if attaches else take_profit, "gtc" if asset.crypto else "day",
                  kind=TOP_UP, decision=decision_json(LONG if qty > 0 else -LONG, None, take_profit))


def _others(book, assets, symbol: str) -> tuple[frozenset[str], float]:
    """The symbols and gross exposure the loop has committed elsewhere than ``symbol``
    (:meth:`~marketcast.trade.loop.ownership.Book.committed` without it)."""
    held, exposure = set(), 0.0
    for s, q in book.owned.items():
        if s != symbol and abs(q) >= dust(assets.get(s)):
            held.add(s)
            p = book.positions.get(s)
            exposure += abs(q) * (p.avg_entry_price if p is not None else 0.0)
    for o in book.own_orders:
        if o.symbol != symbol:
            held.add(o.symbol)
            exposure += o.qty * (o.limit_price or 0.0)
    return frozenset(held), exposure


def _clear_and_send(loop: TradingLoop, intent: Intent, ask: float) -> bool:
    """Write-ahead: the top-up's intent first, then the cancel of the loop's orders in its way, confirmed, then
    the send. False while a cancel is unconfirmed (the intent stays pending for a re-run of this bar)."""
    stored = loop.journal.record_intent(loop.desk.seen(intent))
    if stored.status != "pending":
        return stored.status == "submitted"
    waits = loop.checks.send_clear(stored, ask)
    if waits:
        log.warning("%s: top-up %s waits: %s", stored.symbol, stored.client_order_id, waits)
        return False
    return loop.desk.send(stored).outcome in ("submitted", "already")
