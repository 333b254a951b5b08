"""The loop's pre-check against the fake Alpaca, two readings of Alpaca's pages written apart: the same order and
account state through :func:`marketcast.trade.risk.protections.refusals` (what :class:`~marketcast.trade.risk.
check.RiskCheck` asks before every send, with the account, position, working orders and asset read from the
fake's own JSON by the Alpaca adapter's parsers) and through the fake's ``POST /v2/orders`` rules
(:mod:`marketcast.fake_alpaca.rules`), with the body alpaca-py would send. Every disagreement fails with the
order and the state printed. Then one case per documented rule, each on both sides of its boundary.

Asymmetries: none in the verdicts (accept or refuse); the wording differs where Alpaca documents none. One by
design outside this test's reach: a ``gtc`` order a broker still reports as working after 90 days is counted by
the pre-check (it reads statuses, not ages); the fake never reports one, as its sweep runs before every read.

The generator (seeded, :data:`N` states): cash from $316 to $316,000 (equity under and over $2,000 and
$25,000), 1x or 2x, long, short or no position and another symbol's, the quote with stock prices under and
over $1.00 and limits of 2 to 5 decimals (now and then 10x or 1/10 of the quote), crypto at three price
grids, market and limit, OTO take-profits, 0-2 working orders of either side (some OTO with a held leg,
queued or being cancelled, ``gtc`` up to 120 days old), the account's flags, day trades reported or not, and
four in ten orders sized within 5 % of the buying power left, where the collar and the short's 3 % decide.
Turning either figure off in the fake makes this test fail (checked by hand: collar 0 gives 27 disagreements,
a 1 % short markup 3).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from datetime import date, timedelta
from decimal import Decimal

from marketcast.fake_alpaca.exchange import TERMINAL, Exchange, Position, ny_day
from marketcast.fake_alpaca.rules import Flags, Refused
from marketcast.fake_alpaca.server import public
from marketcast.trade.risk.protections import Refusal, Standing, refusals
from marketcast.trade.types import OrderRequest
from marketcast.trade.venues.alpaca import account_of, asset_of, order_request, position_of, working_of

CLOCK = "2024-05-01T19:00:00Z"  # a Wednesday, in the session
TODAY = ny_day(CLOCK)
STOCK = {"class": "us_equity", "tradable": True, "fractionable": True, "shortable": True, "easy_to_borrow": True,
         "min_order_size": None, "min_trade_increment": None, "price_increment": None}
N = 6_000


def crypto_asset(price: float) -> dict:
    inc = "1" if price >= 1_000 else "0.01" if price >= 1 else "0.0001"
    return {"class": "crypto", "tradable": True, "fractionable": True, "shortable": False, "easy_to_borrow": False,
            "min_order_size": "0.0001" if price >= 1 else "1", "min_trade_increment": "0.0001" if price >= 1 else "1",
            "price_increment": inc}


@dataclass
class Verdict:
    fake: Refused | None
    precheck: list[Refusal]
    body: dict

    @property
    def agree(self) -> bool:
        return (self.fake is None) == (not self.precheck)


def verdicts(ex: Exchange, request: OrderRequest) -> Verdict:
    """``request`` through both: the pre-check with what the broker shows (the fake's JSON, parsed by the
    adapter), the fake with alpaca-py's body. The fake's sweep runs first, as before any read."""
    ex.sweep()
    sym = ex.key(request.symbol)
    raw_asset = ex.assets[sym]
    crypto = raw_asset["class"] == "crypto"
    account = account_of(ex.account_json())
    position = position_of(ex.position_json(sym)) if sym in ex.positions else None
    recent = [public(o, True) for o in reversed(ex.orders)]
    working = [public(o, False) for o in ex.everything() if o["status"] not in TERMINAL]
    parents = {leg["id"]: o["client_order_id"] for o in recent for leg in o.get("legs") or []}
    bid, ask = ex.quote(sym)
    opened = ex.opened_on.get(sym) == ny_day(ex.clock)  # the loop's journal knows the fills it made today
    standing = Standing(account, float(ask), 0.0 if position is None else position.qty,
                        0.0 if position is None else position.available, working_of(working, parents), float(bid),
                        opened)
    mine = refusals(request, asset_of(raw_asset, sym), standing)
    body = json.loads(json.dumps(order_request(request, crypto, not crypto).to_request_fields()))
    try:
        ex.submit(body)
        theirs = None
    except Refused as exc:
        theirs = exc
    return Verdict(theirs, mine, body)


# ------------------------------------------------------------------ the generator
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


def world(rng: random.Random, i: int) -> tuple[Exchange, OrderRequest]:
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
    req = request(rng, sym, asset, p, f"mc-{i}", size)
    return ex, (near_power(rng, ex, req, asset) if rng.random() < 0.4 else req)


def near_power(rng: random.Random, ex: Exchange, req: OrderRequest, asset: dict) -> OrderRequest:
    """``req`` resized to within a few percent of what buying power allows at its unit price (the limit, or the
    ask), so the collar and the short's 3 % decide."""
    crypto = asset["class"] == "crypto"
    power = ex.non_marginable_buying_power() if crypto else ex.buying_power()
    unit = Decimal(str(req.limit_price)) if req.limit_price is not None else ex.quote(ex.key(req.symbol))[1]
    if unit <= 0 or power <= 0:
        return req
    step = Decimal(asset["min_trade_increment"]) if crypto else Decimal(1)
    qty = (power / unit * Decimal(str(rng.uniform(0.95, 1.05))) / step).to_integral_value() * step
    return replace(req, qty=float(qty)) if qty > 0 else req


