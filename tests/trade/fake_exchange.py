"""The account behind the fake Alpaca server (:mod:`tests.trade.fake_alpaca`): orders, positions, cash, and a
bar driver that plays a day's bar through the working orders. Written apart from marketcast's own rules model
(nothing here imports it), so a test against it checks the loop against Alpaca's rules, not against itself.

Each rule and where Alpaca states it:

* Stock limit prices at most 2 decimals from $1.00 up, 4 below; else 422 ``{"code": 42210000, "message":
  "invalid limit_price 290.123. sub-penny increment does not fulfill minimum pricing criteria"}``
  (https://docs.alpaca.markets/docs/orders-at-alpaca, "Sub-penny increments for limit orders"). A take-profit
  leg is held to the same grid, reported as ``invalid take_profit.limit_price ...`` (the same 42210000 message
  for ``take_profit.limit_price``, as users have reported it).
* Crypto: ``price_increment``, ``min_order_size``, ``min_trade_increment`` per asset (asset entity,
  https://docs.alpaca.markets/docs/crypto-trading); ``time_in_force`` gtc or ioc only and no advanced order
  class (https://docs.alpaca.markets/docs/crypto-orders); not shortable; the fee is charged on the asset or
  fiat received (crypto-trading, "Crypto Fees": buy BTC/USD -> the fee is in BTC).
* Fractional quantities: fractionable assets only ("requested asset is not fractionable"), simple ``day``
  orders, no shorts (https://docs.alpaca.markets/docs/fractional-trading; the time-in-force table of
  orders-at-alpaca). The wording of the last two refusals is the fake's.
* Duplicate ``client_order_id``: 422 ``{"code": 40010001, "message": "client_order_id must be unique"}``;
  ``client_order_id`` at most 48 characters (``POST /v2/orders`` body reference).
* Selling more than a long position's free quantity (``qty_available``: the position less what open sell
  orders hold, a ``pending_cancel`` one included, and an active take-profit leg): 403 ``{"code": 40310000,
  "message": "insufficient qty available for order (requested: 15, available: 11)"}`` (QuantConnect/Lean#3875,
  alpaca-trade-api-csharp#247); a short needs ``shortable`` and ``easy_to_borrow``; opening orders need
  buying power, which open orders reduce (orders-at-alpaca, "Buying Power"): 403 "insufficient buying power".
* Cancels are asynchronous: ``DELETE /v2/orders/{id}`` answers 204 and the order is ``pending_cancel`` until the
  venue confirms (here: after ``cancel_polls`` reads of the order, or the next session); a terminal order
  answers 422 (``DELETE /v2/orders/{order_id}``: "The order status is not cancelable").
* An OTO entry's take-profit leg is ``held`` until the entry fills, then ``new`` (orders-at-alpaca, "OTO
  Orders" / "Bracket Orders"); legs are listed as orders of their own unless ``nested=true``.
* ``day`` orders not filled by the close end (``expired``; "If unfilled after the closing auction, it is
  automatically canceled", orders-at-alpaca, "Time in Force"); orders sent after the close wait as
  ``accepted`` for the next session ("Order Lifecycle").
* Positions: signed ``qty``, ``qty_available``, ``avg_entry_price`` (weighted over buys into the position,
  unchanged by reductions; position entity). Cash moves with every fill; equity is cash plus positions at the
  last close; buying power is ``multiplier`` x equity less what positions and open opening orders use.

The fill rule of :meth:`Exchange.session` is the fake's, not Alpaca's (a real venue fills from its book): a
buy limit fills if the bar's low reaches it, at the better of open and limit; a market order at the open; a
take-profit leg activated in the bar fills only if the bar closes beyond it.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from decimal import Decimal

TERMINAL = ("filled", "canceled", "expired", "replaced", "rejected")
CLOSE_HOUR = "T21:00:00Z"  # 16:00 New York (EST) in UTC: when a session's day orders end


class Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def D(x) -> Decimal:  # noqa: N802
    return Decimal(str(x))


def num(x: Decimal) -> str:
    """A decimal as Alpaca prints quantities: ``10``, ``0.25`` (never ``1E+1``)."""
    return format(x.normalize(), "f")


def on_grid(value: Decimal, step: Decimal) -> bool:
    return (value / step) % 1 == 0


@dataclass
class Position:
    qty: Decimal = Decimal(0)
    avg: Decimal = Decimal(0)


@dataclass
class Exchange:
    assets: dict[str, dict]
    cash: Decimal = Decimal(100_000)
    multiplier: Decimal = Decimal(2)  # a margin account (orders-at-alpaca: buying power)
    crypto_fee: Decimal = Decimal("0.0015")  # maker tier 1; the loop assumes at most 0.0025
    cancel_polls: int = 1
    account_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: str = "2024-05-01T20:00:00Z"
    orders: list[dict] = field(default_factory=list)
    positions: dict[str, Position] = field(default_factory=dict)
    last: dict[str, Decimal] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    # ------------------------------------------------------------- lookups
    def asset(self, symbol: str) -> dict | None:
        return self.assets.get(symbol.replace("/", "").upper())

    def everything(self) -> list[dict]:
        return [x for o in self.orders for x in (o, *(o.get("legs") or []))]

    def find(self, order_id: str) -> dict | None:
        return next((o for o in self.everything() if o["id"] == order_id), None)

    def held_for_sells(self, sym: str) -> Decimal:
        return sum((D(o["qty"]) - D(o["filled_qty"]) for o in self.everything()
                    if self.key(o["symbol"]) == sym and o["side"] == "sell" and o["status"] not in TERMINAL
                    and o["status"] != "held"), Decimal(0))

    @staticmethod
    def key(symbol: str) -> str:
        return symbol.replace("/", "").upper()

    def equity(self) -> Decimal:
        return self.cash + sum((p.qty * self.last.get(s, p.avg) for s, p in self.positions.items()), Decimal(0))

    def buying_power(self) -> Decimal:
        used = sum((abs(p.qty) * self.last.get(s, p.avg) for s, p in self.positions.items()), Decimal(0))
        for o in self.orders:
            if o["status"] not in TERMINAL and self._opening(o, D(o["qty"]) - D(o["filled_qty"])):
                used += (D(o["qty"]) - D(o["filled_qty"])) * self._price(o)
        return max(Decimal(0), self.multiplier * self.equity() - used)

    def _price(self, o: dict) -> Decimal:
        return D(o["limit_price"]) if o.get("limit_price") is not None else self.last.get(self.key(o["symbol"]), 0)

    def _opening(self, o: dict, qty: Decimal) -> bool:
        held = self.positions.get(self.key(o["symbol"]), Position()).qty
        return (o["side"] == "buy" and held >= 0) or (o["side"] == "sell" and held <= 0)

    # ------------------------------------------------------------- submit
    def submit(self, body: dict) -> dict:
        """Validate as Alpaca does, then book the order (status ``accepted`` until the next session)."""
        cid = body.get("client_order_id") or str(uuid.uuid4())
        if len(cid) > 48:
            raise Refused(422, 40010001, "client_order_id must be no more than 48 characters")
        if any(o["client_order_id"] == cid for o in self.orders):
            raise Refused(422, 40010001, "client_order_id must be unique")
        asset = self.asset(body["symbol"])
        if asset is None or not asset["tradable"]:
            raise Refused(422, 42210000, f"asset \"{body['symbol']}\" not found or not tradable")
        crypto, qty, tif = asset["class"] == "crypto", D(body["qty"]), body["time_in_force"]
        klass = body.get("order_class") or "simple"
        prices = [("limit_price", body.get("limit_price"))]
        if body.get("take_profit"):
            prices.append(("take_profit.limit_price", body["take_profit"]["limit_price"]))
        for name, price in prices:
            if price is None:
                continue
            p = D(price)
            step = D(asset["price_increment"]) if crypto else (Decimal("0.01") if p >= 1 else Decimal("0.0001"))
            if not on_grid(p, step):
                raise Refused(422, 42210000, f"invalid {name} {price}. sub-penny increment does not fulfill "
                                             f"minimum pricing criteria" if not crypto else
                              f"invalid {name} {price}: not a multiple of price_increment {asset['price_increment']}")
        if qty <= 0:
            raise Refused(422, 40010001, "qty must be > 0")
        if crypto:
            if tif not in ("gtc", "ioc"):
                raise Refused(422, 42210000, f"invalid crypto time_in_force {tif}")
            if klass != "simple":
                raise Refused(422, 42210000, f"crypto orders not allowed for advanced order_class: {klass}")
            if qty < D(asset["min_order_size"]) or not on_grid(qty, D(asset["min_trade_increment"])):
                raise Refused(422, 40010001, f"qty {body['qty']} must be >= {asset['min_order_size']} and a multiple "
                                             f"of {asset['min_trade_increment']}")
        elif not on_grid(qty, Decimal(1)):
            if not asset["fractionable"]:
                raise Refused(422, 40010001, "requested asset is not fractionable")
            if klass != "simple" or tif != "day":
                raise Refused(422, 42210000, "fractional orders must be simple day orders")
        sym = self.key(body["symbol"])
        held = self.positions.get(sym, Position()).qty
        if body["side"] == "sell" and held > 0:
            free = held - self.held_for_sells(sym)
            if qty > free:
                raise Refused(403, 40310000, f"insufficient qty available for order (requested: {num(qty)}, "
                                             f"available: {num(free)})")
        elif body["side"] == "sell":
            if crypto or not (asset["shortable"] and asset["easy_to_borrow"]):
                raise Refused(403, 40310000, f"asset {sym} cannot be sold short")
        order = self._order(cid, body, qty, klass)
        if self._opening(order, qty) and qty * self._price(order) > self.buying_power():
            raise Refused(403, 40310000, "insufficient buying power")
        self.orders.append(order)
        return order

    def _order(self, cid: str, body: dict, qty: Decimal, klass: str) -> dict:
        base = {"symbol": body["symbol"], "qty": num(qty), "time_in_force": body["time_in_force"], "filled_qty": "0",
                "filled_avg_price": None, "submitted_at": self.clock, "updated_at": self.clock, "filled_at": None,
                "cancel_polls": None}
        legs = None
        if body.get("take_profit"):
            legs = [{**base, "id": str(uuid.uuid4()), "client_order_id": str(uuid.uuid4()), "type": "limit",
                     "order_type": "limit", "side": "sell" if body["side"] == "buy" else "buy", "status": "held",
                     "limit_price": str(body["take_profit"]["limit_price"]), "order_class": klass, "legs": None}]
        return {**base, "id": str(uuid.uuid4()), "client_order_id": cid, "side": body["side"], "type": body["type"],
                "order_type": body["type"], "status": "accepted",
                "limit_price": None if body.get("limit_price") is None else str(body["limit_price"]),
                "order_class": klass, "legs": legs}

    # ------------------------------------------------------------- cancel
    def cancel(self, order_id: str) -> None:
        o = self.find(order_id)
        if o is None:
            raise Refused(404, 40410000, "order not found")
        if o["status"] in TERMINAL or o["status"] == "pending_cancel":
            raise Refused(422, 42210000, f"order is already in \"{o['status']}\" state")
        o["status"], o["cancel_polls"], o["updated_at"] = "pending_cancel", self.cancel_polls, self.clock

    def poll(self, o: dict) -> None:
        """A read of a ``pending_cancel`` order brings the venue's confirmation one step closer."""
        if o["status"] == "pending_cancel" and o.get("cancel_polls") is not None:
            o["cancel_polls"] -= 1
            if o["cancel_polls"] < 0:
                self._end(o, "canceled")

    def _end(self, o: dict, status: str) -> None:
        o["status"], o["updated_at"] = status, self.clock
        for leg in o.get("legs") or []:
            if leg["status"] == "held":
                leg["status"], leg["updated_at"] = "canceled", self.clock

    # ------------------------------------------------------------- fills
    def fill(self, o: dict, qty: Decimal, price: Decimal, at: str) -> None:
        """Execute ``qty`` of order (or leg) ``o`` at ``price``: cumulative filled qty and average price, the
        position (crypto buys net of the fee in the asset, crypto sells net of it in cash), cash."""
        sym, crypto = self.key(o["symbol"]), self.asset(o["symbol"])["class"] == "crypto"
        done, avg = D(o["filled_qty"]), D(o["filled_avg_price"] or 0)
        o["filled_avg_price"] = str((done * avg + qty * price) / (done + qty))
        o["filled_qty"] = num(done + qty)
        o["status"] = "filled" if done + qty >= D(o["qty"]) else "partially_filled"
        o["updated_at"] = at
        if o["status"] == "filled":
            o["filled_at"] = at
            for leg in o.get("legs") or []:
                if leg["status"] == "held":
                    leg["status"], leg["updated_at"] = "new", at
        signed = qty if o["side"] == "buy" else -qty
        if crypto and o["side"] == "buy":
            signed = qty * (1 - self.crypto_fee)
        cash = -qty * price if o["side"] == "buy" else qty * price * (1 - self.crypto_fee if crypto else 1)
        self.cash += cash
        p = self.positions.setdefault(sym, Position())
        if p.qty == 0 or (p.qty > 0) == (signed > 0):
            p.avg = (abs(p.qty) * p.avg + abs(signed) * price) / (abs(p.qty) + abs(signed))
        elif abs(signed) > abs(p.qty):
            p.avg = price  # flipped through zero: the rest opens at this price
        p.qty += signed
        if p.qty == 0:
            del self.positions[sym]

    def session(self, day: str, bars: dict[str, dict]) -> None:
        """Play one session: pending cancels complete, queued orders go live, each working order fills by the
        day's bar (in the order sent), day orders still working at the close expire; then the clock is the close."""
        at = f"{day[:10]}{CLOSE_HOUR}"
        with self.lock:
            for o in self.everything():
                if o["status"] == "pending_cancel":
                    self._end(o, "canceled")
                elif o["status"] == "accepted":
                    o["status"] = "new"
            activated: set[str] = set()  # legs whose entry filled in this bar
            for o in list(self.everything()):
                bar = bars.get(self.key(o["symbol"]))
                if bar is None or o["status"] not in ("new", "partially_filled") or o["id"] in activated:
                    continue
                price = self._fill_price(o, bar)
                if price is None:
                    continue
                self.fill(o, D(o["qty"]) - D(o["filled_qty"]), price, at)
                for leg in o.get("legs") or []:
                    activated.add(leg["id"])
                    tp, close = D(leg["limit_price"]), D(bar["c"])
                    if leg["status"] == "new" and (close >= tp if leg["side"] == "sell" else close <= tp):
                        self.fill(leg, D(leg["qty"]), tp, at)
            for o in self.everything():
                if o["status"] in ("new", "partially_filled") and o["time_in_force"] == "day":
                    self._end(o, "expired")
            self.last.update({s: D(b["c"]) for s, b in bars.items()})
            self.clock = at

    @staticmethod
    def _fill_price(o: dict, bar: dict) -> Decimal | None:
        op, hi, lo = D(bar["o"]), D(bar["h"]), D(bar["l"])
        if o["type"] == "market":
            return op
        limit = D(o["limit_price"])
        if o["side"] == "buy":
            return min(op, limit) if lo <= limit else None
        return max(op, limit) if hi >= limit else None
