"""The asset class comes from the bar times first and the name second (:mod:`marketcast.data.detect`), and every
command that reads bars takes --asset-class and --periods-per-year."""

from __future__ import annotations

import json
import math
import warnings

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data import load_bars
from marketcast.data.detect import bar_pattern
from marketcast.errors import DataWarning
from tests.conftest import make_ohlcv

FAST = ["--windows", "12", "--samples", "32", "--context", "128"]


def _weekly_hours(start: str, hours: range, days: int = 5, weeks: int = 3) -> pd.DatetimeIndex:
    """Hourly stamps on ``days`` weekdays from ``start`` (a Monday), at the UTC ``hours`` of each day."""
    first = pd.Timestamp(start, tz="UTC")
    return pd.DatetimeIndex([first + pd.Timedelta(days=7 * w + d, hours=h)
                             for w in range(weeks) for d in range(days) for h in hours], name="timestamp")


def _fx_hourly(n: int = 240) -> pd.DatetimeIndex:
    """Hourly forex bars: Sunday 22:00 UTC (17:00 New York in January) to Friday 22:00 UTC."""
    start = pd.Timestamp("2024-01-07 22:00", tz="UTC")
    stamps = [t for t in pd.date_range(start, periods=21 * 24, freq="h")
              if (t - start) % pd.Timedelta(days=7) < pd.Timedelta(days=5)][:n]
    return pd.DatetimeIndex(stamps, name="timestamp")


