"""Every supported export format loads to the same normalised bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from marketcast.data import Bars, infer_asset_class, load_bars, load_embedded, load_symbol
from marketcast.errors import DataError
from tests.conftest import make_ohlcv


def _assert_same(bars: Bars, frame: pd.DataFrame, volume: bool = True) -> None:
    assert list(bars.frame.index) == list(frame.index)
    assert str(bars.frame.index.tz) == "UTC"
    for col in ("open", "high", "low", "close") + (("volume",) if volume else ()):
        assert bars.frame[col].dtype == np.float64
        np.testing.assert_allclose(bars.frame[col].to_numpy(), frame[col].to_numpy(), rtol=1e-12)


def test_yfinance_export_with_extra_columns_any_order(tmp_path):
    ohlcv = make_ohlcv(40, freq="B")  # weekdays: a stock's bars (a 24/7 series is crypto, whatever its name)
    out = pd.DataFrame({
        "Volume": ohlcv["volume"].astype(int), "Close": ohlcv["close"], "Dividends": 0.0,
        "Adj Close": ohlcv["close"] * 0.98, "High": ohlcv["high"], "Low": ohlcv["low"], "Open": ohlcv["open"],
        "Date": ohlcv.index.strftime("%Y-%m-%d"), "Stock Splits": 0.0,
    })
    path = tmp_path / "aapl.csv"
    out.to_csv(path, index=False)
    bars = load_bars(path)
    assert bars.symbol == "AAPL" and bars.asset_class == "stock" and bars.periods_per_year == 252
    _assert_same(bars, ohlcv)


def test_yfinance_date_as_unnamed_index_column(tmp_path, ohlcv):
    frame = ohlcv.rename(columns=str.title)
    frame.index = frame.index.tz_localize(None)
    frame.index.name = None
    path = tmp_path / "msft.csv"
    frame.to_csv(path)  # first column header is empty -> "Unnamed: 0"
    _assert_same(load_bars(path), ohlcv)


def test_alpaca_export_with_symbol_and_tz_aware_timestamps(tmp_path, ohlcv):
    stamps = ohlcv.index.tz_convert("America/New_York")
    out = pd.DataFrame({"symbol": "BTC/USD", "timestamp": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        "Open": ohlcv["open"], "High": ohlcv["high"], "Low": ohlcv["low"],
                        "Close": ohlcv["close"], "Volume": ohlcv["volume"], "trade_count": 5, "vwap": 1.0})
    path = tmp_path / "btc.csv"
    out.to_csv(path, index=False)
    bars = load_bars(path)
    assert bars.symbol == "BTC/USD" and bars.asset_class == "crypto" and bars.periods_per_year == 365
    _assert_same(bars, ohlcv)


def test_multi_symbol_file_needs_a_symbol(tmp_path):
    a, b = make_ohlcv(10, seed=1), make_ohlcv(10, seed=2)
    rows = []
    for sym, frame in (("AAA", a), ("BBB", b)):
        rows.append(frame.reset_index().assign(symbol=sym))
    path = tmp_path / "many.csv"
    pd.concat(rows).to_csv(path, index=False)
    with pytest.raises(DataError, match="holds 2 symbols"):
        load_bars(path)
    bars = load_bars(path, symbol="BBB")
    _assert_same(bars, b)


def test_lowercase_parquet_without_volume(tmp_path, ohlcv):
    frame = ohlcv.drop(columns="volume")
    path = tmp_path / "ethusd.parquet"
    frame.to_parquet(path)
    bars = load_bars(path)
    assert "volume" not in bars.frame.columns and bars.asset_class == "crypto"
    _assert_same(bars, frame, volume=False)


def test_alpaca_sdk_parquet_with_symbol_timestamp_multiindex(tmp_path, ohlcv):
    """alpaca-py's ``bars.df`` saved as is: a (symbol, timestamp) MultiIndex and trade_count/vwap columns."""
    frame = ohlcv.assign(trade_count=7.0, vwap=ohlcv["close"])
    frame.index = pd.MultiIndex.from_arrays([["BTC/USD"] * len(frame), frame.index], names=["symbol", "timestamp"])
    path = tmp_path / "btc.parquet"
    frame.to_parquet(path)
    bars = load_bars(path)
    assert bars.symbol == "BTC/USD" and bars.asset_class == "crypto"
    _assert_same(bars, ohlcv)


def test_embedded_data_honours_an_asset_class_override():
    assert load_symbol("SP500").asset_class == "stock"
    assert load_symbol("SP500", asset_class="crypto").asset_class == "crypto"


def test_naive_timestamps_are_read_as_utc(tmp_path, ohlcv):
    out = ohlcv.reset_index()
    out["timestamp"] = out["timestamp"].dt.tz_localize(None) + pd.Timedelta(hours=14, minutes=30)
    path = tmp_path / "x.csv"
    out.to_csv(path, index=False)
    bars = load_bars(path)
    assert bars.frame.index[0] == pd.Timestamp("2024-01-01 14:30", tz="UTC")


@pytest.mark.parametrize("symbol,expected", [
    ("BTCUSD", "crypto"), ("ETHUSD", "crypto"), ("BTC-USD", "crypto"), ("SOL/USDT", "crypto"),
    ("AAPL", "stock"), ("SP500", "stock"), ("USD", "stock"), ("NASDAQ", "stock"),
])
def test_asset_class_inference(symbol, expected):
    assert infer_asset_class(symbol) == expected


def test_asset_class_override(tmp_path, ohlcv):
    path = tmp_path / "BTCUSD.csv"
    ohlcv.to_csv(path)
    assert load_bars(path, asset_class="stock").asset_class == "stock"


def test_embedded_default_is_real_daily_data():
    for symbol in ("SP500", "NASDAQ"):
        bars = load_embedded(symbol)
        assert len(bars) == 5031
        assert bars.frame.index[0] == pd.Timestamp("1999-01-04", tz="UTC")
        assert bars.frame.index[-1] == pd.Timestamp("2018-12-31", tz="UTC")
    sp = load_embedded("SP500").frame
    assert sp["close"].iloc[0] == pytest.approx(1228.099976)  # S&P 500 close on 1999-01-04


def test_data_dir_overrides_embedded(tmp_path, ohlcv):
    ohlcv.to_csv(tmp_path / "SP500.csv")
    bars = load_symbol("sp500", data_dir=tmp_path)
    assert len(bars) == len(ohlcv) and bars.symbol == "SP500"
    with pytest.raises(DataError, match="no NASDAQ.csv"):
        load_symbol("NASDAQ", data_dir=tmp_path)
