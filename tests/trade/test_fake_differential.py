"""The loop's pre-check against the fake Alpaca, two readings of Alpaca's pages written apart, and the loop's
order body against Alpaca's documented one.

The judge (:mod:`tests.trade.wire_judge`, which imports nothing of ``marketcast.trade``:
``tests/trade/test_fake_alpaca_apart.py`` reads its imports) builds each account state in the fake, writes each
order as the raw JSON body of ``POST /v2/orders`` from Alpaca's documented fields, sends it to the fake's rules
(:mod:`marketcast.fake_alpaca.rules`) and reads the reply as JSON. The side under test gets the same order as
the loop's :class:`~marketcast.trade.types.OrderRequest` and runs
:func:`marketcast.trade.risk.protections.refusals` (what :class:`~marketcast.trade.risk.check.RiskCheck` asks
before every send) with the account, position, working orders and asset read from the fake's own JSON by the
Alpaca adapter's parsers; the adapter's request builder turns the order into the body alpaca-py would send,
which must equal the judge's (numbers compared as decimals). Every disagreement, in the verdict or in the body,
fails with the order and the state printed. Then one case per documented rule, each on both sides of its
boundary.

Market-on-close orders (``time_in_force`` ``cls``, refused after the 3:50 pm cutoff until 7:00 pm): one order in
five is a ``cls`` order sent around the cutoff (full and early-close days), judged on the side under test by the
broker's clock as the loop reads it (``GET /v2/clock``), and :data:`PLANTS` moves the cutoff to 3:45 pm.

Asymmetries: none in the verdicts (accept or refuse); the wording differs where Alpaca documents none. One by
design outside this test's reach: a ``gtc`` order a broker still reports as working after 90 days is counted by
the pre-check (it reads statuses, not ages); the fake never reports one, as its sweep runs before every read
(so a planted ``GTC_DAYS`` of 91 gives no disagreement here; the fake's own case below holds it).

The generator (seeded, :data:`N` states): cash from $316 to $316,000 (equity under and over $2,000 and
$25,000), 1x or 2x, long, short or no position and another symbol's, the quote with stock prices under and
over $1.00 and limits of 2 to 5 decimals (now and then 10x or 1/10 of the quote), crypto at three price
grids, market and limit, OTO take-profits, 0-2 working orders of either side (some OTO with a held leg,
queued or being cancelled, ``gtc`` up to 120 days old), the account's flags, day trades reported or not, and
four in ten orders sized within 5 % of the buying power left, where the collar and the short's 3 % decide;
one in five a ``cls`` order, and the other symbol's position opened today (its working orders then a pending
day trade) half the time it has one. The test can fail: each order sent to the fake again with one of
:data:`PLANTS` in its rules (a figure or a table changed; the pre-check's verdict and the account it read stay
as they were) must give disagreements, and does (of 6,000: collar 0 gives 16, a 1 % short markup 4, a $1,000
margin floor 8, PDT after 4 day trades 21, a 0.001 stock grid 57, two limits that always cross 116, the cls
cutoff at 3:45 pm 53, PDT blind to the day trades pending on other symbols 2: that rule's own case below holds
it on both sides of its boundary). Planted for the whole run instead (generator and account included), collar
0 gave 27 and a 1 % short markup 3 before ``cls`` orders were drawn.
"""

from __future__ import annotations

import functools
import json
import random
import sys
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, timedelta
from decimal import Decimal

import pandas as pd

from marketcast.fake_alpaca import exchange, market, rules
from marketcast.fake_alpaca.exchange import TERMINAL, Exchange, Position, ny_day
from marketcast.fake_alpaca.rules import Flags
from marketcast.fake_alpaca.server import post_order, public
from marketcast.trade.risk.protections import Refusal, Standing, refusals
from marketcast.trade.types import OrderRequest
from marketcast.trade.venues.alpaca import account_of, asset_of, order_request, position_of, working_of

from .wire_judge import TODAY, Reply, account, body, placed, post, read, world

N = 6_000