def existing(rng: random.Random, ex: Exchange, sym: str, asset: dict, p: Decimal, cid: str) -> dict:
    """An order already at the venue: either side, limit or market, maybe an OTO with its leg held, working,
    queued or being cancelled, ``day`` today or ``gtc`` up to 120 days old."""
    crypto = asset["class"] == "crypto"
    side = rng.choice(["buy", "sell"])
    market = rng.random() < 0.2
    qty = on_step(rng, asset, 0.001, 0.2) if crypto and p >= 1_000 else float(rng.randint(1, 50))
    body = {"symbol": "BTC/USD" if crypto else sym, "side": side, "type": "market" if market else "limit",
            "qty": qty, "time_in_force": "gtc" if crypto or rng.random() < 0.4 else "day"}
    grid = Decimal("0.01") if p >= 1 else Decimal("0.0001")
    if not market:
        body["limit_price"] = str(p if crypto else (p * Decimal(str(1 + rng.uniform(-0.03, 0.03)))).quantize(grid))
    if not crypto and rng.random() < 0.3:
        tp = p * Decimal("1.05") if side == "buy" else p * Decimal("0.95")
        body.update(order_class="oto", take_profit={"limit_price": str(tp.quantize(grid))})
    o = ex._order(cid, body, Decimal(str(qty)), body.get("order_class", "simple"))
    o["status"] = rng.choice(["new", "new", "accepted", "pending_cancel"])
    age = rng.choice([0, 30, 89, 90, 120]) if body["time_in_force"] == "gtc" else 0
    o["submitted_at"] = f"{date.fromisoformat(TODAY) - timedelta(days=age)}T15:00:00Z"
    return o


def request(rng: random.Random, sym: str, asset: dict, p: Decimal, cid: str, size: float) -> OrderRequest:
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
    return OrderRequest(sym, side, qty, cid, "market" if market else "limit", limit, tp, tif)


def explain(ex: Exchange, req: OrderRequest, v: Verdict) -> str:
    positions = {s: (str(p.qty), str(p.avg)) for s, p in ex.positions.items()}
    orders = [(o["side"], o["type"], o.get("limit_price"), o["status"], o["time_in_force"], o["submitted_at"],
               [(leg["side"], leg["limit_price"], leg["status"]) for leg in o.get("legs") or []]) for o in ex.orders]
    return (f"\n  order {req}\n  body {v.body}\n  account {ex.account_json()}\n  positions {positions}\n  quote "
            f"{ex.quotes}\n  orders {orders}\n  fake: {None if v.fake is None else v.fake.message}\n  pre-check: "
            f"{[str(r) for r in v.precheck]}")


def test_the_pre_check_and_the_fake_agree_on_thousands_of_orders_and_account_states():
    rng = random.Random(43)
    disagreements, refused_by, accepted = [], {}, 0
    for i in range(N):
        ex, req = world(rng, i)
        v = verdicts(ex, req)
        accepted += v.fake is None
        if not v.agree:
            disagreements.append(explain(ex, req, v))
        for r in v.precheck:
            refused_by[r.rule] = refused_by.get(r.rule, 0) + 1
    assert not disagreements, f"{len(disagreements)} of {N} disagree; the first:" + "".join(disagreements[:5])
    # the generator reaches every rule, and accepts as well as refuses
    assert set(refused_by) >= {"account_flags", "shape", "take_profit_price", "account", "short_equity",
                               "wash_trade", "pattern_day_trader"}, refused_by
    assert 500 < accepted < N - 500, accepted


