"""The broker rules model: price grid by side, sizes, time in force, shorts and buying power, by hand and as
invariants over random prices."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.trade.risk.rules import account_violations, conform, round_price, violations

from marketcast.trade.types import Asset, dec
from marketcast.trade.types import OrderRequest

STOCK = Asset("AAPL")
BTC = Asset("BTCUSD", "crypto", fractionable=True, shortable=False, easy_to_borrow=False, min_order_size=0.0001,
            min_trade_increment=0.0001, price_increment=1.0, fee_in_asset=0.0025)


def req(**kw) -> OrderRequest:
    kw = {"symbol": "AAPL", "side": "buy", "qty": 10, "client_order_id": "mc-x", "limit_price": 100.0, **kw}
    return OrderRequest(**kw)


@pytest.mark.parametrize("price, side, want", [
    (4599.86633772055, "buy", 4599.86), (4599.86633772055, "sell", 4599.87),  # the 11-decimal limit
    (4599.86, "buy", 4599.86), (4599.86, "sell", 4599.86),  # on the grid: unchanged either way
    (0.56789, "buy", 0.5678), (0.56789, "sell", 0.5679),  # below $1: 4 decimals
    (1.004, "buy", 1.0), (0.99995, "sell", 1.0), (0.99995, "buy", 0.9999),  # across the $1 line
])
def test_stock_prices_go_down_for_buys_and_up_for_sells(price, side, want):
    assert round_price(price, STOCK, side) == want


def test_crypto_prices_follow_the_assets_increment_and_none_means_no_grid():
    assert (round_price(60_012.7, BTC, "buy"), round_price(60_012.7, BTC, "sell")) == (60_012.0, 60_013.0)
    assert round_price(0.123456789, Asset("X", "crypto"), "buy") == 0.123456789


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0001, 100_000, allow_nan=False), st.sampled_from(["buy", "sell"]))
def test_rounding_never_more_aggressive_and_within_one_tick(price, side):
    got = round_price(price, STOCK, side)
    tick = STOCK.tick(price)
    assert (dec(got) / STOCK.tick(got)) % 1 == 0  # on the grid at its own price
    assert (got <= price) if side == "buy" else (got >= price)  # never pays more / sells for less
    assert abs(dec(got) - dec(price)) < tick


def test_conform_moves_take_profits_away_from_the_entry():
    long = conform(req(limit_price=100.123, take_profit=102.127), STOCK).request
    assert (long.limit_price, long.take_profit) == (100.12, 102.13)  # buy lower, its sell take-profit higher
    short = conform(req(side="sell", limit_price=100.123, take_profit=98.127), STOCK).request
    assert (short.limit_price, short.take_profit) == (100.13, 98.12)


def test_conform_sizes_crypto_down_and_fixes_its_time_in_force():
    check = conform(req(symbol="BTCUSD", qty=0.123456, limit_price=60_012.7, time_in_force="day"), BTC)
    r = check.request
    assert (r.qty, r.limit_price, r.time_in_force) == (0.1234, 60_012.0, "gtc")
    assert check.changes == ("time in force day -> gtc (crypto)", "limit 60012.7 -> 60012.0", "qty 0.123456 -> 0.1234")
    tiny = conform(req(symbol="BTCUSD", qty=0.00005, limit_price=60_000.0, time_in_force="gtc"), BTC)
    assert tiny.request is None and tiny.reasons == ("qty 5e-05 rounds down to 0 on the 0.0001 grid",)
    whole = conform(req(qty=0.9), STOCK)
    assert whole.request is None and "rounds down to 0" in whole.reasons[0]


def test_violations_speak_alpacas_words():
    assert violations(req(limit_price=290.123), STOCK) == [
        "invalid limit_price 290.123. sub-penny increment does not fulfill minimum pricing criteria"]
    assert violations(req(take_profit=746.96416125), STOCK) == [
        "invalid take_profit.limit_price 746.96416125. sub-penny increment does not fulfill minimum pricing criteria"]
    assert violations(req(limit_price=0.12345), STOCK)[0].startswith("invalid limit_price 0.12345.")
    assert violations(req(limit_price=0.1234), STOCK) == []
    assert violations(req(symbol="BTCUSD", qty=0.1, limit_price=60_000.0, time_in_force="day"), BTC) == [
        "invalid crypto time_in_force day: gtc or ioc only"]
    assert violations(req(symbol="BTCUSD", qty=0.00015, limit_price=60_000.5, time_in_force="gtc"), BTC) == [
        "invalid limit_price 60000.5. not a multiple of the price increment 1.0",
        "qty 0.00015 is not a multiple of the minimum trade increment 0.0001"]
    assert violations(req(qty=1.5, take_profit=101.0), STOCK) == [
        "requested asset is not fractionable", "fractional orders must be simple orders"]
    assert violations(req(qty=1.5), Asset("AAPL", fractionable=True)) == []
    assert violations(req(), Asset("AAPL", tradable=False)) == ["asset AAPL is not tradable"]


def test_account_rules_for_shorts_free_quantity_and_buying_power():
    sell = req(side="sell", qty=15, limit_price=100.0)
    assert account_violations(sell, STOCK, 100.0, 11.0, 0.0, 100.0) == [
        "insufficient qty available for order (requested: 15, available: 11)"]
    assert account_violations(sell, STOCK, 100.0, 15.0, 0.0, 100.0) == []  # closing: no buying power needed
    # a short at 100 with the ask at 100 is valued at 3 % above the ask: 15 x 103 = 1,545 of buying power
    assert account_violations(sell, STOCK, 0.0, 0.0, 1_545.0, 100.0) == []
    assert account_violations(sell, STOCK, 0.0, 0.0, 1_544.99, 100.0) == [
        "insufficient buying power (required: 1,545.00, available: 1,544.99)"]
    assert account_violations(sell, Asset("AAPL", shortable=False), 0.0, 0.0, 1e9, 100.0) == [
        "asset AAPL is not shortable"]
    assert account_violations(sell, Asset("AAPL", easy_to_borrow=False), 0.0, 0.0, 1e9, 100.0) == [
        "asset AAPL is not easy to borrow"]
    assert account_violations(req(symbol="BTCUSD", side="sell", qty=0.1, limit_price=1.0), BTC, 0.0, 0.0, 1e9,
                              1.0) == ["BTCUSD: crypto cannot be sold short"]
    market = OrderRequest("AAPL", "buy", 10, "mc-m", type="market")
    assert account_violations(market, STOCK, 0.0, 0.0, 999.0, 100.0) == [
        "insufficient buying power (required: 1,000.00, available: 999.00)"]  # valued at the last price


def test_crypto_buys_count_net_of_the_fee_taken_in_the_asset():
    assert BTC.received(0.25) == pytest.approx(0.249375) and STOCK.received(10) == 10
    assert BTC.qty_step == Decimal("0.0001") and STOCK.qty_step == 1