@dataclass
class Verdict:
    reply: Reply  # the judge's: the fake's answer to the body it wrote
    precheck: list[Refusal]  # the side under test's: the loop's pre-check
    body: dict  # what the judge sent
    adapter: dict  # what the loop's Alpaca adapter would send for the same order

    @property
    def agree(self) -> bool:
        return self.reply.accepted == (not self.precheck) and read(self.adapter) == read(self.body)


def intent(sent: dict) -> OrderRequest:
    """The judge's body as the loop's order (the side under test; the adapter turns it back into a body, which
    must equal ``sent``, so a slip here shows too)."""
    take_profit = sent.get("take_profit")
    return OrderRequest(sent["symbol"].replace("/", ""), sent["side"], float(sent["qty"]), sent["client_order_id"],
                        sent["type"], float(sent["limit_price"]) if "limit_price" in sent else None,
                        float(take_profit["limit_price"]) if take_profit else None, sent["time_in_force"])


def verdicts(ex: Exchange, sent: dict) -> Verdict:
    """``sent`` through both. The side under test: the loop's order, its pre-check with what the broker shows
    (the fake's JSON, parsed by the adapter), the body the adapter builds. The judge: ``sent`` as it wrote it,
    to the fake's ``POST /v2/orders``. The fake's sweep runs first, as before any read."""
    ex.sweep()
    request = intent(sent)
    sym = request.symbol
    asset = asset_of(ex.assets[sym], sym)
    acct = account_of(ex.account_json())
    position = position_of(ex.position_json(sym)) if sym in ex.positions else None
    recent = [public(o, True) for o in reversed(ex.orders)]
    working = [public(o, False) for o in ex.everything() if o["status"] not in TERMINAL]
    parents = {leg["id"]: o["client_order_id"] for o in recent for leg in o.get("legs") or []}
    bid, ask = ex.quote(sym)
    day = ny_day(ex.clock)
    opened = ex.opened_on.get(sym) == day  # the loop's journal knows the fills it made today
    today = {p.symbol: p.qty for p in (position_of(ex.position_json(s)) for s in ex.positions)
             if ex.opened_on.get(p.symbol) == day}
    orders = working_of(working, parents)
    crypto = frozenset(k for k in (o.symbol.replace("/", "") for o in orders) if asset_of(ex.assets[k], k).crypto)
    now = market.market_clock(ex.clock)["timestamp"]  # GET /v2/clock: the broker's time the loop reads
    standing = Standing(acct, float(ask), 0.0 if position is None else position.qty,
                        0.0 if position is None else position.available, orders, float(bid), opened, 0.0, today, now,
                        crypto)
    mine = refusals(request, asset, standing)
    adapter = json.loads(json.dumps(order_request(request, asset.crypto, not asset.crypto).to_request_fields()))
    return Verdict(post(ex, sent), mine, sent, adapter)


def explain(ex: Exchange, sent: dict, v: Verdict) -> str:
    positions = {s: (str(p.qty), str(p.avg)) for s, p in ex.positions.items()}
    orders = [(o["side"], o["type"], o.get("limit_price"), o["status"], o["time_in_force"], o["submitted_at"],
               [(leg["side"], leg["limit_price"], leg["status"]) for leg in o.get("legs") or []]) for o in ex.orders]
    return (f"\n  body (judge) {v.body}\n  body (adapter) {v.adapter}\n  account {ex.account_json()}\n  positions "
            f"{positions}\n  quote {ex.quotes}\n  orders {orders}\n  fake: {v.reply.status} {v.reply.message}\n"
            f"  pre-check: {[str(r) for r in v.precheck]}")


# ------------------------------------------------------------------ the seeded states
PLANTS = {  # a documented figure or table of the fake's rules (marketcast.fake_alpaca.rules), changed
    "collar 0": [(rules, "COLLAR", Decimal(0))],
    "short markup 1 %": [(rules, "SHORT_MARKUP", Decimal("0.01"))],
    "margin floor $1,000": [(rules, "MARGIN_FLOOR", Decimal(1_000)), (exchange, "MARGIN_FLOOR", Decimal(1_000))],
    "PDT after 4 day trades": [(rules, "PDT_TRADES", 4)],
    "stock price grid 0.001": [(rules, "CENT", Decimal("0.001"))],
    "wash: two limits always cross": [(rules, "WORKS", ())],
    "cls cutoff 3:45 pm": [(market, "CLS_CUTOFF", pd.Timedelta(minutes=15))],  # marketcast.fake_alpaca.market
    "PDT: nothing pending on other symbols": [(rules, "pending", lambda *_: set())],
}


