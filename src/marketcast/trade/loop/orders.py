"""Every order the loop sends or cancels goes through here, write-ahead.

An intent row is committed before the broker call and marked after it; an id the journal or the broker
already has is never sent again; an order the rules model cannot make valid is journalled as ``refused`` and
never sent. A cancel is journalled the same way, and :meth:`OrderDesk.await_cancels` waits (bounded) until
the broker confirms it: Alpaca answers a cancel with 204 and ``pending_cancel`` first, and the order keeps
holding its quantity (a sell against it is refused with 403 "insufficient qty available") until it is
``canceled`` (https://docs.alpaca.markets/docs/orders-at-alpaca, "Order Lifecycle"; alpaca-trade-api-csharp#247).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Callable

from marketcast.backtest.orders import LONG
from marketcast.trade.interface import Broker, BrokerError, BrokerUnavailable, OrderRejected, submit_once
from marketcast.trade.journal.ids import ENTRY, client_order_id
from marketcast.trade.loop.planner import Signal
from marketcast.trade.risk.rules import Check, conform
from marketcast.trade.journal.state import Intent, Journal, decision_json, request_of
from marketcast.trade.types import BUY, LIMIT, MARKET, SELL, Order
from marketcast.trade.types import Account

log = logging.getLogger("marketcast.trade")


@dataclass(frozen=True)
class Sent:
    """What became of one intent: submitted | already | rejected | refused | unknown (stays pending: the next
    reconcile asks the broker)."""

    outcome: str
    client_order_id: str
    error: str | None = None


def entry_intent(signal: Signal, qty: float, decision_ts: str, gtc: bool) -> Intent:
    """The bar's entry for ``signal`` (MaxDiff: a limit with its take-profit; market without a limit), as
    decided: :func:`~marketcast.trade.risk.rules.conform` puts it on the broker's grid before it is sent.
    ``gtc``: crypto (``gtc`` or ``ioc`` only), or a stock held on under exit rule ``close``, whose take-profit
    leg must rest across sessions: a leg inherits its entry's time in force, and an OTO order takes ``day`` or
    ``gtc`` (https://docs.alpaca.markets/docs/orders-at-alpaca, "Bracket Orders": "time_in_force must be "day"
    or "gtc""; "OTO Orders": "the rest of requirements are the same as the bracket orders"; Alpaca's OTO example,
    https://alpaca.markets/blog/oco-oto/, is a market buy with ``"time_in_force": "gtc"``). An unfilled entry is
    still cancelled by the next cycle as an order of a passed bar."""
    d = signal.decision
    return Intent(client_order_id(signal.symbol, decision_ts, ENTRY), decision_ts, signal.strategy, signal.symbol,
                  BUY if d.side == LONG else SELL, qty, LIMIT if d.entry_limit is not None else MARKET, d.entry_limit,
                  d.take_profit, "gtc" if gtc else "day", decision=decision_json(d.side, d.entry_limit,
                                                                                     d.take_profit))


class OrderDesk:
    """Sends and cancels for one loop; ``cancel_wait_s`` bounds how long a cancel confirmation is awaited, and
    ``admit(intent)`` (the risk limits) sees every order just before it goes out and may stop it by raising."""

    def __init__(self, broker: Broker, journal: Journal, cancel_wait_s: float = 10.0, poll_s: float = 1.0,
                 admit: Callable[[Intent], None] | None = None) -> None:
        self.broker, self.journal, self.admit = broker, journal, admit
        self.cancel_wait_s, self.poll_s = cancel_wait_s, poll_s
        self.cancelled: set[str] = set()  # broker ids cancelled (or, dry, would be) this cycle
        self.account: Account | None = None  # what the cycle's checks saw; stamped on each intent it records

    def conformed(self, intent: Intent) -> tuple[Intent | None, Check]:
        """``intent`` on the broker's grid (prices rounded by side, size down), or None with the reasons."""
        check = conform(request_of(intent), self.broker.asset(intent.symbol))
        if check.request is None:
            return None, check
        r = check.request
        return Intent(intent.client_order_id, intent.decision_ts, intent.strategy, intent.symbol, intent.side, r.qty,
                      r.type, r.limit_price, r.take_profit, r.time_in_force, decision=intent.decision,
                      kind=intent.kind), check

    def seen(self, intent: Intent) -> Intent:
        """``intent`` with its asset class and the account figures its check saw (crypto draws on the
        non-marginable buying power), so the blotter can show them: written with the intent, before any POST."""
        if intent.asset_class is not None:
            return intent
        asset, account = self.broker.asset(intent.symbol), self.account
        return replace(intent, asset_class=asset.asset_class, cash_seen=None if account is None else account.cash,
                       buying_power_seen=None if account is None else account.buying_power_for(asset.crypto))

    def refuse(self, intent: Intent, reasons: tuple[str, ...] | list[str]) -> Sent:
        """Journal an order that will not be sent, with why (shown in the plan, the records and the status)."""
        reason = "; ".join(reasons)
        stored = self.journal.record_intent(self.seen(Intent(**{**intent.__dict__, "status": "refused",
                                                                  "error": reason})))
        if stored.status != "refused":
            return Sent("already", stored.client_order_id)
        log.warning("%s %s not sent: %s", intent.symbol, intent.client_order_id, reason)
        return Sent("refused", intent.client_order_id, reason)

    def send(self, intent: Intent) -> Sent:
        """Submit write-ahead; an id the journal or the broker already has is never sent again."""
        stored = self.journal.record_intent(self.seen(intent))
        cid = stored.client_order_id
        if stored.status != "pending":
            return Sent("already", cid)
        try:
            existing = self.broker.order_by_client_id(cid)
            if existing is not None:
                self.journal.mark(cid, "submitted", existing.id, broker_status=existing.status)
                return Sent("already", cid)
            if self.admit is not None:
                self.admit(stored)
            self.journal.mark_attempt(cid)
            order, new = submit_once(self.broker, request_of(stored), looked_up=True)
        except OrderRejected as exc:
            self.journal.mark(cid, "rejected", error=str(exc))
            log.warning("%s rejected: %s", cid, exc)
            return Sent("rejected", cid, str(exc))
        except BrokerUnavailable as exc:
            log.warning("%s outcome unknown, will reconcile: %s", cid, exc)
            return Sent("unknown", cid, str(exc))
        self.journal.mark(cid, "submitted", order.id, broker_status=order.status)
        log.info("%s %s %s %g %s: %s", stored.symbol, stored.side, stored.type, stored.qty, cid,
                 "submitted" if new else "already there")
        return Sent("submitted" if new else "already", cid)

    def cancel(self, order: Order, decision_ts: str, reason: str, act: bool) -> bool:
        """Cancel write-ahead (``pending`` row before the call, ``done``/``failed`` after); True if cancelled
        (or, dry, would be). Done means the broker took the request, not that the order is gone."""
        if order.id in self.cancelled:
            return False
        if not act:
            log.info("dry run: would cancel %s (%s): %s", order.client_order_id, order.symbol, reason)
            self.cancelled.add(order.id)
            return True
        self.journal.record_cancel(order.id, order.client_order_id, order.symbol, decision_ts, reason)
        try:
            self.broker.cancel(order.id)
        except BrokerError as exc:
            self.journal.mark_cancel(order.id, "failed", str(exc))
            log.warning("%s: could not cancel %s: %s", order.symbol, order.client_order_id, exc)
            return False
        self.journal.mark_cancel(order.id, "done")
        self.cancelled.add(order.id)
        log.info("%s: cancel %s requested: %s", order.symbol, order.client_order_id, reason)
        return True

    def await_cancels(self, order_ids: list[str]) -> list[str]:
        """Poll until every order is no longer working (``canceled``, or filled meanwhile), at most
        ``cancel_wait_s``, backing off from 50 ms to ``poll_s``; returns the ids still working (the caller
        must not act as if they were gone)."""
        waiting, pause = list(order_ids), 0.05
        deadline = time.monotonic() + self.cancel_wait_s
        while waiting:
            waiting = [i for i in waiting if (o := self.broker.order(i)) is not None and not o.is_terminal]
            if not waiting or time.monotonic() >= deadline:
                break
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(2 * pause, self.poll_s)
        if waiting:
            log.warning("cancel not confirmed within %.1fs for %s", self.cancel_wait_s, ", ".join(waiting))
        return waiting
