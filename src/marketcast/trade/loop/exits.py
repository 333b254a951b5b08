"""What a risk halt keeps: the protective exits of what the loop holds (or, with ``flatten_on_halt``, nothing).

A halt stops new exposure, not the management of positions already open (NautilusTrader's ``REDUCING``
trading state: orders that reduce a position still go out, the rest are refused). So a halt cancels the
loop's working *entries* (their unfilled part) and keeps its *exits*: every working order of the loop that
reduces a position the loop holds (an OTO take-profit leg, a take-profit or close the loop sent itself, a stop
where a strategy has one). Each look while halted then makes sure what the loop holds is covered: where the
broker no longer keeps an exit (a ``day`` leg expired; a partially filled OTO entry cancelled, which may take
its ``held`` leg with it), a take-profit limit is re-placed for the uncovered quantity at the entry's own
take-profit price. The loop never relies on what the broker did to a leg: it re-reads the account once the
cancels are confirmed and places only what is missing.

With ``flatten_on_halt`` the halt cancels every order of the loop instead and, once the cancels are confirmed,
closes the loop's quantities at market.

Every order here: never more than the journal's owned quantity and the position's free quantity (foreign
shares are never sold), asked of the loop's one :class:`~marketcast.trade.risk.check.RiskCheck` before it goes
out (:meth:`~marketcast.trade.risk.check.RiskCheck.exit`: the venue's grid, no buying power, the venue's rules),
a deterministic id keyed on (symbol, the look's bar, role@qty) so a restart re-finds it, journalled under the bar
of the entry it exits (so ownership and a later leftover close count it with that entry). Re-placed exits are
``gtc``: they outlive the session while the loop stays halted (Alpaca takes ``gtc`` for whole-share equity orders
and for crypto, https://docs.alpaca.markets/docs/orders-at-alpaca, "Time in Force"; fractional orders must be
``day``, the rules model refuses them otherwise). An order sent while the market is closed waits for the next
session ("Order Lifecycle": ``accepted`` until the open).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from marketcast.trade.interface import Broker, BrokerError
from marketcast.trade.risk.check import RiskCheck
from marketcast.trade.risk.rules import round_qty
from marketcast.trade.types import Asset
from marketcast.trade.types import BUY, LIMIT, MARKET, SELL, Order, Position
from marketcast.trade.journal.ids import ENTRY, FLATTEN, TAKE_PROFIT, TOP_UP, client_order_id, is_loops
from marketcast.trade.journal.state import Intent, Journal
from marketcast.trade.loop.orders import OrderDesk
from marketcast.trade.loop.ownership import EPS, Book, dust

log = logging.getLogger("marketcast.trade")

HALT_TAKE_PROFIT = f"{TAKE_PROFIT}@halt"  # the role of a re-placed take-profit (its id: symbol, bar, role@qty)
ORIGINS = (ENTRY, "adopted", TOP_UP)  # the intents a held quantity comes from


class HaltExits:
    """The loop's side of a risk halt; ``read()`` is a fresh :class:`Book` (fills booked first), ``assets``
    the reconciler's cached asset lookup, ``checks`` the loop's risk checks, which every exit of the loop passes
    (:meth:`~marketcast.trade.risk.check.RiskCheck.exit`: the venue's grid and rules, wash trades included)."""

    def __init__(self, broker: Broker, journal: Journal, desk: OrderDesk, read: Callable[[], Book],
                 assets: Callable[[Iterable[str]], dict[str, Asset]], checks: RiskCheck) -> None:
        self.broker, self.journal, self.desk, self.read, self.assets = broker, journal, desk, read, assets
        self.checks = checks

    def enforce(self, decision_ts: str, reason: str, flatten: bool) -> dict:
        """Cancel what a halt does not keep (entries; with ``flatten`` everything but the loop's own flatten
        closes), await the cancels, then cover what the loop holds: exits kept or re-placed, or closed at market.
        Returns the halt's details: what was cancelled and each position with its exits."""
        book = self.read()
        intents = {i.client_order_id: i for i in self.journal.intents()}
        assets = self.assets(set(book.owned) | {o.symbol for o in book.own_orders})
        keep = {o.id for o in book.own_orders if self._keeps(o, book, intents, assets, flatten)}
        for symbol, held in book.owned.items():  # an exit for more than the loop holds would sell foreign shares
            kept = [o for o in book.own_orders if o.symbol == symbol and o.id in keep]
            if sum(_remaining(o) for o in kept) > abs(held) + EPS:
                keep -= {o.id for o in kept}
        doomed = [o for o in book.own_orders if o.id not in keep]
        for order in doomed:
            if order.status != "pending_cancel":  # one asked for earlier is only awaited
                self.desk.cancel(order, decision_ts, reason, act=True)
        still = self.desk.await_cancels([o.id for o in doomed]) if doomed else []
        if doomed:
            log.warning("%s: cancelled %d working order(s) of the loop%s", reason, len(doomed) - len(still),
                        f", {len(still)} not confirmed yet" if still else "")
        book = self.read() if doomed else book
        intents = {i.client_order_id: i for i in self.journal.intents()}
        positions, sent = [], []
        for symbol, held in sorted(book.owned.items()):
            asset = self.assets([symbol])[symbol]
            if abs(held) < dust(asset):
                continue
            note = self._cover(symbol, held, asset, book, intents, decision_ts, flatten, sent)
            positions.append({"symbol": symbol, "qty": held, **({"note": note} if note else {})})
        self._list_exits(positions)
        return {"cancelled": [o.client_order_id for o in doomed], "unconfirmed": still, "positions": positions,
                "sent": sent, "flattened": flatten}

    # ----------------------------------------------------------------- what stays
    @staticmethod
    def _keeps(order: Order, book: Book, intents: dict[str, Intent], assets: dict[str, Asset], flatten: bool) -> bool:
        """An exit stays: it reduces a position the loop holds and is no entry (an OTO leg, a take-profit or close
        the loop sent). With ``flatten`` only the loop's own flatten closes stay."""
        intent = None if order.parent_client_order_id else intents.get(order.client_order_id)
        if flatten:
            return intent is not None and intent.kind == FLATTEN
        held = book.owned.get(order.symbol, 0.0)
        if abs(held) < dust(assets.get(order.symbol)) or (order.side == SELL) != (held > 0):
            return False
        return order.parent_client_order_id is not None or intent is None or intent.kind != ENTRY

    def _origin(self, symbol: str, held: float, intents: dict[str, Intent]) -> Intent | None:
        """The newest entry (or adopted order) on ``symbol``'s side of ``held`` that filled: where the
        position came from, its take-profit price and its bar."""
        side = BUY if held > 0 else SELL
        filled = [i for i in intents.values() if i.symbol == symbol and i.kind in ORIGINS and i.side == side
                  and self.journal.filled_qty(i.client_order_id, i.kind) > 0]
        return max(filled, key=lambda i: i.decision_ts, default=None)

    # ----------------------------------------------------------------- covering what the loop holds
    def _cover(self, symbol: str, held: float, asset: Asset, book: Book, intents: dict[str, Intent],
               decision_ts: str, flatten: bool, sent: list[str]) -> str | None:
        """Send what ``symbol``'s position lacks (a take-profit, or with ``flatten`` a market close) for the part
        no kept order covers; the reason nothing was sent where something was missing."""
        mine = [o for o in book.own_orders if o.symbol == symbol]
        kept = [o for o in mine if self._keeps(o, book, intents, {symbol: asset}, flatten)]
        need = abs(held) - sum(_remaining(o) for o in kept)
        if need < dust(asset):
            return None
        waiting = [o for o in mine if o not in kept]
        if waiting:  # cancel first, confirmed: only then may an opposite order go out
            return f"cancel of {waiting[0].client_order_id} not confirmed yet: the exit waits for the next look"
        origin = self._origin(symbol, held, intents)
        if not flatten and (origin is None or origin.take_profit is None):
            return "no exit to keep: the entry had no take-profit (and no strategy places stops)"
        position = book.positions.get(symbol)
        same_side = position is not None and (position.qty > 0) == (held > 0)
        free = position.available if same_side else 0.0  # an exit never opens the other way
        qty = round_qty(min(need, free), asset.qty_step)
        if qty <= 0 or qty < (asset.min_order_size or 0.0):
            return f"{need:g} uncovered but only {free:g} of the position is free"
        side = SELL if held > 0 else BUY
        bar = origin.decision_ts if origin is not None else decision_ts
        if flatten:
            intent = Intent(client_order_id(symbol, decision_ts, f"{FLATTEN}@{qty!r}"), bar, "risk halt", symbol, side,
                            qty, MARKET, None, None, "gtc" if asset.crypto else "day", kind=FLATTEN)
        else:
            intent = Intent(client_order_id(symbol, decision_ts, f"{HALT_TAKE_PROFIT}@{qty!r}"), bar, "risk halt",
                            symbol, side, qty, LIMIT, origin.take_profit, None, "gtc", kind=TAKE_PROFIT)
        stored = self.journal.intent(intent.client_order_id)
        if stored is not None and stored.status not in ("pending", "abandoned"):  # this bar's is spent
            what = stored.broker_status if stored.status == "submitted" else f"{stored.status}: {stored.error}"
            return f"{intent.client_order_id} of this bar is {what}; the next bar's look places another"
        return self._send(intent, position, sent)

    def _send(self, intent: Intent, position: Position | None, sent_ids: list[str]) -> str | None:
        """Ask the risk checks about ``intent`` (never what the broker would refuse; halted, nothing that would
        open a position), then send it write-ahead, outside the order-count limits (a halted loop must still
        protect what it holds); the reason if it did not go."""
        verdict = self.checks.exit(intent, position, halted=True)
        if verdict.reasons:
            self.desk.refuse(intent, verdict.reasons)
            return "not sent: " + "; ".join(verdict.reasons)
        if verdict.waits:  # e.g. a foreign order it would wash against: a later look
            log.warning("%s: halted: %s %s waits: %s", intent.symbol, intent.kind, intent.client_order_id,
                        verdict.waits)
            return f"waits: {verdict.waits}"
        valid = verdict.order
        stored = self.journal.intent(valid.client_order_id)
        if stored is not None and stored.status == "abandoned":  # written at an earlier look of this bar, never
            self.journal.mark(valid.client_order_id, "pending")  # sent (reconcile asked the broker): the same exit
        admit, self.desk.admit = self.desk.admit, None
        try:
            sent = self.desk.send(valid)
        except BrokerError as exc:
            log.warning("%s: %s %s failed: %s", valid.symbol, valid.kind, valid.client_order_id, exc)
            return f"not sent: {exc}"
        finally:
            self.desk.admit = admit
        log.warning("%s: halted: %s %s %s %g%s for the loop's position: %s", valid.symbol, valid.kind, valid.side,
                    valid.type, valid.qty, f" @ {valid.limit_price:g}" if valid.limit_price else "",
                    sent.outcome)
        if sent.outcome in ("submitted", "already"):
            sent_ids.append(valid.client_order_id)
            return None
        return f"{sent.outcome}: {sent.error}"

    def _list_exits(self, positions: list[dict]) -> None:
        """Each position's working exits, as the broker has them now (a leg by its own id and its entry's)."""
        if not positions:
            return
        try:
            working = self.broker.open_orders()
        except BrokerError as exc:
            for p in positions:
                p["exits"] = f"unknown: {exc}"
            return
        for p in positions:
            p["exits"] = [{"client_order_id": o.client_order_id, "entry": o.parent_client_order_id, "side": o.side,
                           "type": o.type, "qty": _remaining(o), "limit_price": o.limit_price, "status": o.status}
                          for o in working if o.symbol == p["symbol"] and _reduces(o, p["qty"])
                          and is_loops(o.root_client_order_id)]


def _remaining(order: Order) -> float:
    return max(order.qty - order.filled_qty, 0.0)


def _reduces(order: Order, held: float) -> bool:
    return (order.side == SELL) == (held > 0)