@contextmanager
def planted(changes: list[tuple[object, str, object]]):
    saved = [(where, name, getattr(where, name)) for where, name, _ in changes]
    for where, name, value in changes:
        setattr(where, name, value)
    try:
        yield
    finally:
        for where, name, value in saved:
            setattr(where, name, value)


@dataclass
class Pass:
    disagreements: list[str]
    refused_by: dict[str, int]  # the pre-check's refusals by rule
    accepted: int  # by the fake
    planted: dict[str, int]  # disagreements with each plant in the fake


@functools.cache
def seeded_pass() -> Pass:
    """The :data:`N` seeded states, once for both tests below: each order through both sides, then sent to the
    fake again under each plant (taken back first, so each meets the same account)."""
    rng, out = random.Random(43), Pass([], {}, 0, dict.fromkeys(PLANTS, 0))
    for i in range(N):
        ex, sent = world(rng, i)
        v = verdicts(ex, sent)
        out.accepted += v.reply.accepted
        if not v.agree:
            out.disagreements.append(explain(ex, sent, v))
        for r in v.precheck:
            out.refused_by[r.rule] = out.refused_by.get(r.rule, 0) + 1
        for name, changes in PLANTS.items():  # the reply's status alone (200: taken) keeps this pass quick
            ex.orders = [o for o in ex.orders if o["client_order_id"] != sent["client_order_id"]]
            with planted(changes):
                out.planted[name] += (post_order(ex, sent)[0] == 200) != (not v.precheck)
    return out


def test_the_pre_check_and_the_fake_agree_on_thousands_of_orders_and_account_states():
    run = seeded_pass()
    assert not run.disagreements, (f"{len(run.disagreements)} of {N} disagree; the first:"
                                   + "".join(run.disagreements[:5]))
    # the generator reaches every rule, and accepts as well as refuses
    assert set(run.refused_by) >= {"account_flags", "shape", "cls_cutoff", "take_profit_price", "account",
                                   "short_equity", "wash_trade", "pattern_day_trader"}, run.refused_by
    assert 500 < run.accepted < N - 500, run.accepted


def test_each_planted_rule_change_in_the_fake_shows_as_disagreements():
    """Each plant turns some of the fake's verdicts against the pre-check's (the counts: the module's docstring)."""
    assert all(seeded_pass().planted.values()), seeded_pass().planted


def test_a_slip_in_the_adapters_body_shows_though_both_verdicts_agree(monkeypatch):
    """An adapter that drops the take-profit leg sends an order both sides accept: only the comparison of the
    bodies sees it (with the adapter's body sent to the fake, as before, it went unseen)."""
    def forgetful(request, crypto, attach, build=order_request):
        return build(replace(request, take_profit=None), crypto, attach)

    ex, sent = account(), order(take_profit=102.0)
    monkeypatch.setattr(sys.modules[__name__], "order_request", forgetful)
    v = verdicts(ex, sent)
    assert v.reply.accepted and not v.precheck and not v.agree
    assert "take_profit" in v.body and "take_profit" not in v.adapter


# ------------------------------------------------------------------ one case per documented rule
SENT = iter(range(1_000_000))


def order(cid: str | None = None, **kw) -> dict:
    """A new order's body (a fresh client id each: an accepted one stays at the venue and draws on its buying
    power)."""
    return body(**{"symbol": "ABC", "side": "buy", "qty": 10, "client_order_id": cid or f"mc-{next(SENT)}",
                   "limit_price": 100.0, **kw})


def both(ex: Exchange, sent: dict) -> tuple[str | None, list[str]]:
    """(the fake's refusal message or None, the pre-check's rules), asserting they agree; an order the fake
    took is taken back, so each case meets the same account."""
    v = verdicts(ex, sent)
    ex.orders = [o for o in ex.orders if o["client_order_id"] != sent["client_order_id"]]
    assert v.agree, explain(ex, sent, v)
    return v.reply.message, [r.rule for r in v.precheck]


