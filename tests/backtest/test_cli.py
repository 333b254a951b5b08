"""``marketcast backtest`` end to end on the embedded data and on a user CSV, via the real entry point."""

import json

import pandas as pd
import pytest

from marketcast.commands import main
from tests.conftest import make_ohlcv

FAST = ["--windows", "12", "--samples", "32", "--context", "128"]


def test_default_symbols_write_every_report(tmp_path, capsys):
    out = tmp_path / "bt"
    assert main(["backtest", *FAST, "--output-dir", str(out)]) == 0
    shown = capsys.readouterr().out
    for symbol in ("SP500", "NASDAQ"):  # each leads with the verdict strip, the out-of-sample record and buy & hold
        head = shown.index(f"{symbol} · stock · 1d bars · 252 periods a year · 12 windows")
        assert shown.index(f"{symbol} verdict", head) < shown.index("\nwalk-forward ", head) < shown.index(
            "\nbuy & hold ", head)
    assert "In sample: 8 strategies" not in shown  # behind --verbose (tests/spine/test_verbose.py)
    assert sorted(p.name for p in (out / "latest").iterdir()) == [  # plots only on request (--plots)
        "NASDAQ.json", "SP500.json", "summary.md", "trades.csv"]
    report = json.loads((out / "latest" / "SP500.json").read_text())
    assert report["symbol"] == "SP500" and report["runs"] == 12 and report["config"]["exit"] == "next-open"
    assert report["config"]["min_trades"] == 10 and report["strategies_compared"] == 8
    # never a best with fewer trades than min_trades: under the default next-open exit a same-side entry after a
    # traded window is refused as a wash, so in 12 windows no strategy reaches 10 trades and none is best
    trades = {name: s["trades"] for name, s in report["strategies"].items()}
    assert max(trades.values()) < 10 and report["best_strategy"] is None
    assert report["periods_per_year"] == 252 and report["annualisation"] == "sqrt(252)"
    assert report["asset_class_reason"] == ("SP500: no futures, forex or crypto pattern, so a stock; the bar times "
                                            "allow it: daily bars on weekdays only (a stock, a forex pair or a future)")
    assert report["benchmark"]["trades"] == 1 and report["benchmark"]["name"] == "buy_and_hold"
    wf = report["walk_forward"]
    assert wf["lookback"] == 70 and report["metrics"]["walk_forward_oos_return"] == wf["return"]
    for key in ("psr", "sharpe_ci_low", "sharpe_ci_high", "alpha", "beta", "information_ratio"):
        assert key in report["strategies"]["simple"] and key in wf
    assert set(report["strategies"]) == {"simple", "all_signals", "buy_hold", "unprofit_shutdown", "ci_guard",
                                         "entry_takeprofit", "highlow", "maxdiff"}
    for key in ("return", "sharpe", "final_day", "avg_daily_return", "annual_return", "turnover"):
        assert key in report["strategies"]["simple"]
    for key in ("close_val_loss", "high_val_loss", "low_val_loss", "mase", "crps"):
        assert report["metrics"][key] is not None
    trades = pd.read_csv(out / "latest" / "trades.csv")
    assert len(trades) == 2 * 8 * 12 and set(trades.symbol) == {"SP500", "NASDAQ"}
    for name, metrics in report["strategies"].items():
        rows = trades[(trades.symbol == "SP500") & (trades.strategy == name)]
        assert (1 + rows.net_return).prod() - 1 == pytest.approx(metrics["return"], abs=1e-9)
    md = (out / "latest" / "summary.md").read_text()
    assert "## SP500 · stock · 1d bars · 252 periods a year · 12 windows" in md and "_equity.png" not in md
    assert md.index("### Out of sample") < md.index("| buy & hold |") < md.index("### In sample: 8 strategies")