# ------------------------------------------------------------------ one case per documented rule
def account(cash: float = 100_000, multiplier: int = 2, crypto_price: str = "100", **kw) -> Exchange:
    """ABC (a stock) at 100.00 bid/ask, BTCUSD at ``crypto_price`` (increment 0.01), nothing held."""
    ex = Exchange({"ABC": dict(STOCK), "BTCUSD": crypto_asset(float(crypto_price))}, cash=Decimal(str(cash)),
                  multiplier=Decimal(multiplier), clock=CLOCK, **kw)
    ex.last.update({"ABC": Decimal(100), "BTCUSD": Decimal(crypto_price)})
    ex.quotes.update({"ABC": (Decimal(100), Decimal(100)), "BTCUSD": (Decimal(crypto_price), Decimal(crypto_price))})
    return ex


SENT = iter(range(1_000_000))


def order(cid: str | None = None, **kw) -> OrderRequest:
    """A new order (a fresh client id each: an accepted one stays at the venue and draws on its buying power)."""
    return OrderRequest(**{"symbol": "ABC", "side": "buy", "qty": 10, "client_order_id": cid or f"mc-{next(SENT)}",
                           "limit_price": 100.0, **kw})


def both(ex: Exchange, req: OrderRequest) -> tuple[str | None, list[str]]:
    """(the fake's refusal message or None, the pre-check's rules), asserting they agree; an order the fake
    took is taken back, so each case meets the same account."""
    v = verdicts(ex, req)
    ex.orders = [o for o in ex.orders if o["client_order_id"] != req.client_order_id]
    assert v.agree, explain(ex, req, v)
    return (None if v.fake is None else v.fake.message), [r.rule for r in v.precheck]


def placed(ex: Exchange, req: OrderRequest, days_ago: int = 0) -> dict:
    ex.submit(json.loads(json.dumps(order_request(req, req.symbol == "BTCUSD", req.symbol != "BTCUSD")
                                    .to_request_fields())))
    o = ex.orders[-1]
    o["status"], o["submitted_at"] = "new", f"{date.fromisoformat(TODAY) - timedelta(days=days_ago)}T15:00:00Z"
    return o


def test_wash_trade_against_the_accounts_opposite_order():
    ex = account()
    ex.positions["ABC"] = Position(Decimal(10), Decimal(100))
    placed(ex, order("user-sell", side="sell", limit_price=101.0))
    assert both(ex, order(limit_price=101.0)) == ("potential wash trade detected. use complex orders", ["wash_trade"])
    assert both(ex, order(limit_price=100.99)) == (None, [])  # buy limit < sell limit: cannot cross
    assert both(ex, order(type="market", limit_price=None))[1] == ["wash_trade"]  # a market order always


def test_crypto_draws_on_cash_never_margin():
    ex = account(cash=10_000)  # buying power 20,000 (2x), non-marginable 10,000
    btc = dict(symbol="BTCUSD", time_in_force="gtc")
    assert both(ex, order(qty=100.01, limit_price=100.0, **btc))[1] == ["account"]  # 10,001 > 10,000 of cash
    assert both(ex, order(qty=100, limit_price=100.0, **btc)) == (None, [])
    assert both(ex, order(qty=100.01, limit_price=100.0)) == (None, [])  # the stock draws on margin


def test_crypto_market_buy_is_valued_at_the_two_percent_collar():
    ex = account(cash=10_000)
    btc = dict(symbol="BTCUSD", time_in_force="gtc", type="market", limit_price=None)
    assert both(ex, order(qty=98, **btc)) == (None, [])  # 98 x 100 x 1.02 = 9,996
    assert both(ex, order(qty=99, **btc))[1] == ["account"]  # 10,098 > 10,000, though 99 x 100 = 9,900 fits
    assert both(ex, order(qty=99, symbol="BTCUSD", time_in_force="gtc", limit_price=100.0)) == (None, [])


def test_sub_penny_limit_prices():
    ex = account()
    ex.quotes["ABC"] = (Decimal("0.5"), Decimal("0.5"))
    assert both(ex, order(limit_price=1.005))[1] == ["shape"]  # from $1.00: 2 decimals
    assert both(ex, order(limit_price=1.01)) == (None, [])
    assert both(ex, order(limit_price=0.12345))[1] == ["shape"]  # under $1.00: 4 decimals
    assert both(ex, order(limit_price=0.1234)) == (None, [])
    assert both(ex, order(limit_price=100.0, take_profit=102.005))[1] == ["shape"]  # the take-profit leg too


