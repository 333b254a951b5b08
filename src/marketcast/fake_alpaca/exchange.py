"""The account behind the fake Alpaca server (:mod:`marketcast.fake_alpaca.server`): orders, positions, cash,
the account's flags, and a bar driver that plays a day's bar through the working orders.

Whether an order is accepted is decided by :mod:`marketcast.fake_alpaca.rules`, written from Alpaca's pages
alone (each rule cited there); this module keeps the books those rules read, as the venue keeps its own:

* ``qty_available``: the position less what open sell orders hold, a ``pending_cancel`` one included, and an
  active take-profit leg (QuantConnect/Lean#3875, alpaca-trade-api-csharp#247).
* Buying power (orders-at-alpaca, "Buying Power"; margin-and-short-selling): ``multiplier`` x equity (1x under
  $2,000 of equity) less the positions' market value and what open opening orders are valued at;
  ``non_marginable_buying_power`` (what crypto may draw on) is cash less what open opening orders are valued
  at, never margin.
* Day trades (user-protection, "The Rule", FINRA's examples A-F): per symbol and day, each closing fill after
  an opening fill of the same day counts one; ``daytrade_count`` is those of the last 5 sessions,
  ``last_equity`` the equity at the previous session's close (reported as Alpaca did before 2026-07-06;
  ``reports_day_trades`` False drops them, as Alpaca does since).
* Cancels are asynchronous: ``DELETE /v2/orders/{id}`` answers 204 and the order is ``pending_cancel`` until
  the venue confirms (here: after ``cancel_polls`` reads of the order, or the next session); a terminal order
  answers 422 (``DELETE /v2/orders/{order_id}``: "The order status is not cancelable").
* An OTO entry's take-profit leg is ``held`` until the entry fills, then ``new`` (orders-at-alpaca, "OTO
  Orders" / "Bracket Orders"); legs are listed as orders of their own unless ``nested=true``.
* ``day`` orders not filled by the close end (``expired``; "If unfilled after the closing auction, it is
  automatically canceled", orders-at-alpaca, "Time in Force"); ``cls`` orders fill at the close of the session
  whose closing auction they joined (:func:`~marketcast.fake_alpaca.market.closing_auction`), a limit one only at
  or better than its limit, else end ``canceled`` ("Any unfilled orders after the close will be cancelled"); ``gtc`` orders end :data:`~.rules.GTC_DAYS`
  days after their submission (:meth:`Exchange.sweep`; see the rules module on the source); orders sent after
  the close wait as ``accepted`` for the next session ("Order Lifecycle").
* Positions: signed ``qty``, ``qty_available``, ``avg_entry_price`` (weighted over buys into the position,
  unchanged by reductions; position entity). Cash moves with every fill; crypto fees are taken in the asset
  received (crypto-trading, "Crypto Fees": buy BTC/USD -> the fee is in BTC).
* Duplicate ``client_order_id``: 422 ``{"code": 40010001, "message": "client_order_id must be unique"}``;
  at most 48 characters (``POST /v2/orders`` body reference).

The fill rule of :meth:`Exchange.session` is the fake's, not Alpaca's (a real venue fills from its book): a
buy limit fills if the bar's low reaches it, at the better of open and limit; a market order at the open; a
take-profit leg activated in the bar fills only if the bar closes beyond it.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from marketcast.fake_alpaca import market, rules
from marketcast.fake_alpaca.rules import MARGIN_FLOOR, D, Flags, Refused, Working

TERMINAL = ("filled", "canceled", "expired", "replaced", "rejected")
CLOSE_HOUR = "T21:00:00Z"  # 16:00 New York (EST) in UTC: when a session's day orders end


def num(x: Decimal) -> str:
    """A decimal as Alpaca prints quantities: ``10``, ``0.25`` (never ``1E+1``)."""
    return format(x.normalize(), "f")


def ny_day(ts: str) -> str:
    """The New York trading date of a UTC timestamp (a session's date, as day trades are counted)."""
    return when(ts).astimezone(ZoneInfo("America/New_York")).date().isoformat()


def when(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


@dataclass
class Position:
    qty: Decimal = Decimal(0)
    avg: Decimal = Decimal(0)


@dataclass
class Exchange:
    assets: dict[str, dict]
    cash: Decimal = Decimal(100_000)
    multiplier: Decimal = Decimal(2)  # a margin account (margin-and-short-selling: 2x overnight)
    crypto_fee: Decimal = Decimal("0.0015")  # maker tier 1; the loop assumes at most 0.0025
    cancel_polls: int = 1
    account_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: str = "2024-05-01T20:00:00Z"
    orders: list[dict] = field(default_factory=list)
    positions: dict[str, Position] = field(default_factory=dict)
    last: dict[str, Decimal] = field(default_factory=dict)
    quotes: dict[str, tuple[Decimal, Decimal]] = field(default_factory=dict)  # symbol -> (bid, ask); else last
    flags: Flags = field(default_factory=Flags)
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
        return self.assets.get(self.key(symbol))

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

    def quote(self, sym: str) -> tuple[Decimal, Decimal]:
        """(bid, ask) the venue judges an order by: the quote set for ``sym``, else its last price."""
        last = self.last.get(sym, Decimal(0))
        return self.quotes.get(sym, (last, last))

    def free(self, sym: str) -> Decimal:
        held = self.positions.get(sym, Position()).qty
        return held - self.held_for_sells(sym) if held > 0 else held

    def equity(self) -> Decimal:
        return self.cash + sum((p.qty * self.last.get(s, p.avg) for s, p in self.positions.items()), Decimal(0))

    def _committed(self) -> Decimal:
        """What open opening orders are valued at ("Buying Power": buys at their limit, shorts 3 % over the
        ask, crypto market buys at the collar)."""
        out = Decimal(0)
        for o in self.orders:
            rest = D(o["qty"]) - D(o["filled_qty"])
            sym = self.key(o["symbol"])
            held = self.positions.get(sym, Position()).qty
            opening = (o["side"] == "buy" and held >= 0) or (o["side"] == "sell" and held <= 0)
            if o["status"] not in TERMINAL and rest > 0 and opening:
                limit = None if o.get("limit_price") is None else D(o["limit_price"])
                out += rules.value(o["side"], o["type"], rest, limit, self.quote(sym)[1],
                                   self.assets[sym]["class"] == "crypto")
        return out

    def buying_power(self) -> Decimal:
        """``multiplier`` x equity, 1x under the $2,000 margin floor, less positions and open opening orders."""
        equity = self.equity()
        used = sum((abs(p.qty) * self.last.get(s, p.avg) for s, p in self.positions.items()), Decimal(0))
        times = self.multiplier if equity >= MARGIN_FLOOR else min(self.multiplier, Decimal(1))
        return max(Decimal(0), times * equity - used - self._committed())

    def non_marginable_buying_power(self) -> Decimal:
        """Cash, never margin, less what open opening orders hold back: what crypto may draw on."""
        return max(Decimal(0), self.cash - self._committed())

    def daytrade_count(self) -> int:
        recent = set(self.sessions[-5:]) | {ny_day(self.clock)}
        return sum(1 for d in self.day_trades if d in recent)

    def previous_equity(self) -> Decimal:
        return self.last_equity if self.last_equity is not None else self.equity()

    def account_json(self) -> dict:
        """``GET /v2/account`` (alpaca-py ``TradeAccount``'s names; numbers as strings, as Alpaca sends them)."""
        f = self.flags
        out = {"id": self.account_id, "status": "ACTIVE", "currency": "USD", "cash": str(self.cash),
               "equity": str(self.equity()), "buying_power": str(self.buying_power()),
               "non_marginable_buying_power": str(self.non_marginable_buying_power()),
               "multiplier": str(self.multiplier), "account_blocked": f.account_blocked,
               "trading_blocked": f.trading_blocked, "trade_suspended_by_user": f.trade_suspended_by_user,
               "shorting_enabled": f.shorting_enabled, "crypto_status": f.crypto_status}
        if self.reports_day_trades:  # Alpaca reported these until 2026-07-06
            out.update(last_equity=str(self.previous_equity()), daytrade_count=self.daytrade_count(),
                       pattern_day_trader=self.pattern_day_trader)
        return out

    def position_json(self, sym: str) -> dict:
        """One ``GET /v2/positions`` row."""
        p = self.positions[sym]
        last = self.last.get(sym, p.avg)
        return {"symbol": sym, "qty": num(p.qty), "qty_available": num(self.free(sym)), "avg_entry_price": num(p.avg),
                "side": "long" if p.qty > 0 else "short",
                "asset_class": "crypto" if self.assets[sym]["class"] == "crypto" else "us_equity",
                "market_value": str(p.qty * last), "current_price": str(last)}

    def working(self) -> list[Working]:
        """Every order and leg not yet terminal, as the wash table reads them."""
        return [Working(x["symbol"], x["side"], x["type"], None if x.get("limit_price") is None
                        else D(x["limit_price"]), x["status"], o["id"])
                for o in self.orders for x in (o, *(o.get("legs") or [])) if x["status"] not in TERMINAL]

    # ------------------------------------------------------------- submit
    def submit(self, body: dict) -> dict:
        """Judge ``body`` by :mod:`~marketcast.fake_alpaca.rules`, then book it (``accepted`` until the next
        session)."""
        self.sweep()
        cid = body.get("client_order_id") or str(uuid.uuid4())
        if len(cid) > rules.MAX_CLIENT_ID:
            raise Refused(422, 40010001, "client_order_id must be no more than 48 characters")
        if any(o["client_order_id"] == cid for o in self.orders):
            raise Refused(422, 40010001, "client_order_id must be unique")
        asset = self.asset(body["symbol"])
        if asset is None or not asset["tradable"]:
            raise Refused(422, 42210000, f"asset \"{body['symbol']}\" not found or not tradable")
        sym, crypto = self.key(body["symbol"]), asset["class"] == "crypto"
        held, equity = self.positions.get(sym, Position()).qty, self.equity()
        bid, ask = self.quote(sym)
        rules.flags(body, crypto, body["side"] == "sell" and held <= 0, self.flags)
        rules.prices(body, asset)
        rules.shape(body, asset)
        auction = None
        if body["time_in_force"] == "cls":  # a stock's (shape refuses a crypto cls)
            auction, cutoff = market.closing_auction(self.clock)
            rules.on_close(auction, cutoff)
        if not crypto:
            rules.take_profit_base(body, bid, ask)
        power = self.non_marginable_buying_power() if crypto else self.buying_power()
        rules.carry(body, asset, held, self.free(sym), equity, power, ask)
        rules.wash(rules.legs(body, cid), self.working(), self.key)
        working, today = self.working(), ny_day(self.clock)
        opposite = any(self.key(w.symbol) == sym and w.side != body["side"] for w in working)
        fresh = {s: p.qty for s, p in self.positions.items() if self.opened_on.get(s) == today}
        stocks = [w for w in working if self.asset(w.symbol)["class"] != "crypto"]  # crypto: no PDT evaluation
        elsewhere = len(rules.pending(stocks, fresh, self.key) - {sym})
        rules.day_trade(body, crypto, held, self.opened_on.get(sym) == today, opposite, self.reports_day_trades,
                        self.previous_equity(), self.daytrade_count(), self.pattern_day_trader, elsewhere)
        order = self._order(cid, body, D(body["qty"]), body.get("order_class") or "simple")
        order["auction"] = auction  # the session whose close a cls order joins (not shown on the wire)
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

    def sweep(self) -> None:
        """``gtc`` orders :data:`~marketcast.fake_alpaca.rules.GTC_DAYS` days old or more end ``expired``."""
        now = when(self.clock)
        for o in self.orders:
            if (o["time_in_force"] == "gtc" and o["status"] not in TERMINAL
                    and now - when(o["submitted_at"]) >= timedelta(days=rules.GTC_DAYS)):
                self._end(o, "expired")
                for leg in o.get("legs") or []:
                    if leg["status"] not in TERMINAL:
                        leg["status"], leg["updated_at"] = "expired", self.clock

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

    def session(self, day: str, bars: dict[str, dict], stocks_open: bool = True, phase: str = "all") -> None:
        """Play one session, whole (``phase`` "all") or in its two phases, "open" then "close", so that a client
        can act in between, before the ``cls`` cutoff (:func:`marketcast.fake_alpaca.market.phases`).

        The open: pending cancels complete, queued orders go live, each working order (a ``cls`` order apart)
        fills by the day's bar (in the order sent); the clock stops :data:`~.market.MIDDAY` before the cutoff.
        The close: pending cancels complete, the ``cls`` orders of this session's closing auction fill at the
        bar's close (a limit one only at or better than its limit; "Any unfilled orders after the close will be
        cancelled"), day orders still working expire; then the clock is the close. An order other than ``cls``
        sent between the phases waits for the next session (the fake has no prices inside the bar).
        On a day NYSE is closed (``stocks_open`` False: a weekend or holiday) only crypto trades, 24/7
        (crypto-trading: "available 24/7"): stock orders stay as they are and the day is no session."""
        if phase not in ("all", "open", "close"):
            raise ValueError(f"phase must be all, open or close, not {phase!r}")
        at = f"{day[:10]}{CLOSE_HOUR}"
        with self.lock:
            if phase in ("all", "open"):
                opened = market.phases(day)[0].strftime(market.STAMP) if phase == "open" and stocks_open else at
                self._open(day, bars, stocks_open, opened)
                if phase == "open":
                    self.clock = ((market.phases(day)[1] - market.MIDDAY).strftime(market.STAMP) if stocks_open
                                  else at)
            if phase in ("all", "close"):
                self._close(day, bars, stocks_open, at)

    def _trading(self, stocks_open: bool) -> list[dict]:
        return [o for o in self.everything() if stocks_open or self.asset(o["symbol"])["class"] == "crypto"]

    def _confirm_cancels(self) -> None:
        for o in self.everything():
            if o["status"] == "pending_cancel":
                self._end(o, "canceled")

    def _open(self, day: str, bars: dict[str, dict], stocks_open: bool, at: str) -> None:
        if stocks_open:
            self.last_equity = self.equity()  # marked at the previous close: the session has not traded yet
            self.sessions.append(day[:10])
        self.sweep()
        trading = self._trading(stocks_open)
        self._confirm_cancels()
        for o in trading:
            if o["status"] == "accepted":
                o["status"] = "new"
        activated: set[str] = set()  # legs whose entry filled in this bar
        for o in trading:
            bar = bars.get(self.key(o["symbol"]))
            if (bar is None or o["status"] not in ("new", "partially_filled") or o["id"] in activated
                    or o["time_in_force"] == "cls"):
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

    def _close(self, day: str, bars: dict[str, dict], stocks_open: bool, at: str) -> None:
        trading = self._trading(stocks_open)
        self._confirm_cancels()
        for o in trading:
            if o["time_in_force"] != "cls" or o["status"] not in ("accepted", "new", "partially_filled"):
                continue
            if o.get("auction", day[:10]) > day[:10]:
                continue  # queued for a later session's close
            bar = bars.get(self.key(o["symbol"])) if o.get("auction", day[:10]) == day[:10] else None
            close = None if bar is None else D(bar["c"])
            limit = None if o.get("limit_price") is None else D(o["limit_price"])
            if close is not None and (limit is None or (close <= limit if o["side"] == "buy" else close >= limit)):
                self.fill(o, D(o["qty"]) - D(o["filled_qty"]), close, at)
            else:
                self._end(o, "canceled")
        for o in trading:
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