def test_json_flag_and_a_crypto_csv(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    make_ohlcv(80, seed=4).to_csv(data / "ETHUSD.csv")
    out = tmp_path / "out"
    code = main(["backtest", "ETHUSD", *FAST, "--data-dir", str(data), "--output-dir", str(out),
                 "--json", "--fill-mode", "penetrate", "--same-bar", "nearest", "--plots"])
    assert code == 0
    assert (out / "latest" / "ETHUSD_equity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![equity](ETHUSD_equity.png)" in (out / "latest" / "summary.md").read_text()
    reports = json.loads(capsys.readouterr().out)
    assert reports[0]["asset_class"] == "crypto" and reports[0]["annualisation"] == "sqrt(365)"
    assert reports[0]["asset_class_reason"].startswith("ETHUSD: ETH is a crypto ticker, quoted in USD; the bar "
                                                       "times agree: 28% of the 80 bars fall on a weekend")
    # crypto's default fee is Alpaca's tier-1 taker fee, 0.25 % (was 0.0015, the maker fee; docs/backtest.md#costs)
    assert reports[0]["config"]["fee_per_side"] == 0.0025 and reports[0]["config"]["fill_mode"] == "penetrate"
    costs = reports[0]["costs"]
    assert (costs["fee_bps"], costs["half_spread_bps"], costs["slippage_bps"], costs["borrow_rate"]) == \
        pytest.approx((25, 5, 2, 0))
    assert "costs per side: fee 25 bp + half-spread 5 bp + slippage 2 bp = 32 bp" in (out / "latest" / "summary.md").read_text()
    trades = pd.read_csv(out / "latest" / "trades.csv")
    assert (trades.side >= 0).all()  # crypto is long-only


@pytest.mark.parametrize("args, message", [
    (["--fill-mode", "cross"], "--fill-mode"),
    (["--windows", "99999"], "SP500 (arch:arch.data.sp500): 5,031 bars fit at most 5,028 windows, not 99,999"),
    (["--windows", "5029"], "use --windows 5028 or fewer"),
    (["--asset-class", "bond"], "'bond' is not one of stock, crypto, forex, future"),
    (["--asset-class", "AAPL=crypto"], "AAPL is not among the symbols given"),
    (["NOSUCH"], "no embedded data"),
    (["--model", "prophet"], "unknown model"),
    (["--strategies", "simple,moon"], "unknown strategies"),
    (["--min-trades", "0"], "--min-trades must be an integer >= 1, got 0"),
    (["--min-trades", "20", "--select-lookback", "12"], "--min-trades 20 is more than --select-lookback 12"),
])
def test_bad_input_is_one_line_exit_2_and_no_output(tmp_path, capsys, args, message):
    out = tmp_path / "never"
    assert main(["backtest", *args, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def _hourly_eurusd(n=240):
    """Hourly bars of two forex weeks: Sunday 17:00 to Friday 17:00 New York (22:00 UTC in January)."""
    start = pd.Timestamp("2024-01-07 22:00", tz="UTC")
    stamps = [t for t in pd.date_range(start, periods=14 * 24, freq="h")
              if (t - start) % pd.Timedelta(days=7) < pd.Timedelta(days=5)][:n]
    return make_ohlcv(n, seed=2).set_axis(pd.DatetimeIndex(stamps, name="timestamp"))


def test_hourly_eurusd_is_forex_with_hourly_periods_and_monthly_crypto_uses_12(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    _hourly_eurusd().to_csv(data / "EURUSD.csv")
    make_ohlcv(150, seed=5, freq="MS", start="2010-01-01").to_csv(data / "BTC-USD.csv")
    out = tmp_path / "out"
    assert main(["backtest", "EURUSD", "BTC-USD", *FAST, "--data-dir", str(data), "--output-dir", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "EURUSD · forex · 1h bars · 6,264 periods a year" in shown
    assert "BTC-USD · crypto · 1mo bars · 12 periods a year" in shown
    fx, btc = (json.loads((out / "latest" / f"{s}.json").read_text()) for s in ("EURUSD", "BTC-USD"))
    assert (fx["asset_class"], fx["periods_per_year"], fx["bar_interval"], fx["calendar"]) == (
        "forex", 6264, "1h", "FX24x5")
    assert fx["asset_class_reason"] == ("EURUSD: EUR and USD are both ISO 4217 currencies; the bar times allow it: "
                                        "1h bars in 24 of 24 hours of the day (UTC) and not on weekends: the "
                                        "market trades 24/5")
    assert "24 bars a session (the median over 10 sessions in the data) x 261 sessions a year" in fx[
        "periods_per_year_how"]
    # forex's fee is now the ECN commission alone (0.3 bp); its spread is modelled apart (0.5 bp a side)
    assert fx["config"]["fee_per_side"] == pytest.approx(0.00003) and fx["annualisation"] == "sqrt(6264)"
    assert fx["costs"]["half_spread_bps"] == pytest.approx(0.5) and fx["costs"]["borrow_rate"] == 0
    assert (btc["asset_class"], btc["periods_per_year"], btc["bar_interval"]) == ("crypto", 12, "1mo")
    assert btc["periods_per_year_how"].endswith(": 12 a year")
    md = (out / "latest" / "summary.md").read_text()
    assert "**6,264 periods a year**" in md and "**12 periods a year**: monthly bars" in md
    trades = pd.read_csv(out / "latest" / "trades.csv")
    assert (trades[trades.symbol == "BTC-USD"].side >= 0).all() and (trades[trades.symbol == "EURUSD"].side < 0).any()


def test_asset_class_for_one_symbol_overrides_the_symbol(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    make_ohlcv(80, seed=4).to_csv(data / "ETHUSD.csv")
    make_ohlcv(80, seed=6, freq="B").to_csv(data / "AAPL.csv")
    code = main(["backtest", "ETHUSD", "AAPL", *FAST, "--data-dir", str(data), "--output-dir", str(tmp_path / "o"),
                 "--json", "--asset-class", "ethusd=stock"])
    assert code == 0
    eth, aapl = json.loads(capsys.readouterr().out)
    assert eth["asset_class"] == "stock" and aapl["asset_class"] == "stock"
    assert eth["asset_class_reason"] == "ETHUSD: set to stock by --asset-class (the symbol alone reads as crypto)"
    # daily bars every calendar day do not fit the stock exchange's sessions: the report says so
    assert any("same XNYS session" in w for w in eth["data_warnings"])


def test_csv_text_equals_pandas_to_csv():
    from marketcast.backtest.report import csv_text

    frame = pd.DataFrame({
        "symbol": ["A,B", 'say "hi"', "line\nbreak", "plain"], "side": [1, -1, 0, 1],
        "price": [1 / 3, float("nan"), 1e-12, 123456789.123], "filled": [True, False, True, False],
        "reason": ["close", None, "take_profit", None], "offset": [0.001, -0.002, float("nan"), 0.0],
        "ts": pd.date_range("2024-01-01", periods=4, tz="UTC").map(lambda t: t.isoformat()),
    })
    assert csv_text(frame) == frame.to_csv(index=False, float_format="%.10g")


def test_the_default_run_says_the_answer_first(tmp_path):
    """``make run`` (``marketcast backtest``, no argument, piped as a log sees it): each symbol's strip opens with
    the answer, and on the embedded bars' last 70 windows that is "no edge": the walk-forward record loses money
    while a falling buy & hold loses more, which the strip's figures alone ("+7.95 pts") would not say; the strip
    names the default exit rule, next-open."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for symbol in ("SP500", "NASDAQ"):
        doc = json.loads((tmp_path / "out" / "backtest" / "latest" / f"{symbol}.json").read_text())
        wf, bh = doc["walk_forward"]["return"], doc["benchmark"]["return"]
        assert wf < 0 and wf > bh  # lost, and lost less than buy & hold
        said = f"no edge: the walk-forward record lost {-100 * wf:.2f}% (buy & hold {100 * bh:+.2f}%)"
        assert doc["verdict"]["answer"] == said and doc["verdict"]["status"]["answer"] == "red"
        title = next(i for i, line in enumerate(lines) if line.startswith(f"{symbol} · stock"))
        assert lines[title + 1] == f"{symbol} verdict {said}"  # the strip's first line, without --verbose
        assert doc["verdict"]["status"]["vs_buy_hold"] != "green"  # ahead of buy & hold, but not good
    assert "SP500 verdict no edge: the walk-forward record lost 6.31% (buy & hold -14.26%)" in lines
    strip = lines[lines.index("SP500 verdict no edge: the walk-forward record lost 6.31% (buy & hold -14.26%)") + 1]
    assert strip.startswith("  exit next-open · vs buy & hold +7.95 pts, Sharpe +0.48 · ")  # the README's figures
