"""``data fetch``: its pieces (timeframes, symbols, Alpaca's bar objects, the files, errors), and the whole
command against the fake Alpaca server, which pages its bars as Alpaca does."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import requests
from alpaca.common.exceptions import APIError

from marketcast.data import load_bars
from marketcast.data.fetch import alpaca_error, alpaca_symbol, bars_frame, parse_timeframe
from marketcast.data.sources import file_stem
from marketcast.errors import AuthError, ConfigError, DataError, DataWarning, UnavailableError

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
    with pytest.raises(DataError, match="alpaca:X: row 1.* column 'high'"):
        bars_frame(bad, "alpaca:X")
    assert file_stem("BTC/USD") == "BTC-USD" and file_stem("brk.b") == "BRK.B"
    with pytest.raises(ConfigError, match="is not a symbol"):
        file_stem("../X")
    for fmt in ("csv", "parquet"):
        path = tmp_path / f"{file_stem('BTC/USD')}.{fmt}"
        frame.to_csv(path) if fmt == "csv" else frame.to_parquet(path)
        back = load_bars(path)
        pd.testing.assert_frame_equal(back.frame, frame, check_freq=False)
        assert back.symbol == "BTC-USD" and back.asset_class == "crypto"


def test_options_are_checked_before_any_request(tmp_path, monkeypatch, capsys):
    from marketcast.commands import main

    monkeypatch.setenv("APCA_API_KEY_ID", "PK")
    monkeypatch.setenv("APCA_API_SECRET_KEY", "s")
    monkeypatch.setenv("APCA_API_DATA_URL", "http://127.0.0.1:9")  # nothing listens: a request would exit 6
    base = ["data", "fetch", "AAPL", "--start", "2024-01-01", "--out-dir", str(tmp_path / "bars")]
    for extra, text in ((["--format", "xlsx"], "--format 'xlsx'"), (["--timeframe", "daily"], "--timeframe 'daily'"),
                        (["--adjustment", "none"], "--adjustment 'none'"), (["--end", "2023-12-31"], "--end 2023-12-31 is before --start 2024-01-01"),
                        (["--source", "ccxt"], "--source 'ccxt'"),
                        (["--feed", "bogus"], "--feed 'bogus': use one of iex, sip, delayed_sip, otc, boats, "
                                              "overnight"),
                        (["--feed", "iex", "--source", "ccxt:kraken"], "only --source alpaca has feeds")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert text in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "bars").exists()
    (tmp_path / "file").write_text("x")
    assert main([*base[:-1], str(tmp_path / "file")]) == 3  # --out-dir is a file


def test_a_value_the_request_model_refuses_is_one_line_naming_the_option():
    from alpaca.data.requests import StockBarsRequest
    from alpaca.data.timeframe import TimeFrame

    from marketcast.data.fetch import refused_fields

    with pytest.raises(ValueError) as caught:  # the library's own check, as a value the pre-check let through
        StockBarsRequest(symbol_or_symbols=["AAPL"], timeframe=TimeFrame.Day, feed="bogus")
    line = refused_fields(caught.value)
    assert line.startswith("--feed 'bogus' refused: ") and "'iex'" in line and "\n" not in line


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


def test_fetch_follows_pages_and_writes_files_equal_to_the_served_bars(tmp_path, monkeypatch):
    from marketcast.commands import main
    from marketcast.data import load_symbol

    from marketcast.fake_alpaca.server import FakeAlpaca, bars_of

    served = {}
    for symbol, source in (("AAPL", "SP500"), ("BTC/USD", "NASDAQ")):
        frame = load_symbol(source).frame.loc["2014-12-01":"2016-01-31"].copy()
        frame.index = frame.index + pd.Timedelta(hours=5)  # Alpaca stamps daily bars at midnight New York
        served[symbol] = frame
    with FakeAlpaca("PKFETCHKEY", "fetch-secret") as fake:
        fake.bars = {s: bars_of(f) for s, f in served.items()}
        fake.exchange.clock = "2016-03-01T00:00:00Z"
        fake.page_size = 40  # far fewer bars a page than a year has: alpaca-py must follow next_page_token
        monkeypatch.setenv("APCA_API_KEY_ID", "PKFETCHKEY")
        monkeypatch.setenv("APCA_API_SECRET_KEY", "fetch-secret")
        monkeypatch.setenv("APCA_API_DATA_URL", fake.url)
        out = tmp_path / "bars"
        assert main(["data", "fetch", "AAPL", "BTCUSD", "--start", "2015-01-01", "--end", "2015-12-31",
                     "--out-dir", str(out)]) == 0
        pages = {p: sum(1 for _, q, _ in fake.requests if q == p) for p in ("/v2/stocks/bars", "/v1beta3/crypto/us/bars")}
    year = {s: f.loc["2015-01-01":"2016-01-01"] for s, f in served.items()}  # the last day's bar included
    assert len(year["AAPL"]) == 252 and year["AAPL"].index[-1] == pd.Timestamp("2015-12-31 05:00", tz="UTC")
    assert pages["/v2/stocks/bars"] == 7 and pages["/v1beta3/crypto/us/bars"] == 7  # ceil(252 / 40) pages each
    for name, symbol in (("AAPL", "AAPL"), ("BTCUSD", "BTC/USD")):
        got = load_bars(out / f"{name}.csv", asset_class="crypto" if name == "BTCUSD" else None)
        pd.testing.assert_frame_equal(got.frame, year[symbol][got.frame.columns], check_freq=False)
    # NASDAQ's weekday-only bars served as BTC/USD: the bar times overrule the name, with a warning
    with pytest.warns(DataWarning, match="the bar times say stock, not crypto as the name reads"):
        assert load_bars(out / "BTCUSD.csv").asset_class == "stock"
    assert sorted(p.name for p in out.iterdir()) == ["AAPL.csv", "AAPL.csv.json", "BTCUSD.csv", "BTCUSD.csv.json"]
    assert json.loads((out / "AAPL.csv.json").read_text())["adjustment"] == "all"  # no temp files, sidecars


def test_fetch_of_an_unknown_symbol_writes_nothing(tmp_path, monkeypatch):
    from marketcast.commands import main

    from marketcast.fake_alpaca.server import FakeAlpaca

    with FakeAlpaca("PKFETCHKEY", "fetch-secret") as fake:
        monkeypatch.setenv("APCA_API_KEY_ID", "PKFETCHKEY")
        monkeypatch.setenv("APCA_API_SECRET_KEY", "fetch-secret")
        monkeypatch.setenv("APCA_API_DATA_URL", fake.url)
        out = tmp_path / "bars"
        assert main(["data", "fetch", "AAPL", "NOPE", "--start", "2024-01-01", "--out-dir", str(out)]) == 2
    assert not out.exists() or list(out.iterdir()) == []
