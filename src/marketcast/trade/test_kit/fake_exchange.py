"""The account behind the fake Alpaca server (:mod:`marketcast.trade.test_kit.fake_alpaca`): orders, positions,
cash, and a bar driver that plays a day's bar through the working orders.

Whether an order is accepted is asked of the shared rules model
(:func:`marketcast.trade.risk.protections.refusals`, each rule cited there: wash trades, pattern-day-trader
protection, the OTO take-profit's base price, crypto on non-marginable buying power, shorts valued 3 % over the
ask, free quantity, buying power), the same model the paper broker refuses with and the loop checks with, so the
venue, the paper broker and the loop agree; the fake answers its verdict with Alpaca's HTTP status, code and
message. Its account mechanics stay its own: the figures the model is given (cash, equity, both buying powers,
``qty_available``, the day-trade count, which orders are working) are computed here, as the venue keeps its
own books, and so are the order-shape checks below (written apart from the model, a second reading of the
same pages).

Each rule the fake keeps and where Alpaca states it:

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
* ``qty_available``: the position less what open sell orders hold, a ``pending_cancel`` one included, and an
  active take-profit leg (QuantConnect/Lean#3875, alpaca-trade-api-csharp#247); the model refuses selling more.
* Buying power: ``multiplier`` x equity less what positions and open opening orders use (a margin account,
  multiplier 2); ``non_marginable_buying_power`` (what crypto may draw: "Cryptocurrencies are non-marginable ...
  orders are evaluated against non_marginable_buying_power", crypto-trading, "Margin and Short Selling") is cash
  less what open opening orders use, never margin.
* Day trades (user-protection, "The Rule", FINRA's examples A-F): per symbol and day, each closing fill after an
  opening fill of the same day counts one; ``daytrade_count`` is those of the last 5 sessions, ``last_equity``
  the equity at the previous session's close (reported as Alpaca did before 2026-07-06; ``reports_day_trades``
  False drops them, as Alpaca does since).
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
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from marketcast.trade.risk.protections import Standing, refusals
from marketcast.trade.risk.rules import opening_value
from marketcast.trade.types import Asset
from marketcast.trade.types import Account, Order, OrderRequest

TERMINAL = ("filled", "canceled", "expired", "replaced", "rejected")
CLOSE_HOUR = "T21:00:00Z"  # 16:00 New York (EST) in UTC: when a session's day orders end


class Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def D(x) -> Decimal:  # noqa: N802
    return Decimal(str(x))


def _f(x) -> float | None:
    return None if x is None or x == "" else float(x)


def num(x: Decimal) -> str:
    """A decimal as Alpaca prints quantities: ``10``, ``0.25`` (never ``1E+1``)."""
    return format(x.normalize(), "f")


def on_grid(value: Decimal, step: Decimal) -> bool:
    return (value / step) % 1 == 0


def ny_day(ts: str) -> str:
    """The New York trading date of a UTC timestamp (a session's date, as day trades are counted)."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(ZoneInfo("America/New_York")).date().isoformat()


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
    reports_day_trades: bool = True  # Alpaca's account carried daytrade_count & co. until 2026-07-06
    pattern_day_trader: bool = False
    last_equity: Decimal | None = None  # equity at the previous session's close (None: none played yet)
    sessions: list[str] = field(default_factory=list)  # the days played, in order
    day_trades: list[str] = field(default_factory=list)  # the day of each day trade
    marks: dict[tuple[str, str], str] = field(default_factory=dict)  # (symbol, day) -> "open" | "closed"
    opened_on: dict[str, str] = field(default_factory=dict)  # symbol -> the day of its last opening fill

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

    def _committed(self) -> Decimal:
        """What open opening orders hold back, valued as Alpaca values them (shorts 3 % over the ask)."""
        out = Decimal(0)
        for o in self.orders:
            rest = D(o["qty"]) - D(o["filled_qty"])
            if o["status"] not in TERMINAL and rest > 0 and self._opening(o, rest):
                req = OrderRequest(o["symbol"], o["side"], float(rest), o["client_order_id"], "limit" if
                                   o.get("limit_price") is not None else "market", _f(o.get("limit_price")))
                out += D(opening_value(req, float(self.last.get(self.key(o["symbol"]), 0))))
        return out

    def buying_power(self) -> Decimal:
        used = sum((abs(p.qty) * self.last.get(s, p.avg) for s, p in self.positions.items()), Decimal(0))
        return max(Decimal(0), self.multiplier * self.equity() - used - self._committed())

    def non_marginable_buying_power(self) -> Decimal:
        """Cash, never margin, less what open opening orders hold back: what crypto may draw on."""
        return max(Decimal(0), self.cash - self._committed())

    def daytrade_count(self) -> int:
        recent = set(self.sessions[-5:]) | {ny_day(self.clock)}
        return sum(1 for d in self.day_trades if d in recent)

    def account(self) -> Account:
        """The account's figures as the rules model reads them."""
        equity = self.equity()
        return Account(float(equity), float(self.cash), float(self.buying_power()), self.account_id,
                       float(self.non_marginable_buying_power()),
                       float(self.last_equity if self.last_equity is not None else equity)
                       if self.reports_day_trades else None,
                       self.daytrade_count() if self.reports_day_trades else None,
                       self.pattern_day_trader if self.reports_day_trades else None)

    def model_orders(self) -> list[Order]:
        """Every order and leg not yet terminal, as the model sees them (a leg names its parent)."""
        out = []
        for o in self.orders:
            legs = o.get("legs") or []
            tp = next((_f(leg["limit_price"]) for leg in legs), None)
            for x, parent in ((o, None), *((leg, o["client_order_id"]) for leg in legs)):
                if x["status"] not in TERMINAL:
                    out.append(Order(x["id"], x["client_order_id"], self.key(x["symbol"]), x["side"], float(x["qty"]),
                                     x["type"], x["status"], _f(x.get("limit_price")),
                                     tp if parent is None else None, parent_client_order_id=parent))
        return out

    def model_asset(self, asset: dict, symbol: str) -> Asset:
        return Asset(self.key(symbol), "crypto" if asset["class"] == "crypto" else "stock", asset["tradable"],
                     asset["fractionable"], asset["shortable"], asset["easy_to_borrow"],
                     _f(asset.get("min_order_size")), _f(asset.get("min_trade_increment")),
                     _f(asset.get("price_increment")))

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
        if body["type"] not in ("limit", "market"):
            raise Refused(422, 42210000, f"the fake takes limit and market orders only, not {body['type']}")
        if body["type"] == "limit" and body.get("limit_price") is None:
            raise Refused(422, 40010001, "limit_price is required for limit orders")
        # the shared rules model judges what the account can take
        held = self.positions.get(sym, Position()).qty
        request = OrderRequest(body["symbol"], body["side"], float(qty), cid, body["type"],
                               _f(body.get("limit_price")), _f((body.get("take_profit") or {}).get("limit_price")),
                               tif)
        last = float(self.last.get(sym, 0))
        free = float(held - self.held_for_sells(sym)) if held > 0 else 0.0
        standing = Standing(self.account(), last, float(held), free, self.model_orders(), last,
                            self.opened_on.get(sym) == ny_day(self.clock))
        refused = refusals(request, self.model_asset(asset, sym), standing)
        if refused:
            raise Refused(refused[0].status, refused[0].code, refused[0].message)
        order = self._order(cid, body, qty, klass)
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
        if not crypto:  # crypto is not subject to the PDT rule
            self._count_day_trade(sym, p.qty, signed, ny_day(at))
        if p.qty == 0 or (p.qty > 0) == (signed > 0):
            p.avg = (abs(p.qty) * p.avg + abs(signed) * price) / (abs(p.qty) + abs(signed))
        elif abs(signed) > abs(p.qty):
            p.avg = price  # flipped through zero: the rest opens at this price
        p.qty += signed
        if p.qty == 0:
            del self.positions[sym]

    def _count_day_trade(self, sym: str, held: Decimal, signed: Decimal, day: str) -> None:
        """A closing fill after an opening fill of the same day is one day trade (FINRA's examples: buy, buy,
        sell is one; buy, sell, buy, sell two); a fill through zero closes, then opens."""
        opening = held == 0 or (held > 0) == (signed > 0)
        if not opening:
            if self.marks.get((sym, day)) == "open":
                self.day_trades.append(day)
            self.marks[(sym, day)] = "closed"
            opening = abs(signed) > abs(held)
        if opening:
            self.marks[(sym, day)] = "open"
            self.opened_on[sym] = day

    def session(self, day: str, bars: dict[str, dict]) -> None:
        """Play one session: pending cancels complete, queued orders go live, each working order fills by the
        day's bar (in the order sent), day orders still working at the close expire; then the clock is the close."""
        at = f"{day[:10]}{CLOSE_HOUR}"
        with self.lock:
            self.last_equity = self.equity()  # marked at the previous close: the session has not traded yet
            self.sessions.append(day[:10])
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
