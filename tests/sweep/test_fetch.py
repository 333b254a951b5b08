"""``data fetch`` pieces that need no server: timeframes, symbols, Alpaca's bar objects, the files, errors.

(The end-to-end fetch, paginated, runs against the fake Alpaca server once it serves pages.)
"""

from __future__ import annotations

import pandas as pd
import pytest
import requests
from alpaca.common.exceptions import APIError

from marketcast.data import load_bars
from marketcast.data.fetch import alpaca_error, alpaca_symbol, bars_frame, parse_timeframe, write_bar_files
from marketcast.errors import AuthError, ConfigError, DataError, UnavailableError

RAW = [{"t": "2024-01-02T05:00:00Z", "o": 10.0, "h": 11.0, "l": 9.5, "c": 10.5, "v": 1000, "n": 7, "vw": 10.2},
       {"t": "2024-01-03T05:00:00Z", "o": 10.5, "h": 10.9, "l": 10.1, "c": 10.2, "v": 900, "n": 5, "vw": 10.4}]


def test_timeframes_and_symbols():
    assert parse_timeframe("1Day").value == "1Day" and parse_timeframe("15min").value == "15Min"
    assert parse_timeframe("3Month").value == "3Month"
    with pytest.raises(ConfigError, match="use <N>Min"):
        parse_timeframe("daily")
    with pytest.raises(ConfigError, match="Day and Week units can only be used with amount 1"):
        parse_timeframe("2Day")
    assert [alpaca_symbol(s, "crypto") for s in ("BTCUSD", "eth-usd", "SOL/USDT", "BTCEUR")] == [
        "BTC/USD", "ETH/USD", "SOL/USDT", "BTCEUR"]
    assert alpaca_symbol("brk.b", "stock") == "BRK.B"


def test_bar_objects_become_a_valid_frame_and_files_the_loader_reads(tmp_path):
    frame = bars_frame(RAW, "alpaca:X")
    assert list(frame.columns) == ["open", "high", "low", "close", "volume"]
    assert frame.index[0] == pd.Timestamp("2024-01-02 05:00", tz="UTC") and frame["close"].tolist() == [10.5, 10.2]
    bad = [dict(RAW[0], h=9.0)]
    with pytest.raises(DataError, match="alpaca:X: row 1 .* column 'high'"):
        bars_frame(bad, "alpaca:X")
    for fmt in ("csv", "parquet"):
        (path,) = write_bar_files({"BTC/USD": frame}, tmp_path / fmt, fmt)
        assert path.name == f"BTCUSD.{fmt}" and not list(path.parent.glob(".*"))
        back = load_bars(path)
        pd.testing.assert_frame_equal(back.frame, frame, check_freq=False)
        assert back.symbol == "BTCUSD" and back.asset_class == "crypto"
    with pytest.raises(ConfigError, match="--format 'xlsx'"):
        write_bar_files({"X": frame}, tmp_path, "xlsx")


def _api_error(status: int) -> APIError:
    response = requests.Response()
    response.status_code = status
    return APIError('{"code": 1, "message": "nope"}', requests.HTTPError(response=response))


@pytest.mark.parametrize("exc, kind, text", [
    (_api_error(401), AuthError, "refused the keys (HTTP 401)"),
    (_api_error(422), DataError, "rejected the request (HTTP 422)"),
    (_api_error(429), UnavailableError, "unavailable (HTTP 429)"),
    (_api_error(503), UnavailableError, "unavailable (HTTP 503)"),
    (requests.ConnectionError("refused"), UnavailableError, "unavailable (ConnectionError): refused"),
])
def test_client_failures_map_to_exit_codes(exc, kind, text):
    error = alpaca_error(exc, "alpaca stock bars for AAPL")
    assert type(error) is kind and text in str(error) and str(error).startswith("alpaca stock bars for AAPL")