def test_wash_trade_against_the_accounts_opposite_order():
    ex = account()
    ex.positions["ABC"] = Position(Decimal(10), Decimal(100))
    placed(ex, order("user-sell", side="sell", limit_price=101.0))
    assert both(ex, order(limit_price=101.0)) == ("potential wash trade detected. use complex orders", ["wash_trade"])
    assert both(ex, order(limit_price=100.99)) == (None, [])  # buy limit < sell limit: cannot cross
    assert both(ex, order(type="market", limit_price=None))[1] == ["wash_trade"]  # a market order always


def test_crypto_draws_on_cash_never_margin():
    ex = account(cash=10_000)  # buying power 20,000 (2x), non-marginable 10,000
    btc = dict(symbol="BTC/USD", time_in_force="gtc")
    assert both(ex, order(qty=100.01, limit_price=100.0, **btc))[1] == ["account"]  # 10,001 > 10,000 of cash
    assert both(ex, order(qty=100, limit_price=100.0, **btc)) == (None, [])
    assert both(ex, order(qty=100.01, limit_price=100.0)) == (None, [])  # the stock draws on margin


def test_crypto_market_buy_is_valued_at_the_two_percent_collar():
    ex = account(cash=10_000)
    btc = dict(symbol="BTC/USD", time_in_force="gtc", type="market", limit_price=None)
    assert both(ex, order(qty=98, **btc)) == (None, [])  # 98 x 100 x 1.02 = 9,996
    assert both(ex, order(qty=99, **btc))[1] == ["account"]  # 10,098 > 10,000, though 99 x 100 = 9,900 fits
    assert both(ex, order(qty=99, symbol="BTC/USD", time_in_force="gtc", limit_price=100.0)) == (None, [])


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


def test_pattern_day_trader_protection_counts_the_day_trades_pending_on_other_symbols():
    """Two day trades made, ABC opened today and its close about to go: a working order that would close XYZ,
    also opened today, is a third potential day trade ("could potentially result"), so ABC's close is refused;
    so it is against a working buy and sell pair on XYZ (an OTO entry with its held leg), and not against a
    close of a position opened on an earlier day, nor of a crypto position."""
    ex = account(cash=20_000)
    ex.assets["XYZ"] = dict(ex.assets["ABC"])
    ex.last["XYZ"] = ex.last["BTCUSD"] = Decimal(50)
    ex.positions.update(ABC=Position(Decimal(10), Decimal(100)), XYZ=Position(Decimal(10), Decimal(50)),
                        BTCUSD=Position(Decimal(1), Decimal(100)))
    ex.day_trades = [TODAY] * 2
    ex.opened_on.update(ABC=TODAY, XYZ=TODAY, BTCUSD=TODAY)
    closing = order(side="sell", type="market", limit_price=None)
    assert both(ex, closing) == (None, [])  # the third day trade: allowed
    btc = placed(ex, order("btc-close", symbol="BTC/USD", side="sell", qty=1, limit_price=120.0,
                           time_in_force="gtc"))
    assert both(ex, closing) == (None, [])  # crypto is not evaluated
    btc["status"] = "canceled"
    xyz = placed(ex, order("xyz-close", symbol="XYZ", side="sell", limit_price=60.0))
    assert both(ex, closing) == ("trade denied due to pattern day trading protection", ["pattern_day_trader"])
    ex.opened_on["XYZ"] = "2024-04-30"  # XYZ held overnight: its close is no day trade
    assert both(ex, closing) == (None, [])
    xyz["status"] = "canceled"
    placed(ex, order("xyz-oto", symbol="XYZ", qty=5, limit_price=45.0, take_profit=55.0))  # a pair by itself
    assert both(ex, closing) == ("trade denied due to pattern day trading protection", ["pattern_day_trader"])
    ex.day_trades = [TODAY]
    assert both(ex, closing) == (None, [])  # 1 made + 1 pending + this one: 3


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
    short, stock, btc = order(side="sell", qty=1), order(), order(symbol="BTC/USD", time_in_force="gtc", qty=1)
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
