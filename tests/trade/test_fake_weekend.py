"""The fake Alpaca on a day NYSE is closed: crypto trades 24/7 (Alpaca, crypto-trading: "available 24/7"), a
stock order waits for the next session, and the day is no session for the day-trade count. The chaos harness
(``test_alpaca_crash.py``) kills the loop on such days."""

from __future__ import annotations

from decimal import Decimal

from marketcast.fake_alpaca.exchange import Exchange
from marketcast.fake_alpaca.server import CRYPTO, STOCK, FakeAlpaca

FRIDAY_CLOSE = "2024-05-03T21:00:00Z"
BTC_BAR = {"o": 60_100.0, "h": 60_500.0, "l": 59_000.0, "c": 59_500.0}  # reaches the crypto limit (59,800)
ABC_BAR = {"o": 99.0, "h": 101.0, "l": 98.0, "c": 100.5}  # reaches the stock limit (99.5)


def friday_orders() -> Exchange:
    """A stock day limit and a crypto gtc limit sent after Friday's close: both wait as ``accepted``."""
    ex = Exchange({"ABC": dict(STOCK), "BTCUSD": dict(CRYPTO)}, clock=FRIDAY_CLOSE)
    ex.last.update({"ABC": Decimal(100), "BTCUSD": Decimal(60_000)})
    ex.submit({"symbol": "ABC", "side": "buy", "qty": 10, "type": "limit", "limit_price": 99.5,
               "time_in_force": "day", "client_order_id": "stock-day"})
    ex.submit({"symbol": "BTC/USD", "side": "buy", "qty": 0.5, "type": "limit", "limit_price": 59_800,
               "time_in_force": "gtc", "client_order_id": "crypto-gtc"})
    return ex


def status(ex: Exchange, cid: str) -> tuple[str, str]:
    o = next(o for o in ex.orders if o["client_order_id"] == cid)
    return o["status"], o["filled_qty"]


def test_on_a_saturday_only_crypto_trades_and_the_stock_order_waits_for_monday():
    ex = friday_orders()
    equity_at_friday = ex.last_equity
    ex.session("2024-05-04", {"BTCUSD": BTC_BAR}, stocks_open=False)
    assert status(ex, "crypto-gtc") == ("filled", "0.5")  # at the limit: 59,800 < the open 60,100
    assert ex.positions["BTCUSD"].qty == Decimal("0.5") * (1 - ex.crypto_fee)  # the fee taken in BTC
    assert ex.cash == Decimal(100_000) - Decimal("0.5") * 59_800
    assert status(ex, "stock-day") == ("accepted", "0")  # not live, so not expired at Saturday's "close"
    assert ex.sessions == [] and ex.last_equity == equity_at_friday  # a weekend is no session
    ex.session("2024-05-06", {"ABC": ABC_BAR, "BTCUSD": BTC_BAR})
    assert status(ex, "stock-day") == ("filled", "10")  # live on Monday, filled at the open 99 (below 99.5)
    assert ex.positions["ABC"].qty == 10 and ex.positions["ABC"].avg == Decimal(99)
    assert ex.sessions == ["2024-05-06"]


def test_the_fake_asks_nyses_calendar_whether_stocks_trade_on_a_day():
    fake = FakeAlpaca("k", "s", assets={"ABC": dict(STOCK), "BTCUSD": dict(CRYPTO)})
    fake.exchange = friday_orders()
    fake.bars = {"ABC": [{"t": "2024-05-04T00:00:00Z", **ABC_BAR}], "BTC/USD": [{"t": "2024-05-04T00:00:00Z",
                                                                              **BTC_BAR}]}
    fake.session("2024-05-04")  # a Saturday: even a stock bar stamped on it trades no stock order
    assert status(fake.exchange, "stock-day") == ("accepted", "0") and fake.exchange.sessions == []
    assert status(fake.exchange, "crypto-gtc") == ("filled", "0.5")
    fake.server.server_close()
