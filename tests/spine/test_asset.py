"""Asset classes from symbols (forex by ISO 4217 on both sides, crypto, futures), their rules and the reason."""

import pytest

from marketcast.data import Bars, classify, explain_asset_class, infer_asset_class
from marketcast.data.asset import RULES
from marketcast.errors import ConfigError
from tests.conftest import make_ohlcv


@pytest.mark.parametrize("symbol, expected", [
    # forex: both sides ISO 4217, in every spelling the common sources use
    ("EURUSD", "forex"), ("EUR/USD", "forex"), ("EUR-USD", "forex"), ("eur_usd", "forex"),
    ("EURUSD=X", "forex"), ("JPY=X", "forex"), ("GBPUSD", "forex"), ("USDCAD", "forex"), ("USDTRY", "forex"),
    # crypto: a known ticker before a quote, or a non-currency base with a separator
    ("BTCUSD", "crypto"), ("ETHUSD", "crypto"), ("BTC-USD", "crypto"), ("SOL/USDT", "crypto"),
    ("ETH/USDT", "crypto"), ("PEPE-EUR", "crypto"), ("ETHBTC", "crypto"), ("DOGEUSDT", "crypto"),
    # futures
    ("ES=F", "future"), ("CL=F", "future"), ("/ES", "future"),
    # stocks, including class shares with a dash and names that merely end in a currency
    ("AAPL", "stock"), ("SP500", "stock"), ("NASDAQ", "stock"), ("USD", "stock"), ("BRK-B", "stock"),
    ("ABCUSD", "stock"), ("XXXUSD", "stock"),
])
def test_classify(symbol, expected):
    assert classify(symbol)[0] == expected
    assert infer_asset_class(symbol) == expected


def test_the_reason_names_the_rule():
    assert classify("EURUSD")[1] == "EURUSD: EUR and USD are both ISO 4217 currencies"
    assert classify("JPY=X")[1] == "JPY=X: yfinance's =X quote of USDJPY, both ISO 4217 currencies"
    assert classify("ES=F")[1] == "ES=F: the =F suffix marks a futures contract"
    assert classify("ETH/USDT")[1] == "ETH/USDT: ETH quoted in USDT, a crypto pair (ETH is no ISO 4217 currency)"
    assert classify("BTCUSD")[1] == "BTCUSD: BTC is a crypto ticker, quoted in USD"
    assert classify("AAPL")[1] == "AAPL: no futures, forex or crypto pattern, so a stock"
    assert explain_asset_class("EURUSD", "forex") == classify("EURUSD")[1]
    assert explain_asset_class("BTCUSD", "stock") == (
        "BTCUSD: set to stock by --asset-class (the symbol alone reads as crypto)")


def test_each_class_has_its_shorting_rule_and_calendar():
    assert {k: (r.allow_short, r.calendar) for k, r in RULES.items()} == {
        "stock": (True, "XNYS"), "crypto": (False, "24/7"), "forex": (True, "FX24x5"), "future": (True, "CMES")}
    bars = Bars("EURUSD", make_ohlcv(10), "forex")
    assert bars.allow_short and bars.calendar.name == "FX24x5"
    assert not Bars("BTCUSD", make_ohlcv(10), "crypto").allow_short


def test_an_unknown_override_is_refused():
    with pytest.raises(ConfigError, match="'bond' is not one of stock, crypto, forex, future"):
        infer_asset_class("AAPL", "bond")


def test_the_currency_codes_are_pycountrys_table_less_the_units_of_account():
    import pycountry

    from marketcast.data.asset import _NOT_TRADED, currencies

    assert currencies() == frozenset(c.alpha_3 for c in pycountry.currencies) - _NOT_TRADED
    assert {"USD", "EUR", "JPY"} <= currencies() and not currencies() & _NOT_TRADED