def _load(tmp_path, name: str, frame: pd.DataFrame, **kw):
    path = tmp_path / name
    frame.to_csv(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bars = load_bars(path, **kw)
    return bars, [str(w.message) for w in caught if issubclass(w.category, DataWarning)]


def test_a_24_7_daily_series_named_like_a_stock_is_crypto_with_one_warning(tmp_path):
    bars, said = _load(tmp_path, "XYZ.csv", make_ohlcv(60))
    assert (bars.asset_class, bars.periods_per_year, bars.allow_short) == ("crypto", 365, False)
    assert len(said) == 1 and "the bar times say crypto, not stock as the name reads: " in said[0]
    assert "--asset-class" in said[0] and "XYZ.csv" in said[0]
    assert "fall on a weekend" in bars.asset_reason


def test_the_data_check_command_prints_that_warning_as_one_line(tmp_path, capsys):
    make_ohlcv(60).to_csv(tmp_path / "XYZ.csv")
    assert main(["data", "check", str(tmp_path / "XYZ.csv")]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and "the bar times say crypto" in lines[0]
    assert "crypto (365 periods/year)" in out


def test_monthly_btcusd_with_weekend_stamps_is_crypto_by_its_name_with_12_periods(tmp_path):
    frame = make_ohlcv(60, freq="MS", start="2015-01-01")
    assert (frame.index.dayofweek >= 5).any()  # the 1st of a month is a Saturday or Sunday now and then
    bars, said = _load(tmp_path, "BTCUSD-monthly.csv", frame)
    assert (bars.symbol, bars.asset_class, bars.periods_per_year) == ("BTCUSD-MONTHLY", "crypto", 12)
    assert said == []  # the bar times say nothing about the calendar, so there is nothing to disagree with
    assert "read as BTCUSD" in bars.asset_reason and "1mo bars carry no weekday" in bars.asset_reason


def test_hourly_24_5_bars_are_forex_whatever_the_name(tmp_path):
    frame = make_ohlcv(240, seed=2).set_axis(_fx_hourly())
    assert bar_pattern(frame.index)[0] == "24/5"
    bars, said = _load(tmp_path, "EURUSD.csv", frame)
    assert (bars.asset_class, bars.periods_per_year, said) == ("forex", 24 * 261, [])
    bars, said = _load(tmp_path, "FEED.csv", frame)
    assert bars.asset_class == "forex" and len(said) == 1 and "say forex" in said[0]


def test_hourly_bars_in_exchange_hours_are_a_stock_even_named_like_crypto(tmp_path):
    frame = make_ohlcv(105, seed=3).set_axis(_weekly_hours("2024-03-04", range(13, 20)))
    bars, said = _load(tmp_path, "AAPL.csv", frame)
    assert (bars.asset_class, said) == ("stock", [])
    bars, said = _load(tmp_path, "BTCUSD.csv", frame)
    assert bars.asset_class == "stock" and len(said) == 1 and "say stock, not crypto as the name reads" in said[0]


@pytest.mark.parametrize("name, expected", [("EURUSD", "forex"), ("SP500", "stock"), ("ES=F", "future"),
                                            ("GBP_USD_daily", "forex")])
def test_weekday_daily_bars_are_a_tie_the_name_breaks(tmp_path, name, expected):
    bars, said = _load(tmp_path, f"{name}.csv", make_ohlcv(60, freq="B"))
    assert (bars.asset_class, said) == (expected, [])
    assert "the bar times allow it: daily bars on weekdays only" in bars.asset_reason


def test_weekday_daily_bars_named_like_crypto_are_a_stock_with_a_warning(tmp_path):
    bars, said = _load(tmp_path, "ETHUSD.csv", make_ohlcv(60, freq="B"))
    assert bars.asset_class == "stock" and len(said) == 1 and "say stock, not crypto as the name reads" in said[0]


def test_asset_class_overrides_the_detection_and_says_when_the_bar_times_disagree(tmp_path):
    """--asset-class wins; where the bar times say otherwise (24/7 daily bars kept as a stock: weekend bars an
    exchange never traded), one warning says so instead of passing in silence."""
    bars, said = _load(tmp_path, "XYZ.csv", make_ohlcv(60), asset_class="stock")
    assert bars.asset_class == "stock" and len(said) == 1
    assert "the bar times say crypto, not stock" in said[0] and "kept as stock because --asset-class says so" in said[0]
    assert bars.asset_reason.endswith("(and --asset-class stock)")
    bars, said = _load(tmp_path, "XYZ.csv", make_ohlcv(60, freq="B"), asset_class="forex")
    assert (bars.asset_class, said) == ("forex", [])
    assert bars.asset_reason == "XYZ: set to forex by --asset-class (the symbol alone reads as stock)"


def test_periods_per_year_overrides_the_calendar(tmp_path):
    bars, _ = _load(tmp_path, "BTCUSD.csv", make_ohlcv(60), periods_per_year=252.0)
    assert bars.periods_per_year == 252 and bars.annualisation.how.startswith("252 a year, set by --periods-per-year")
    assert "the calendar gives 365" in bars.annualisation.how
    assert bars.head(10).periods_per_year == 252  # slices keep it


def test_backtest_takes_a_file_path_and_names_the_run_by_its_stem(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    make_ohlcv(80, seed=4, freq="B").to_csv(data / "GOOG.csv")
    out = tmp_path / "out"
    assert main(["backtest", str(data / "GOOG.csv"), *FAST, "--output-dir", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    assert (report["symbol"], report["asset_class"], report["periods_per_year"]) == ("GOOG", "stock", 252)
    assert (out / "latest" / "GOOG.json").exists()


def test_periods_per_year_changes_the_annualisation_by_the_square_root(tmp_path, capsys):
    path = tmp_path / "BTCUSD.csv"
    make_ohlcv(80, seed=4).to_csv(path)
    reports = {}
    for extra in ([], ["--periods-per-year", "252"]):
        assert main(["backtest", str(path), *FAST, "--output-dir", str(tmp_path / "o"), "--json", *extra]) == 0
        reports[tuple(extra)] = json.loads(capsys.readouterr().out)[0]
    calendar, given = reports[()], reports[("--periods-per-year", "252")]
    assert (calendar["periods_per_year"], calendar["annualisation"]) == (365, "sqrt(365)")
    assert (given["periods_per_year"], given["annualisation"]) == (252, "sqrt(252)")
    assert "set by --periods-per-year" in given["periods_per_year_how"]
    compared = 0
    for name, metrics in calendar["strategies"].items():
        a, b = metrics["sharpe"], given["strategies"][name]["sharpe"]
        assert b == pytest.approx(a * math.sqrt(252 / 365), rel=1e-12, abs=1e-12), name
        compared += a != 0
    assert compared  # at least one strategy with a non-zero Sharpe ratio


@pytest.mark.parametrize("args, message", [
    (["backtest", "no/such/GOOG.csv"], "no/such/GOOG.csv: no such file"),
    (["backtest", "--periods-per-year", "0"], "0 is not a positive number of periods per year"),
    (["backtest", "--periods-per-year", "-252"], "-252 is not a positive number of periods per year"),
    (["forecast", "SP500", "--periods-per-year", "0"], "not a positive number of periods per year"),
    (["forecast", "SP500", "--asset-class", "bond"], "'bond' is not one of stock, crypto, forex, future"),
    (["backtest", "--asset-class", "bond"], "'bond' is not one of stock, crypto, forex, future"),
    (["trade", "replay", "--from", "2017-01-01", "--to", "2017-02-01", "--periods-per-year", "nan"],
     "nan is not a finite number"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert main([*args, *(["--output-dir", str(tmp_path / "never")] if args[0] == "backtest" else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "never").exists()


def test_data_check_takes_periods_per_year_and_a_bad_one_is_exit_2(tmp_path, capsys):
    path = tmp_path / "SP500.csv"
    make_ohlcv(30, freq="B").to_csv(path)
    assert main(["data", "check", str(path), "--periods-per-year", "250"]) == 0
    assert "stock (250 periods/year)" in capsys.readouterr().out
    assert main(["data", "check", str(path), "--periods-per-year", "0"]) == 2
    assert "not a positive number" in capsys.readouterr().err


SPEC = """
[data]
symbols = ["SP500", "NASDAQ"]
{extra}
[options]
windows = 30
"""


def test_a_sweep_takes_asset_class_and_periods_per_year_from_its_spec_or_the_command_line(tmp_path):
    from marketcast.sweep.spec import load_spec

    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(extra=""))
    plain = load_spec(path)
    assert {c.periods_per_year for c in plain.cells()} == {None} and {c.asset_class for c in plain.cells()} == {None}
    path.write_text(SPEC.format(extra="periods_per_year = 250\n"))
    spec = load_spec(path)
    assert {c.periods_per_year for c in spec.cells()} == {250.0} and spec.spec_hash != plain.spec_hash
    assert {c.cell_id for c in spec.cells()}.isdisjoint(c.cell_id for c in plain.cells())
    spec = load_spec(path, asset_class_override=["nasdaq=forex"], periods_per_year=12.0)
    assert [(c.symbol, c.asset_class, c.periods_per_year) for c in spec.cells()] == [
        ("SP500", None, 12.0), ("NASDAQ", "forex", 12.0)]
    for bad, message in (("periods_per_year = 0", "periods_per_year = 0; give a positive number"),
                         ('asset_class = "bond"', "'bond' is not one of")):
        path.write_text(SPEC.format(extra=bad + "\n"))
        with pytest.raises(Exception, match=message):
            load_spec(path)


@pytest.mark.parametrize("args, message", [
    (["--periods-per-year", "-1"], "not a positive number of periods per year"),
    (["--asset-class", "bond"], "'bond' is not one of stock, crypto, forex, future"),
])
def test_sweep_refuses_bad_bar_options_in_one_line(tmp_path, capsys, args, message):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(extra=""))
    assert main(["sweep", str(path), "--store", str(tmp_path / "runs"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_daily_bars_stamped_at_midnight_tokyo_are_a_five_day_week_not_crypto(tmp_path):
    frame = make_ohlcv(60, freq="B")  # Monday .. Friday in Tokyo: Sunday .. Thursday 15:00 UTC
    frame.index = pd.DatetimeIndex(frame.index.tz_localize(None).tz_localize("Asia/Tokyo"), name="timestamp")
    bars, said = _load(tmp_path, "7203.T.csv", frame)
    assert (frame.index.tz_convert("UTC").dayofweek == 6).sum() == 12  # a fifth of the bars on a UTC Sunday
    assert (bars.asset_class, said) == ("stock", [])


def test_forecast_detects_the_class_and_takes_asset_class(tmp_path, capsys):
    make_ohlcv(60, seed=3).to_csv(tmp_path / "XYZ.csv")
    assert main(["forecast", "XYZ", "--data-dir", str(tmp_path), "-H", "2", "-s", "16"]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        line for line in err.splitlines() if "the bar times say crypto" in line] != []
    assert main(["forecast", "XYZ", "--data-dir", str(tmp_path), "-H", "2", "-s", "16", "--asset-class",
                 "xyz=stock", "--periods-per-year", "252"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(said) == 1 and "kept as stock because --asset-class says so" in said[0]


def test_weekend_bars_in_a_stock_file_are_counted_in_one_warning(tmp_path):
    """A weekday file with one stray Saturday bar (below the 24/7 share) stays a stock, with one warning naming
    the count and the date; a clean weekday file warns nothing."""
    frame = make_ohlcv(120, freq="B", start="2020-01-01")
    stray = frame.iloc[[0]].copy()
    stray.index = pd.DatetimeIndex([pd.Timestamp("2020-03-07", tz=frame.index.tz)], name=frame.index.name)  # Sat
    bars, said = _load(tmp_path, "AAPL.csv", pd.concat([frame, stray]).sort_index())
    assert bars.asset_class == "stock" and len(said) == 1
    assert "1 of the 121 daily bars falls on a weekend (the first on 2020-03-07)" in said[0]
    assert _load(tmp_path, "AAPL.csv", frame)[1] == []


def test_monthly_bars_of_a_name_that_matches_no_rule_say_the_class_was_assumed(tmp_path):
    """Monthly bars hold no weekend evidence: a crypto series named like XBTM reads as a stock by default, and
    one warning says the class was assumed (a name that matches a rule, BTCUSD, needs none: see above)."""
    bars, said = _load(tmp_path, "XBTM.csv", make_ohlcv(60, freq="MS", start="2015-01-01"))
    assert bars.asset_class == "stock" and len(said) == 1
    assert "1mo bars carry no weekday or hour information and the name matches no asset-class rule" in said[0]
    assert "so stock is assumed; set --asset-class to choose" in said[0]