def test_pattern_day_trader_protection_where_the_account_reports_it():
    ex = account(cash=20_000)  # under $25,000
    ex.positions["ABC"] = Position(Decimal(10), Decimal(100))
    ex.day_trades = [TODAY] * 3
    ex.opened_on["ABC"] = TODAY
    closing = order(side="sell", limit_price=100.0)
    assert both(ex, closing) == ("trade denied due to pattern day trading protection", ["pattern_day_trader"])
    ex.opened_on["ABC"] = "2024-04-30"  # opened on an earlier day: no day trade
    assert both(ex, closing) == (None, [])
    ex.opened_on["ABC"], ex.reports_day_trades = TODAY, False  # Alpaca since 2026-07-06: no fields, no protection
    assert both(ex, closing) == (None, [])


def test_a_short_is_valued_three_percent_over_the_ask():
    ex = account(cash=2_100)  # 2x: buying power 4,200
    assert both(ex, order(side="sell", qty=40, limit_price=100.0)) == (None, [])  # 40 x 103 = 4,120
    assert both(ex, order(side="sell", qty=41, limit_price=100.0))[1] == ["account"]  # 4,223, though 41 x 100 fits
    assert both(ex, order(side="sell", qty=40, limit_price=106.0))[1] == ["account"]  # the limit when higher: 4,240


def test_the_2000_margin_floor():
    poor = account(cash=1_999.99)
    assert poor.buying_power() == Decimal("1999.99")  # restricted to 1x
    assert both(poor, order(side="sell", qty=1))[1] == ["short_equity"]
    assert both(poor, order(qty=20, limit_price=99.0)) == (None, [])  # 1,980 within 1x
    assert both(poor, order(qty=21, limit_price=99.0))[1] == ["account"]  # 2,079: 2x would carry it, 1x not
    rich = account(cash=2_000)
    assert both(rich, order(side="sell", qty=1)) == (None, [])
    assert both(rich, order(qty=21, limit_price=99.0)) == (None, [])


def test_the_accounts_flags():
    short, stock, btc = order(side="sell", qty=1), order(), order(symbol="BTCUSD", time_in_force="gtc", qty=1)
    for flag in ("account_blocked", "trading_blocked", "trade_suspended_by_user"):
        ex = account(flags=Flags(**{flag: True}))
        assert [both(ex, r)[1] for r in (short, stock, btc)] == [["account_flags"]] * 3, flag
    ex = account(flags=Flags(shorting_enabled=False))
    assert [both(ex, r)[1] for r in (short, stock, btc)] == [["account_flags"], [], []]
    ex = account(flags=Flags(crypto_status="INACTIVE"))
    assert [both(ex, r)[1] for r in (short, stock, btc)] == [[], [], ["account_flags"]]
    ex = account(flags=Flags(shorting_enabled=False), positions={"ABC": Position(Decimal(5), Decimal(100))})
    assert both(ex, order(side="sell", qty=5)) == (None, [])  # selling a long is no short: allowed


def test_a_limit_far_from_the_quote_is_not_refused_for_its_distance_and_is_valued_at_its_limit():
    """Alpaca documents no band for limit prices (only the crypto market collar): both take a limit at 10x or
    1/10 of the quote, and value a buy at its limit."""
    ex = account(cash=5_000)  # buying power 10,000
    assert both(ex, order(qty=10, limit_price=10.0)) == (None, [])  # 1/10 of the ask
    assert both(ex, order(qty=9, limit_price=1_000.0)) == (None, [])  # 10x: 9,000
    assert both(ex, order(qty=11, limit_price=1_000.0))[1] == ["account"]  # 11,000 > 10,000, though 11 x 100 fits


def test_a_gtc_order_ends_90_days_after_it_was_sent():
    ex = account()
    ex.positions["ABC"] = Position(Decimal(10), Decimal(100))
    old = placed(ex, order("user-sell", side="sell", limit_price=100.0, time_in_force="gtc"), days_ago=89)
    assert both(ex, order(limit_price=100.0))[1] == ["wash_trade"]  # 89 days: still working
    old["submitted_at"] = f"{date.fromisoformat(TODAY) - timedelta(days=90)}T15:00:00Z"
    assert both(ex, order(limit_price=100.0)) == (None, [])  # 90 days: the venue ended it
    assert old["status"] == "expired"
