"""The judge's side of the differential test (``tests/trade/test_fake_differential.py``): the account states it
builds in the fake Alpaca, the orders it writes as the raw JSON body of ``POST /v2/orders``, and the replies it
reads back as JSON. It imports nothing of ``marketcast.trade`` (``tests/trade/test_fake_alpaca_apart.py`` reads
its imports, and theirs): the loop's request builder, types and parsers appear only on the side under test, so
a mistake there shows as a disagreement instead of being shared by both sides.

The body's fields, from Alpaca's "Create an order" reference (https://docs.alpaca.markets/reference/postorder;
its source, alpacahq/alpaca-docs ``data/webapi/endpoints/orders.yaml``, ``POST /v2/orders``):

* ``symbol``: "symbol, asset ID, or currency pair to identify the asset to trade"; a stock by its ticker
  (``ABC``), crypto as its pair (``BTC/USD``, as the body in https://docs.alpaca.markets/docs/crypto-orders
  writes it);
* ``qty``: ``string<number>``, "number of shares to trade. Can be fractionable for only market and day order
  types" (written as a decimal string, as that page's ``"qty": "0.0001"``);
* ``side``: ``buy`` or ``sell``;
* ``type``: ``market``, ``limit``, ``stop``, ``stop_limit`` or ``trailing_stop``; the judge writes ``market``
  and ``limit``, the two the loop sends;
* ``time_in_force``: the values of "Time in Force" (https://docs.alpaca.markets/docs/orders-at-alpaca):
  ``day`` and ``gtc`` for stocks, ``gtc`` and ``ioc`` for crypto ("We only support gtc and ioc time in force
  options for crypto orders", crypto-orders), and now and then a ``day`` crypto order the venue refuses; one
  order in five becomes ``cls`` ("market on close" or "limit on close": "CLS orders
  submitted after 3:50pm but before 7:00pm ET will be rejected. CLS orders submitted after 7:00pm will be queued
  and routed to the following day's closing auction", same section) sent at one of :data:`CLS_CLOCKS`;
* ``limit_price``: ``string<number>``, "required if type is limit or stop_limit" (absent on a market order);
* ``order_class``: "simple, bracket, oco or oto"; absent (simple) unless a take-profit leg is attached, then
  ``oto`` (one-triggers-other: "Bracket Orders" / "OTO", https://docs.alpaca.markets/docs/orders-at-alpaca);
* ``take_profit.limit_price``: ``string<number>``, "Additional parameters for take-profit leg of advanced
  orders";
* ``client_order_id``: "string (<= 48 characters) A unique identifier for the order".

Not written, as the loop sends none of them: ``notional`` ("Cannot work with qty"), ``stop_price``,
``trail_price``/``trail_percent``, ``stop_loss`` and ``extended_hours`` ("(default) false"). Were the loop's
body to carry one, the test's comparison of the two bodies would show it.

The reply (same reference): 200 with "The new Order object" (the order entity,
alpacahq/alpaca-docs ``data/webapi/entities/order-v2.yaml``: ``id``, ``client_order_id``, ``status``, ...), or
403 "Buying power or shares is not sufficient" / 422 "Input parameters are not recognized" with Alpaca's error
body ``{"code": ..., "message": ...}``. The request travels as JSON text and is decoded as the fake's HTTP
handler decodes it; the fake's answer is encoded and read back as JSON text. The socket is left out (it
changes no verdict and would multiply the test's time).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from marketcast.fake_alpaca.exchange import Exchange, Position, ny_day
from marketcast.fake_alpaca.rules import Flags
from marketcast.fake_alpaca.server import post_order

CLOCK = "2024-05-01T19:00:00Z"  # a Wednesday, in the session
CLS_CLOCKS = (  # around the cutoff (3:50 pm EDT = 19:50Z; 12:50 pm EST = 17:50Z on 2024-11-29's 1:00 pm close)
    "2024-05-01T13:00:00Z", "2024-05-01T19:46:00Z", "2024-05-01T19:50:00Z", "2024-05-01T19:50:01Z",
    "2024-05-01T20:00:00Z", "2024-05-01T22:59:59Z", "2024-05-01T23:00:00Z", "2024-11-29T17:47:00Z",
    "2024-11-29T17:50:00Z", "2024-11-29T17:51:00Z", "2024-11-29T19:30:00Z", "2024-11-29T23:30:00Z")
TODAY = ny_day(CLOCK)
STOCK = {"class": "us_equity", "tradable": True, "fractionable": True, "shortable": True, "easy_to_borrow": True,
         "min_order_size": None, "min_trade_increment": None, "price_increment": None}
NUMBERS = ("qty", "notional", "limit_price", "stop_price", "trail_price", "trail_percent")  # string<number>


# ------------------------------------------------------------------ the wire
def number(x: float | Decimal) -> str:
    """A ``string<number>``: the shortest decimal text of ``x`` (a float as it prints), never an exponent."""
    return format(Decimal(str(x)).normalize(), "f")


def body(symbol: str, side: str, qty: float, client_order_id: str, type: str = "limit",
         limit_price: float | None = None, take_profit: float | None = None, time_in_force: str = "day") -> dict:
    """The JSON body of ``POST /v2/orders`` for one order, field by field as the module's docstring cites."""
    out = {"symbol": symbol, "qty": number(qty), "side": side, "type": type, "time_in_force": time_in_force,
           "client_order_id": client_order_id}
    if limit_price is not None:
        out["limit_price"] = number(limit_price)
    if take_profit is not None:
        out.update(order_class="oto", take_profit={"limit_price": number(take_profit)})
    return out


