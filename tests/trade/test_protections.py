"""The broker rules model's account rules, each from Alpaca's documented cases on both sides of its boundary:
wash trades, pattern-day-trader protection, the OTO take-profit's base price, crypto on cash, the short's
valuation; and the paper broker (which asks the model) and the fake Alpaca (written apart) refusing the same
requests, in the same words where Alpaca documents them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from marketcast.trade.interface import OrderRejected
from marketcast.fake_alpaca.server import CRYPTO, STOCK
from marketcast.fake_alpaca.exchange import Exchange, Refused
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.risk.protections import Standing, interact, refusals, washes
from marketcast.trade.risk.rules import opening_value
from marketcast.trade.types import Asset
from marketcast.trade.types import Account, Order, OrderRequest

from .helpers import bars_from_rows

AAPL = Asset("AAPL")
BTC = Asset("BTCUSD", "crypto", fractionable=True, shortable=False, easy_to_borrow=False, min_order_size=0.0001,
            min_trade_increment=0.0001, price_increment=1.0)
RICH = Account(equity=100_000, cash=100_000, buying_power=200_000, non_marginable_buying_power=100_000)


def req(**kw) -> OrderRequest:
    kw = {"symbol": "AAPL", "side": "buy", "qty": 10, "client_order_id": "mc-new", "limit_price": 10.0, **kw}
    return OrderRequest(**kw)


def working(side: str, type_: str = "limit", limit: float | None = 10.0, status: str = "new", symbol="AAPL",
            take_profit: float | None = None, cid: str = "user-1", parent: str | None = None) -> Order:
    return Order(f"id-{cid}", cid, symbol, side, 1, type_, status, limit, take_profit, parent_client_order_id=parent)


def rules(request: OrderRequest, asset: Asset = AAPL, **standing) -> list[tuple[str, int, int, str]]:
    standing = {"account": RICH, "ask": 10.0, **standing}
    return [(r.rule, r.status, r.code, r.message) for r in refusals(request, asset, Standing(**standing))]


WASH = ("wash_trade", 403, 40310000, "potential wash trade detected. use complex orders")
PDT = ("pattern_day_trader", 403, 40310100, "trade denied due to pattern day trading protection")


# ------------------------------------------------------------------ wash trades
@pytest.mark.parametrize("existing, new, refused", [
    # the page's table: a market or stop order on either side is always rejected
    (("buy", "market", None), ("sell", "market", None), True),
    (("buy", "market", None), ("sell", "limit", 1_000.0), True),
    (("sell", "stop", None), ("buy", "limit", 1.0), True),
    (("buy", "limit", 10.0), ("sell", "stop", None), True),
    (("sell", "stop_limit", 10.0), ("buy", "stop", None), True),
    # limit and stop_limit: "rejected if buy limit price >= sell limit price"
    (("buy", "limit", 10.0), ("sell", "limit", 10.0), True),  # the page's first example: buy @ $10, sell @ $10
    (("buy", "limit", 10.0), ("sell", "limit", 10.01), False),
    (("sell", "limit", 10.0), ("buy", "limit", 10.0), True),
    (("sell", "limit", 10.0), ("buy", "limit", 9.99), False),
    (("buy", "stop_limit", 10.0), ("sell", "stop_limit", 10.01), False),
    (("sell", "stop_limit", 10.0), ("buy", "limit", 10.0), True),
    # the same side never; trailing stops are exempt
    (("buy", "market", None), ("buy", "market", None), False),
    (("sell", "trailing_stop", None), ("buy", "market", None), False),
])
def test_the_wash_trade_table(existing, new, refused):
    assert interact(existing, new) is refused and interact(new, existing) is refused


def test_wash_trades_by_request_against_the_accounts_orders():
    # the page's second example: a market sell working, then a limit buy at $10
    assert rules(req(), orders=[working("sell", "market", None)]) == [WASH]
    assert rules(req(limit_price=9.99), orders=[working("sell", limit=10.0)]) == []
    assert rules(req(limit_price=10.0), orders=[working("sell", limit=10.0)]) == [WASH]
    # a pending cancel may still fill: it counts; a finished order, another symbol or the same side do not
    assert rules(req(), orders=[working("sell", limit=5.0, status="pending_cancel")]) == [WASH]
    assert rules(req(), orders=[working("sell", limit=5.0, status="canceled"), working("sell", limit=5.0,
                                symbol="MSFT"), working("buy", limit=50.0)]) == []
    # a held take-profit leg (its entry not filled) counts: an OTO buy @ 9 with its sell leg @ 10
    oto = working("buy", limit=9.0, take_profit=10.0)
    assert rules(req(limit_price=10.0), orders=[oto]) == [WASH]
    assert rules(req(limit_price=9.99), orders=[oto]) == []
    # the new order's own take-profit leg is checked too: a buy @ 100 with its sell @ 104 under a buy @ 105
    foreign_buy = working("buy", limit=105.0)
    assert rules(req(limit_price=100.0, take_profit=104.0), ask=100.0, orders=[foreign_buy]) == [WASH]
    assert rules(req(limit_price=100.0, take_profit=105.01), ask=100.0, orders=[foreign_buy]) == []
    # legs of one complex order never wash against each other; crypto is not exempt ("BTC/USD" is BTCUSD)
    assert not washes(req(side="sell", client_order_id="mc-oto"), working("buy", "market", None, parent="mc-oto"))
    crypto = req(symbol="BTC/USD", qty=0.1, limit_price=60_000.0, time_in_force="gtc")
    assert rules(crypto, BTC, ask=60_000.0, orders=[working("sell", "market", None, symbol="BTCUSD")]) == [WASH]


# ------------------------------------------------------------------ pattern day trader
def test_pattern_day_trader_protection_under_25000():
    small = Account(equity=24_000, cash=24_000, buying_power=48_000, non_marginable_buying_power=24_000,
                    last_equity=24_999.99, daytrade_count=3, pattern_day_trader=False)
    close = req(side="sell", qty=10, limit_price=None, type="market")
    opened = {"account": small, "position_qty": 10.0, "available_qty": 10.0, "opened_today": True}
    assert rules(close, **opened) == [PDT]  # a 4th day trade in 5 business days
    assert rules(close, **{**opened, "opened_today": False}) == []  # held overnight: not a day trade
    assert rules(close, **{**opened, "account": Account(**{**small.__dict__, "daytrade_count": 2})}) == []
    assert rules(close, **{**opened, "account": Account(**{**small.__dict__, "last_equity": 25_000.0})}) == []
    # "a pair of buy and sell orders is counted as a potential day trade", whichever came first
    assert rules(req(limit_price=9.0), account=small, orders=[working("sell", limit=12.0)]) == [PDT]
    assert rules(req(limit_price=9.0), account=small) == []
    assert rules(req(limit_price=9.0, take_profit=11.0), account=small) == [PDT]  # an OTO is such a pair
    # flagged PDT under $25,000: no new day trade at all; crypto is never evaluated; nor is an account
    # without the fields (Alpaca removed them on 2026-07-06)
    flagged = Account(**{**small.__dict__, "daytrade_count": 0, "pattern_day_trader": True})
    assert rules(close, **{**opened, "account": flagged}) == [PDT]
    crypto_close = req(symbol="BTCUSD", side="sell", qty=0.1, limit_price=None, type="market", time_in_force="gtc")
    assert rules(crypto_close, BTC, **{**opened, "position_qty": 0.1, "available_qty": 0.1}) == []
    gone = Account(**{**small.__dict__, "daytrade_count": None, "pattern_day_trader": None})
    assert rules(close, **{**opened, "account": gone}) == []


# ------------------------------------------------------------------ OTO take-profit
def test_the_take_profit_is_a_cent_beyond_the_base_price():
    up = ("take_profit_price", 422, 42210000, "take_profit.limit_price must be >= base_price + 0.01")
    down = ("take_profit_price", 422, 42210000, "take_profit.limit_price must be <= base_price - 0.01")
    assert rules(req(limit_price=100.0, take_profit=100.01), ask=100.0) == []  # base: the entry's limit
    assert rules(req(limit_price=100.0, take_profit=100.0), ask=100.0) == [up]
    assert rules(req(side="sell", limit_price=100.0, take_profit=99.99), ask=100.0) == []
    assert rules(req(side="sell", limit_price=100.0, take_profit=100.0), ask=100.0) == [down]
    market = {"type": "market", "limit_price": None}  # base: the ask for a buy, the bid for a sell
    assert rules(req(**market, take_profit=100.51), ask=100.5, bid=100.4) == []
    assert rules(req(**market, take_profit=100.5), ask=100.5, bid=100.4) == [up]
    assert rules(req(**market, side="sell", take_profit=100.39), ask=100.5, bid=100.4) == []
    assert rules(req(**market, side="sell", take_profit=100.4), ask=100.5, bid=100.4) == [down]


# ------------------------------------------------------------------ buying power
def test_crypto_is_bought_with_cash_stocks_on_margin():
    margin = Account(equity=100_000, cash=30_000, buying_power=170_000, non_marginable_buying_power=30_000)
    btc = {"symbol": "BTCUSD", "limit_price": 60_000.0, "time_in_force": "gtc"}
    assert rules(req(**btc, qty=0.5), BTC, account=margin, ask=60_000.0) == []  # 30,000.00 of cash
    assert rules(req(**btc, qty=0.5001), BTC, account=margin, ask=60_000.0) == [
        ("account", 403, 40310000, "insufficient buying power (required: 30,006.00, available: 30,000.00)")]
    assert rules(req(qty=1_000, limit_price=150.0), account=margin, ask=150.0) == []  # 150,000 on margin
    # what earlier orders of the same pass draw counts: 20,000 of them leave 10,000 of cash
    assert rules(req(**btc, qty=0.2), BTC, account=margin, ask=60_000.0, spent=20_000.0) == [
        ("account", 403, 40310000, "insufficient buying power (required: 12,000.00, available: 10,000.00)")]


def test_a_short_is_valued_at_least_3_percent_over_the_ask():
    short = req(side="sell", qty=10, limit_price=100.0)
    assert opening_value(short, ask=100.0) == pytest.approx(1_030.0)  # MAX(limit 100, 103) * 10
    assert opening_value(req(side="sell", qty=10, limit_price=110.0), ask=100.0) == pytest.approx(1_100.0)
    assert opening_value(req(side="sell", qty=10, type="market", limit_price=None), ask=100.0) == pytest.approx(1_030.0)
    assert opening_value(req(qty=10, type="market", limit_price=None), ask=100.0) == pytest.approx(1_000.0)
    tight = Account(equity=5_000, cash=5_000, buying_power=1_030.0)
    assert rules(short, account=tight, ask=100.0) == []
    assert rules(short, account=Account(**{**tight.__dict__, "buying_power": 1_029.99}), ask=100.0) == [
        ("account", 403, 40310000, "insufficient buying power (required: 1,030.00, available: 1,029.99)")]
    # shorting needs $2,000 of equity (margin-and-short-selling)
    poor = Account(equity=1_999.99, cash=1_999.99, buying_power=1_999.99)
    assert [r[0] for r in rules(req(side="sell", qty=1, limit_price=100.0), account=poor, ask=100.0)] == [
        "short_equity"]
    assert rules(req(side="sell", qty=1, limit_price=100.0), account=Account(2_000, 2_000, 2_000), ask=100.0) == []


# ------------------------------------------------------------------ one verdict everywhere
SEQUENCE = [  # (request, refused with: status, code, Alpaca's documented words or None) in the order sent: each
    # verdict depends on the orders before it
    (OrderRequest("AAPL", "buy", 10, "mc-tp-low", limit_price=99.0, take_profit=99.0),
     (422, 42210000, "take_profit.limit_price must be >= base_price + 0.01")),
    (OrderRequest("AAPL", "buy", 10, "mc-oto", limit_price=99.0, take_profit=101.0), None),
    (OrderRequest("AAPL", "sell", 5, "mc-mkt", type="market"), (403, 40310000, WASH[3])),
    (OrderRequest("AAPL", "sell", 5, "mc-short", limit_price=101.0, time_in_force="day"), None),
    (OrderRequest("AAPL", "buy", 10, "mc-cross", limit_price=101.0), (403, 40310000, WASH[3])),
    (OrderRequest("BTCUSD", "buy", 2, "mc-btc-big", limit_price=60_000.0, time_in_force="gtc"),
     (403, 40310000, None)),  # Alpaca documents no wording: each side words it its own way
    (OrderRequest("BTCUSD", "buy", 1, "mc-btc", limit_price=60_000.0, time_in_force="gtc"), None),
    (OrderRequest("BTCUSD", "sell", 0.5, "mc-btc-short", limit_price=61_000.0, time_in_force="gtc"),
     (403, 40310000, None)),
]


def test_the_paper_broker_and_the_fake_alpaca_refuse_the_same_requests_identically(tmp_path):
    """A cash account on both (the fake's multiplier 1), AAPL at 100 and BTC at 60,000: same requests in the
    same order, same verdicts, and the same words where Alpaca documents them (the fake, written apart from the
    rules model, with Alpaca's status and code)."""
    paper = PaperBroker(tmp_path / "paper.db", {"AAPL": bars_from_rows("AAPL", [(100, 100, 100, 100)] * 2),
                                               "BTCUSD": bars_from_rows("BTCUSD", [(60_000,) * 4] * 2,
                                                                        asset_class="crypto")},
                        start="2024-01-01")
    paper.advance_to("2024-01-02")
    venue = Exchange({"AAPL": dict(STOCK), "BTCUSD": dict(CRYPTO)}, multiplier=Decimal(1))
    venue.last.update({"AAPL": Decimal(100), "BTCUSD": Decimal(60_000)})
    for request, want in SEQUENCE:
        try:
            paper.submit(request)
            on_paper = None
        except OrderRejected as exc:
            on_paper = str(exc).split(": ", 1)[1]
        body = {"symbol": request.symbol, "side": request.side, "qty": request.qty, "type": request.type,
                "time_in_force": request.time_in_force, "client_order_id": request.client_order_id}
        if request.limit_price is not None:
            body["limit_price"] = request.limit_price
        if request.take_profit is not None:
            body.update(order_class="oto", take_profit={"limit_price": request.take_profit})
        try:
            venue.submit(body)
            at_venue = None
        except Refused as exc:
            at_venue = (exc.status, exc.code, exc.message)
        if want is None:
            assert (at_venue, on_paper) == (None, None), request.client_order_id
            continue
        assert at_venue is not None and on_paper is not None, (request.client_order_id, at_venue, on_paper)
        assert at_venue[:2] == want[:2], request.client_order_id
        if want[2] is not None:
            assert (at_venue[2], on_paper) == (want[2], want[2]), request.client_order_id
    paper.close()
