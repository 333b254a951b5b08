"""``data fetch --source yahoo`` and ``--source ccxt:binance`` against recorded-shape replies from a local server
(tests/sweep/fake_feeds.py), never the network: paging, a gap, a 429 then success, a malformed reply, an unknown
symbol, a missing extra, the incremental append; the files pass ``data check`` and load in ``backtest``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data import load_bars, load_symbol
from marketcast.data import sources
from marketcast.data.sources import missing_bars

from tests.sweep.fake_feeds import FakeFeeds, ohlc

SMALL = ["--windows", "3", "--samples", "8", "--context", "20", "--no-spa"]


@pytest.fixture
def feeds(monkeypatch, tmp_path):
    import yfinance

    yfinance.set_tz_cache_location(str(tmp_path / "yf-cache"))
    monkeypatch.setattr(sources, "RETRY_DELAYS", (0.0, 0.0, 0.0))  # a rate limit is retried at once here
    with FakeFeeds() as fake:
        monkeypatch.setenv(sources.MIRROR_VAR, fake.url)
        yield fake


def _aapl() -> pd.DataFrame:
    """SP500's 2015 closes served as AAPL: stamped 09:30 New York (14:30 UTC) as Yahoo stamps daily bars; the
    adjusted close halves the first 100 bars (as a 2:1 scale from later dividends would)."""
    frame = ohlc(load_symbol("SP500").frame["close"].loc["2015-01-01":"2015-12-31"])
    frame.index = frame.index.normalize() + pd.Timedelta(hours=14, minutes=30)
    frame["adjclose"] = frame["close"] * np.where(np.arange(len(frame)) < 100, 0.5, 1.0)
    return frame


def test_yahoo_daily_bars_adjusted_with_a_gap_and_a_repaired_row(feeds, tmp_path, capsys):
    served = _aapl()
    served.iloc[50, :] = np.nan  # Yahoo's row without a trade: dropped and counted as repaired
    served.iloc[60, served.columns.get_loc("volume")] = np.nan  # a bar without volume: yfinance itself writes 0
    feeds.yahoo["AAPL"] = served.drop(served.index[120])  # one session missing: a gap
    out = tmp_path / "bars"
    assert main(["data", "fetch", "AAPL", "--source", "yahoo", "--start", "2015-01-01", "--end", "2015-12-31",
                 "--out-dir", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "yahoo" and doc["adjustment"] == "all"
    (entry,) = doc["files"]
    assert entry["rows"] == 250 and entry["new"] == 250 and entry["missing_bars"] == 2 and entry["repaired"] == 1  # the
    # dropped row leaves its session missing too
    assert entry["asset_class"] == "stock"
    got = load_bars(out / "AAPL.csv").frame
    want = served.drop(served.index[[50, 120]])
    ratio = want["adjclose"] / want["close"]
    assert got.index[0] == pd.Timestamp("2015-01-02 05:00", tz="UTC")  # the session's date at midnight New York
    np.testing.assert_allclose(got["open"].to_numpy(), (want["open"] * ratio).to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(got["close"].to_numpy(), want["adjclose"].to_numpy(), rtol=1e-9)
    assert got["volume"].iloc[59] == 0 and (got["volume"].drop(got.index[59]) == 1000).all()
    side = json.loads((out / "AAPL.csv.json").read_text())
    assert side["source"] == "yahoo" and side["adjustment"] == "all" and "dividends" in side["adjusted_for"]
    assert main(["data", "check", str(out / "AAPL.csv")]) == 0
    assert main(["backtest", "--data-dir", str(out), "AAPL", *SMALL, "--output-dir", str(tmp_path / "bt")]) == 0


def test_yahoo_split_only_keeps_the_close_and_says_so(feeds, tmp_path, capsys):
    feeds.yahoo["AAPL"] = _aapl()
    out = tmp_path / "bars"
    assert main(["data", "fetch", "AAPL", "--source", "yahoo", "--start", "2015-01-01", "--end", "2015-03-31",
                 "--adjustment", "split", "--out-dir", str(out)]) == 0
    line = capsys.readouterr().out
    assert "adjusted for splits," in line and "(" in line
    got = load_bars(out / "AAPL.csv").frame
    np.testing.assert_allclose(got["close"].to_numpy(), feeds.yahoo["AAPL"]["close"].iloc[:len(got)].to_numpy())


def test_yahoo_pages_one_minute_bars_and_retries_a_429(feeds, tmp_path):
    stamps = pd.date_range("2024-03-01", periods=20 * 24 * 60, freq="1min", tz="UTC")  # 20 days, 24/7
    feeds.yahoo["BTC-USD"] = ohlc(pd.Series(40_000 + np.sin(np.arange(len(stamps)) / 50) * 100, index=stamps))
    feeds.yahoo["BTC-USD"]["adjclose"] = feeds.yahoo["BTC-USD"]["close"]
    feeds.fail["/v8/finance/chart/"] = [(429, b"Too Many Requests")] * 2  # yfinance retries once; we once more
    out = tmp_path / "bars"
    assert main(["data", "fetch", "BTC-USD", "--source", "yahoo", "--timeframe", "1Min", "--start", "2024-03-01",
                 "--end", "2024-03-20", "--out-dir", str(out)]) == 0
    pages = [q for p, q in feeds.requests if p.startswith("/v8/finance/chart/") and "period1" in q]
    assert len({q["period1"] for q in pages}) == 3  # 20 days in requests of at most 7
    got = load_bars(out / "BTC-USD.csv")
    assert len(got.frame) == len(stamps) and got.asset_class == "crypto"


@pytest.mark.parametrize("symbols, reply, text", [
    (["AAPL", "NOPE"], None, "yahoo NOPE: no such symbol or no bars in the range"),
    (["AAPL"], (200, b'{"chart": {"result": [{"meta": {}, "timestamp": "garbage"}]}}'), "yahoo AAPL: "),
    (["AAPL"], (200, b"<html>not json</html>"), "yahoo AAPL: "),
])
def test_yahoo_unknown_symbol_and_malformed_replies_are_one_line_and_write_nothing(feeds, tmp_path, capsys, symbols,
                                                                                     reply, text):
    feeds.yahoo["AAPL"] = _aapl()
    if reply is not None:
        feeds.fail["/v8/finance/chart/AAPL"] = [reply] * 10
    out = tmp_path / "bars"
    assert main(["data", "fetch", *symbols, "--source", "yahoo", "--start", "2015-01-01",
                 "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: " + text) and len(err.splitlines()) == 1
    assert not out.exists()


def _btc(start: str, hours: int) -> pd.DataFrame:
    stamps = pd.date_range(start, periods=hours, freq="1h", tz="UTC")
    return ohlc(pd.Series(42_000 + 500 * np.sin(np.arange(hours) / 24), index=stamps), volume=12.5)


def test_ccxt_pages_over_the_per_call_limit_with_a_gap_and_a_429(feeds, tmp_path, capsys):
    served = _btc("2024-01-01", 60 * 24)
    served = served.drop(served.index[700:703])  # three hours the exchange has no candle for
    feeds.binance["BTC/USDT"] = served
    feeds.fail["/api/v3/klines"] = [(429, {"code": -1003, "msg": "Too many requests."})]
    out = tmp_path / "bars"
    assert main(["data", "fetch", "BTC/USDT", "--source", "ccxt:binance", "--timeframe", "1Hour", "--start",
                 "2024-01-01", "--end", "2024-02-29", "--out-dir", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (entry,) = doc["files"]
    assert doc["source"] == "ccxt:binance" and doc["adjustment"] == "none"
    assert entry["file"] == str(out / "BTC-USDT.csv") and entry["rows"] == len(served) == 1437
    assert entry["missing_bars"] == 3 and entry["asset_class"] == "crypto"
    assert feeds.calls("/api/v3/klines") == 1 + 2  # the 429, then two pages of at most 1,000 candles
    got = load_bars(out / "BTC-USDT.csv")
    pd.testing.assert_frame_equal(got.frame, served, check_freq=False, check_names=False)
    assert got.asset_class == "crypto" and got.periods_per_year > 8000  # 24/7 hourly bars
    assert main(["data", "check", str(out / "BTC-USDT.csv")]) == 0
    assert main(["backtest", "--data-dir", str(out), "BTC-USDT", *SMALL, "--output-dir", str(tmp_path / "bt")]) == 0


def test_ccxt_daily_bars_are_24_7_for_data_check(feeds, tmp_path, capsys):
    stamps = pd.date_range("2024-01-01", "2024-03-31", freq="1D", tz="UTC")
    feeds.binance["ETH/USDT"] = ohlc(pd.Series(np.linspace(2000, 2500, len(stamps)), index=stamps))
    out = tmp_path / "bars"
    assert main(["data", "fetch", "ETH/USDT", "--source", "ccxt:binance", "--start", "2024-01-01",
                 "--out-dir", str(out)]) == 0
    capsys.readouterr()
    assert main(["data", "check", str(out / "ETH-USDT.csv"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["asset_class"] == "crypto" and doc["rows"] == 91 and "24/7" in doc["why"]


def test_ccxt_incremental_appends_only_new_bars_and_refuses_a_disagreeing_overlap(feeds, tmp_path, capsys):
    full = _btc("2024-01-01", 400)
    out = tmp_path / "bars"
    feeds.binance["BTC/USDT"] = full.iloc[:300]
    args = ["data", "fetch", "BTC/USDT", "--source", "ccxt:binance", "--timeframe", "1Hour", "--start", "2024-01-01",
            "--out-dir", str(out), "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["new"] == 300
    feeds.binance["BTC/USDT"] = full
    before = len(feeds.requests)
    assert main(args) == 0
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert entry["new"] == 100 and entry["rows"] == 400
    (first_page,) = [q for p, q in feeds.requests[before:] if p == "/api/v3/klines"][:1]
    assert int(first_page["startTime"]) == full.index[300 - 1 - sources.OVERLAP].value // 10**6
    pd.testing.assert_frame_equal(load_bars(out / "BTC-USDT.csv").frame, full, check_freq=False, check_names=False)
    changed = full.copy()
    changed.iloc[397, changed.columns.get_loc("close")] *= 1.01  # the source rewrote a bar the file holds
    changed.iloc[397, changed.columns.get_loc("high")] *= 1.02
    feeds.binance["BTC/USDT"] = pd.concat([changed, _btc("2024-01-17 16:00", 10)])
    written = (out / "BTC-USDT.csv").read_bytes()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "disagrees with the source" in err and len(err.splitlines()) == 1
    assert (out / "BTC-USDT.csv").read_bytes() == written
    assert main([*args[:-1], "--source", "yahoo"]) == 2  # another source into the same file: refused
    assert "holds source 'ccxt:binance' bars" in capsys.readouterr().err


def test_ccxt_unknown_pair_malformed_reply_and_unknown_exchange(feeds, tmp_path, capsys):
    feeds.binance["BTC/USDT"] = _btc("2024-01-01", 48)
    out = tmp_path / "bars"
    base = ["--source", "ccxt:binance", "--timeframe", "1Hour", "--start", "2024-01-01", "--out-dir", str(out)]
    assert main(["data", "fetch", "BTC/USDT", "DOGE/EUR", *base]) == 2
    assert "does not list DOGE/EUR" in capsys.readouterr().err
    assert main(["data", "fetch", "NOPE/USDT", *base]) == 2  # listed, but no candle in the range
    assert "no bars in the range" in capsys.readouterr().err
    feeds.fail["/api/v3/klines"] = [(200, [[1704067200000, "abc", "1", "1", "1", "1", 0, "0", 1, "0", "0", "0"]])]
    assert main(["data", "fetch", "BTC/USDT", *base]) == 2  # a price that is no number: caught by the validation
    err = capsys.readouterr().err.strip()
    assert "column 'open': value is nan" in err and len(err.splitlines()) == 1
    assert main(["data", "fetch", "BTC/USDT", *base[:1], "ccxt:nosuchexchange", *base[2:]]) == 2
    assert "ccxt has no exchange 'nosuchexchange'" in capsys.readouterr().err
    assert not out.exists()
    assert feeds.calls("/api/v3/klines") >= 1


@pytest.mark.parametrize("source, module, extra", [("yahoo", "yfinance", "yahoo"), ("ccxt:binance", "ccxt", "crypto")])
def test_a_missing_extra_names_the_pip_install(monkeypatch, tmp_path, capsys, source, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as when the package is absent
    assert main(["data", "fetch", "X", "--source", source, "--start", "2024-01-01", "--out-dir",
                 str(tmp_path / "bars")]) == 2
    assert f"pip install 'marketcast[{extra}]'" in capsys.readouterr().err
    assert not (tmp_path / "bars").exists()


@pytest.mark.parametrize("args", [
    ["AAPL", "--source", "yahoo", "--start", "2020-01-01"],
    ["BTC/USDT", "--source", "ccxt:binance", "--start", "2024-01-01"],
])
def test_offline_each_source_ends_in_one_line_with_the_network_exit_code(tmp_path, args):
    """No mirror, and no route out of the test: a port on 127.0.0.1 nobody listens on stands for the network."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {**__import__("os").environ, sources.MIRROR_VAR: dead, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "bars"
    done = subprocess.run([sys.executable, "-m", "marketcast.commands", "data", "fetch", *args, "--out-dir", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 6, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "cannot be reached" in done.stderr
    assert not out.exists()


def test_missing_bars_against_each_calendar():
    days = pd.date_range("2024-01-01", "2024-01-31", freq="1D", tz="UTC")
    assert missing_bars(days.delete([3, 4]), "crypto") == 2  # 24/7: every day
    sessions = pd.DatetimeIndex(["2024-01-02", "2024-01-03", "2024-01-05", "2024-01-08", "2024-01-09", "2024-01-10"],
                                tz="UTC") + pd.Timedelta(hours=5)
    assert missing_bars(sessions, "stock") == 1  # 2024-01-04, a Thursday; the weekend is no gap
    hours = pd.date_range("2024-01-06", periods=48, freq="1h", tz="UTC")
    assert missing_bars(hours.delete([10, 30, 31]), "crypto") == 3


def test_cleaning_drops_priceless_bars_keeps_one_of_a_repeated_time_and_zeroes_a_missing_volume():
    from marketcast.data.sources import _clean

    t = pd.DatetimeIndex(["2024-01-03", "2024-01-01", "2024-01-02", "2024-01-02", "2024-01-04"], tz="UTC")
    raw = pd.DataFrame({"open": [3.0, 1.0, 2.0, 2.5, np.nan], "high": [3.0, 1.0, 2.0, 2.5, np.nan],
                        "low": [3.0, 1.0, 2.0, 2.5, np.nan], "close": [3.0, 1.0, 2.0, 2.5, np.nan],
                        "volume": [7.0, np.nan, 5.0, 6.0, np.nan]}, index=t)
    kept, repaired = _clean(raw, "x")
    assert list(kept.index.day) == [1, 2, 3] and kept["close"].tolist() == [1.0, 2.5, 3.0]  # the later 01-02
    assert kept["volume"].tolist() == [0.0, 6.0, 7.0] and repaired == 3  # 01-04 dropped, a 01-02 dropped, a volume


@pytest.mark.parametrize("source, prefix, symbol", [("yahoo", "/v8/finance/chart/", "AAPL"),
                                                    ("ccxt:binance", "/api/v3/klines", "BTC/USDT")])
def test_a_rate_limit_that_outlasts_the_retries_is_one_line_and_exit_6(feeds, tmp_path, capsys, source, prefix,
                                                                       symbol):
    feeds.yahoo["AAPL"] = _aapl()
    feeds.binance["BTC/USDT"] = _btc("2024-01-01", 48)
    feeds.fail[prefix] = [(429, {"code": -1003, "msg": "Too many requests."})] * 50
    out = tmp_path / "bars"
    assert main(["data", "fetch", symbol, "--source", source, "--start", "2015-01-01" if source == "yahoo" else
                 "2024-01-01", "--out-dir", str(out)]) == 6
    err = capsys.readouterr().err.strip()
    assert "rate-limited" in err and "after every retry" in err and len(err.splitlines()) == 1
    assert not out.exists()
    assert feeds.calls(prefix) >= 1 + len(sources.RETRY_DELAYS)  # the first try and one per delay


def test_help_lists_the_three_sources_and_their_extras(capsys):
    assert main(["data", "fetch", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for word in ("alpaca (extra alpaca", "yahoo (extra yahoo: pip install 'marketcast[yahoo]'", "ccxt:EXCHANGE",
                 "extra crypto: pip install 'marketcast[crypto]'"):
        assert word in text, word