def read(sent: dict) -> dict:
    """A body as the venue reads it: every ``string<number>`` (top level and in ``take_profit``/``stop_loss``)
    as a decimal, so ``"10"``, ``10`` and ``10.0`` are one quantity; the rest as written."""
    out = {}
    for k, v in sent.items():
        if isinstance(v, dict):
            out[k] = read(v)
        else:
            out[k] = Decimal(str(v)) if k in NUMBERS and v is not None else v
    return out


@dataclass(frozen=True)
class Reply:
    """The venue's answer, read from its JSON: ``status`` 200 and the order entity, or a refusal's code and
    message."""

    status: int
    code: int | None
    message: str | None
    order: dict | None

    @property
    def accepted(self) -> bool:
        return self.status == 200


def post(ex: Exchange, sent: dict) -> Reply:
    """``sent`` to the fake's ``POST /v2/orders`` as JSON text; its answer read back from JSON text."""
    status, payload = post_order(ex, json.loads(json.dumps(sent)))
    reply = json.loads(json.dumps(payload))
    if status == 200:
        assert reply["client_order_id"] == sent["client_order_id"] and reply["id"], reply
        return Reply(status, None, None, reply)
    return Reply(status, reply["code"], reply["message"], None)


# ------------------------------------------------------------------ one account, by hand
def account(cash: float = 100_000, multiplier: int = 2, crypto_price: str = "100", **kw) -> Exchange:
    """ABC (a stock) at 100.00 bid/ask, BTCUSD at ``crypto_price`` (increment 0.01), nothing held."""
    ex = Exchange({"ABC": dict(STOCK), "BTCUSD": crypto_asset(float(crypto_price))}, cash=Decimal(str(cash)),
                  multiplier=Decimal(multiplier), clock=CLOCK, **kw)
    ex.last.update({"ABC": Decimal(100), "BTCUSD": Decimal(crypto_price)})
    ex.quotes.update({"ABC": (Decimal(100), Decimal(100)), "BTCUSD": (Decimal(crypto_price), Decimal(crypto_price))})
    return ex


def placed(ex: Exchange, sent: dict, days_ago: int = 0) -> dict:
    """``sent`` accepted by the venue and working (``new``), sent ``days_ago`` days ago: the venue's record."""
    reply = post(ex, sent)
    assert reply.accepted, reply
    o = ex.orders[-1]
    o["status"], o["submitted_at"] = "new", f"{date.fromisoformat(TODAY) - timedelta(days=days_ago)}T15:00:00Z"
    return o


# ------------------------------------------------------------------ the generator
def crypto_asset(price: float) -> dict:
    inc = "1" if price >= 1_000 else "0.01" if price >= 1 else "0.0001"
    return {"class": "crypto", "tradable": True, "fractionable": True, "shortable": False, "easy_to_borrow": False,
            "min_order_size": "0.0001" if price >= 1 else "1", "min_trade_increment": "0.0001" if price >= 1 else "1",
            "price_increment": inc}


def price_of(rng: random.Random, crypto: bool) -> Decimal:
    if crypto:
        return Decimal(str(rng.choice([round(rng.uniform(20_000, 70_000)), round(rng.uniform(1, 900), 2),
                                       round(rng.uniform(0.05, 0.99), 4)])))
    if rng.random() < 0.35:
        return Decimal(str(round(rng.uniform(0.05, 0.99), 4)))
    return Decimal(str(round(rng.uniform(1.0, 500.0), 2)))


