"""The loop's own pre-check: the broker's rules model (:func:`~marketcast.trade.risk.protections.refusals`)
asked with what the broker shows now, so the loop never sends what the venue would refuse (LEAN's
``CanSubmitOrder`` before every order, NautilusTrader's pre-trade risk check).

Entries: a refusal keeps the entry from going out (the cycle records it as refused, with the reason).
Exits (a leftover close, a take-profit sent apart): when the only refusal is a wash trade against the loop's
*own* working orders, those are cancelled (write-ahead, :meth:`~marketcast.trade.loop.orders.OrderDesk.cancel`)
and the cancels awaited until the broker confirms them; the exit is checked again on a fresh read and only
then sent (cancel-confirm-then-submit: a cancel is a request, and a ``pending_cancel`` order can still trade).
An opposite order the loop did not create is never touched: the exit waits, with the reason logged. A kill
anywhere in between leaves a journalled cancel and no order, and the next pass starts over from the broker.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from marketcast.trade.interface import Broker
from marketcast.trade.risk.protections import Refusal, Standing, day_trades_apply, key, refusals, wash_trades
from marketcast.trade.risk.rules import opening_value
from marketcast.trade.types import BUY, CLS, LIMIT, MARKET, SELL, Account, Asset, Order, OrderRequest, Position
from marketcast.trade.journal.ids import is_loops
from marketcast.trade.journal.state import Intent, Journal, request_of

if TYPE_CHECKING:  # the loop passes its desk in (exits cancel through it); risk never imports the loop
    from marketcast.trade.loop.orders import OrderDesk

log = logging.getLogger("marketcast.trade")
NEW_YORK = ZoneInfo("America/New_York")


def ny_day(ts: str) -> str:
    """The New York date of an ISO time: the trading day a fill or a clock reading belongs to."""
    t = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return (t if t.tzinfo else t.replace(tzinfo=ZoneInfo("UTC"))).astimezone(NEW_YORK).date().isoformat()


def unit_draw(long: bool, limit: float | None, ask: float, crypto: bool = False) -> float:
    """What one unit of an entry draws from buying power, as the broker values it (a market entry at the
    ask, a crypto market buy at the ask plus the collar, a short at least 3 % over it):
    :func:`~marketcast.trade.risk.rules.opening_value` of one unit."""
    return opening_value(OrderRequest("-", BUY if long else SELL, 1.0, "-", LIMIT if limit is not None else MARKET,
                                      limit), ask, crypto)


def describe(o: Order) -> str:
    price = f" @ {o.limit_price:g}" if o.limit_price is not None else ""
    return f"{o.client_order_id} ({o.side} {o.qty:g} {o.type}{price}, {o.status})"


class PreCheck:
    """The account as the loop's next order meets it, read from the broker, and the verdict of the model."""

    def __init__(self, broker: Broker, journal: Journal, desk: OrderDesk) -> None:
        self.broker, self.journal, self.desk = broker, journal, desk

    def traded_today(self) -> set[str] | None:
        """The symbols (keys) the loop's journal has a fill of on the broker's trading day; without a broker
        clock, None: every symbol is taken as traded today (fail closed)."""
        clock = self.broker.market_clock()
        if clock is None:
            return None
        today = ny_day(clock.now)
        return {key(f.symbol) for f in self.journal.fills() if ny_day(f.timestamp) == today}

    def standing(self, symbol: str, account: Account, orders: list[Order], position: Position | None,
                 ask: float, spent: float = 0.0, bid: float | None = None) -> Standing:
        """What ``symbol``'s next order meets; where pattern-day-trader protection applies, with whether it was
        traded today and every position opened today (the pending day trades of the account's other symbols
        count: :func:`~.protections.pending_day_trades`), read for it alone."""
        opened, today, crypto = False, {}, frozenset()
        if day_trades_apply(account):
            traded = self.traded_today()
            opened = traded is None or key(symbol) in traded
            today = {key(p.symbol): p.qty for p in self.broker.positions() if traded is None or key(p.symbol) in traded}
            crypto = frozenset(key(o.symbol) for o in orders if self.broker.asset(o.symbol).crypto)
        return Standing(account, ask, 0.0 if position is None else position.qty,
                        0.0 if position is None else position.available, orders, ask if bid is None else bid,
                        opened, spent, today, None, crypto)

    def refusals(self, request: OrderRequest, asset: Asset, standing: Standing) -> list[Refusal]:
        """:func:`~.protections.refusals`; a ``cls`` order judged by the broker's clock (read for it alone)."""
        if request.time_in_force == CLS and standing.now is None:
            clock = self.broker.market_clock()
            standing = standing if clock is None else replace(standing, now=clock.now)
        return refusals(request, asset, standing)

    def as_sent(self, intent: Intent) -> OrderRequest:
        """``intent`` as the broker will get it: without its take-profit where the broker does not attach one
        (Alpaca crypto: the loop sends it later, checked then)."""
        request = request_of(intent)
        if request.take_profit is not None and not self.broker.attaches_take_profit(intent.symbol):
            return replace(request, take_profit=None)
        return request

    # ------------------------------------------------------------------ exits
    def clear(self, intent: Intent, decision_ts: str, ask: float | None = None) -> str | None:
        """None once the broker would take the exit ``intent`` (after cancelling and confirming the loop's own
        orders it would wash against); else why it waits. Reads the account, orders and position afresh. A
        top-up (it opens, so draws buying power) is valued at the quote's ``ask``."""
        request, asset = request_of(intent), self.broker.asset(intent.symbol)
        for attempt in (1, 2):
            account, orders = self.broker.account(), self.broker.open_orders()
            position = next((p for p in self.broker.positions() if p.symbol == intent.symbol), None)
            # an exit reduces the position (sized to its free quantity): it draws no buying power, so the
            # position's own price stands in for the quote
            base = ask if ask is not None else position.avg_entry_price if position is not None else 0.0
            refused = self.refusals(request, asset, self.standing(intent.symbol, account, orders, position, base))
            if not refused:
                return None
            other = [str(r) for r in refused if r.rule != "wash_trade"]
            if other:
                return "; ".join(other)
            washing = wash_trades(request, orders)
            foreign = [o for o in washing if not is_loops(o.root_client_order_id)]
            if foreign:
                return (f"potential wash trade against {describe(foreign[0])}, which the loop did not place "
                        f"(left untouched)")
            if attempt == 2:
                return f"potential wash trade against {describe(washing[0])}, still working after its cancel"
            reason = f"in the way of {intent.kind} {intent.client_order_id} (potential wash trade)"
            for o in washing:
                if o.status != "pending_cancel":  # one asked for already is only awaited
                    self.desk.cancel(o, decision_ts, reason, True)
            waiting = self.desk.await_cancels([o.id for o in washing])
            if waiting:
                return f"cancel of {', '.join(waiting)} not confirmed yet (in the way: potential wash trade)"
        return None  # pragma: no cover - the loop returns on its second pass