def near(rng: random.Random, p: Decimal, spread: float = 0.05) -> float:
    """A price near ``p`` with 2 to 5 decimals (some off the grid), now and then far away (10x, 1/10)."""
    x = float(p) * (rng.choice([0.1, 10.0]) if rng.random() < 0.05 else 1 + rng.uniform(-spread, spread))
    return max(round(x, rng.choice([2, 2, 2, 2, 2, 2, 3, 4, 4, 5])), 0.0001)


def on_step(rng: random.Random, asset: dict, lo: float, hi: float) -> float:
    step = Decimal(asset["min_trade_increment"])
    n = max(1, int(Decimal(str(rng.uniform(lo, hi))) / step))
    q = n * step
    if rng.random() < 0.05:
        q += step / 3  # off the grid
    return float(q)


def world(rng: random.Random, i: int) -> tuple[Exchange, dict]:
    """One seeded account state in the fake and the body of the order sent to it."""
    crypto = rng.random() < 0.4
    sym = "BTCUSD" if crypto else "ABC"
    p = price_of(rng, crypto)
    asset = crypto_asset(float(p)) if crypto else dict(STOCK, shortable=rng.random() > 0.1,
                                                        easy_to_borrow=rng.random() > 0.1,
                                                        tradable=rng.random() > 0.02)
    other = {"class": "us_equity", **{k: v for k, v in STOCK.items() if k != "class"}}
    flags = Flags(account_blocked=rng.random() < 0.04, trading_blocked=rng.random() < 0.04,
                  trade_suspended_by_user=rng.random() < 0.03, shorting_enabled=rng.random() > 0.08,
                  crypto_status=rng.choice(["ACTIVE"] * 12 + ["INACTIVE", "SUBMITTED"]))
    cash = Decimal(str(round(10 ** rng.uniform(2.5, 5.5), 2)))
    ex = Exchange({sym: asset, "XYZ": other}, cash=cash, multiplier=Decimal(rng.choice([1, 2])), clock=CLOCK,
                  flags=flags, reports_day_trades=rng.random() < 0.8, pattern_day_trader=rng.random() < 0.1)
    ex.last.update({sym: p, "XYZ": Decimal("50")})
    tick = Decimal(asset["price_increment"]) if crypto else (Decimal("0.01") if p >= 1 else Decimal("0.0001"))
    ex.quotes[sym] = (p, p + tick * rng.choice([0, 1, 5]))
    roll = rng.random()
    size = on_step(rng, asset, 0.001, 0.5) if crypto and p >= 1_000 else float(rng.randint(1, 300))
    if roll < 0.3:
        ex.positions[sym] = Position(Decimal(str(size)), p)
    elif roll < 0.45 and not crypto:
        ex.positions[sym] = Position(-Decimal(str(size)), p)
        ex.cash += Decimal(str(size)) * p  # the short's proceeds
    if rng.random() < 0.3:
        ex.positions["XYZ"] = Position(Decimal(rng.randint(1, 200)), Decimal("50"))
    ex.last_equity = ex.equity() * Decimal(str(rng.choice([0.5, 1.0, 1.5])))
    ex.day_trades = [TODAY] * rng.randint(0, 4)
    if rng.random() < 0.4:
        ex.opened_on[sym] = TODAY
    for k in range(rng.choice([0, 0, 1, 1, 2])):
        ex.orders.append(existing(rng, ex, sym, asset, p, f"old-{i}-{k}"))
    if rng.random() < 0.2:
        ex.orders.append(existing(rng, ex, "XYZ", other, Decimal("50"), f"other-{i}"))
    sent = request(rng, sym, asset, p, f"mc-{i}", size)
    sent = near_power(rng, ex, sent, asset) if rng.random() < 0.4 else sent
    own = random.Random(i)  # draws of its own, so the stream above is the one it always drew
    if "XYZ" in ex.positions and own.random() < 0.5:  # the other symbol's position opened today: a working
        ex.opened_on["XYZ"] = TODAY  # order that would close it is a pending day trade (PDT protection)
    if own.random() < 0.3:
        ex.orders.append(existing(own, ex, "XYZ", other, Decimal("50"), f"xyz-{i}"))
    return ex, (on_close(own, ex, sent) if own.random() < 0.2 else sent)


def on_close(rng: random.Random, ex: Exchange, sent: dict) -> dict:
    """``sent`` as a ``cls`` order (market on close, or limit on close where it has a limit; its take-profit leg
    dropped four times in five) sent at one of :data:`CLS_CLOCKS`: before, at and after the cutoff, after 7:00 pm,
    on a full and an early-close day."""
    ex.clock = rng.choice(CLS_CLOCKS)
    if rng.random() < 0.8:  # mostly simple, as the loop's exits (an OTO one the venue refuses)
        sent = {k: v for k, v in sent.items() if k not in ("order_class", "take_profit")}
    return {**sent, "time_in_force": "cls"}


def cls_world(rng: random.Random, i: int) -> tuple[Exchange, dict]:
    """One seeded account state and a ``cls`` order sent to it (what :func:`world` draws one time in five, here
    every time)."""
    ex, sent = world(rng, i)
    return ex, on_close(rng, ex, sent)


def near_power(rng: random.Random, ex: Exchange, sent: dict, asset: dict) -> dict:
    """``sent`` resized to within a few percent of what buying power allows at its unit price (the limit, or
    the ask), so the collar and the short's 3 % decide."""
    crypto = asset["class"] == "crypto"
    power = ex.non_marginable_buying_power() if crypto else ex.buying_power()
    unit = Decimal(sent["limit_price"]) if "limit_price" in sent else ex.quote(ex.key(sent["symbol"]))[1]
    if unit <= 0 or power <= 0:
        return sent
    step = Decimal(asset["min_trade_increment"]) if crypto else Decimal(1)
    qty = (power / unit * Decimal(str(rng.uniform(0.95, 1.05))) / step).to_integral_value() * step
    return {**sent, "qty": number(float(qty))} if qty > 0 else sent


def existing(rng: random.Random, ex: Exchange, sym: str, asset: dict, p: Decimal, cid: str) -> dict:
    """An order already at the venue: either side, limit or market, maybe an OTO with its leg held, working,
    queued or being cancelled, ``day`` today or ``gtc`` up to 120 days old."""
    crypto = asset["class"] == "crypto"
    side = rng.choice(["buy", "sell"])
    market = rng.random() < 0.2
    qty = on_step(rng, asset, 0.001, 0.2) if crypto and p >= 1_000 else float(rng.randint(1, 50))
    sent = {"symbol": "BTC/USD" if crypto else sym, "side": side, "type": "market" if market else "limit",
            "qty": qty, "time_in_force": "gtc" if crypto or rng.random() < 0.4 else "day"}
    grid = Decimal("0.01") if p >= 1 else Decimal("0.0001")
    if not market:
        sent["limit_price"] = str(p if crypto else (p * Decimal(str(1 + rng.uniform(-0.03, 0.03)))).quantize(grid))
    if not crypto and rng.random() < 0.3:
        tp = p * Decimal("1.05") if side == "buy" else p * Decimal("0.95")
        sent.update(order_class="oto", take_profit={"limit_price": str(tp.quantize(grid))})
    o = ex._order(cid, sent, Decimal(str(qty)), sent.get("order_class", "simple"))
    o["status"] = rng.choice(["new", "new", "accepted", "pending_cancel"])
    age = rng.choice([0, 30, 89, 90, 120]) if sent["time_in_force"] == "gtc" else 0
    o["submitted_at"] = f"{date.fromisoformat(TODAY) - timedelta(days=age)}T15:00:00Z"
    return o


def request(rng: random.Random, sym: str, asset: dict, p: Decimal, cid: str, size: float) -> dict:
    """An order the loop could send: stocks with an OTO take-profit half the time, crypto simple; market or
    limit; prices with varied decimals; sizes near and past what is held and what buying power allows."""
    crypto = asset["class"] == "crypto"
    side = rng.choice(["buy", "sell"])
    market = rng.random() < (0.4 if crypto else 0.2)
    if crypto:
        qty = size if rng.random() < 0.3 else (on_step(rng, asset, 0.001, 2.0) if p >= 1_000
                                               else on_step(rng, asset, 1, 5_000))
        tif = rng.choice(["gtc", "gtc", "ioc", "day"] if rng.random() < 0.1 else ["gtc", "ioc"])
    else:
        qty = size if rng.random() < 0.3 else float(rng.choice([rng.randint(1, 500), rng.randint(1, 20_000)]))
        if rng.random() < 0.05:
            qty += 0.5
        tif = "gtc" if rng.random() < 0.1 else "day"
    limit = None if market else (float(p) if crypto and rng.random() < 0.7 else near(rng, p))
    tp = None
    if not crypto and rng.random() < 0.5:
        base = limit if limit is not None else float(p)
        tp = near(rng, Decimal(str(base * (1.02 if side == "buy" else 0.98))), 0.03)
    return body("BTC/USD" if crypto else sym, side, qty, cid, "market" if market else "limit", limit, tp, tif)
