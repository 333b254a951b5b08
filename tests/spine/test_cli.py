"""The CLI end to end, in a real subprocess: one error line, exit code 2, no partial output."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from marketcast.commands import main
from tests.conftest import make_ohlcv


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}  # wide tables, whatever terminal ran the tests
    return subprocess.run([sys.executable, "-m", "marketcast.commands", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def test_data_check_reports_what_it_found(tmp_path):
    path = tmp_path / "ETHUSD.csv"
    make_ohlcv(30).to_csv(path)
    result = run("data", "check", str(path))
    assert result.returncode == 0, result.stderr
    assert "ETHUSD" in result.stdout and "crypto (365 periods/year)" in result.stdout and "30" in result.stdout


def test_data_check_malformed_file_exits_2_with_row_and_column(tmp_path):
    frame = make_ohlcv(30).reset_index()
    frame.loc[11, "high"] = frame.loc[11, "low"] * 0.5
    path = tmp_path / "broken.csv"
    frame.to_csv(path, index=False)
    result = run("data", "check", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "row 12 (line 13)" in lines[0] and "column 'high'" in lines[0] and "Traceback" not in result.stderr


def test_debug_flag_shows_the_traceback(tmp_path):
    result = run("--debug", "data", "check", str(tmp_path / "missing.csv"))
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_forecast_prints_fan_and_writes_png(tmp_path):
    plot = tmp_path / "fan.png"
    result = run("forecast", "SP500", "--horizon", "3", "--samples", "200", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    assert "SP500 baseline forecast from 2018-12-31" in result.stdout
    assert "close P50" in result.stdout and "2019-01-03" in result.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,fragment", [
    (("forecast", "NOPE"), "no embedded data for 'NOPE'"),
    (("forecast", "SP500", "--model", "prophet"), "unknown model 'prophet'"),
    (("forecast", "SP500", "--plot", "fan.jpg"), "ending in .png"),
])
def test_forecast_bad_input_is_one_line_exit_2_and_no_file(tmp_path, args, fragment):
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,fragment", [
    (("backtest", "--qqq"), "No such option: --qqq (see 'marketcast backtest --help')"),  # nothing close: click suggests none
    (("backtest", "--windows", "abc"), "Invalid value for '--windows'"),
    (("forecast", "SP500", "--horizon", "0"), "Invalid value for '--horizon'"),
    (("data", "check"), "Missing argument"),
    (("trade", "frobnicate"), "No such command 'frobnicate'"),
])
def test_usage_errors_are_one_line_exit_2_without_traceback(tmp_path, args, fragment):
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_bare_command_prints_help():
    result = run()
    assert "backtest" in result.stdout and "Usage" in result.stdout and "Traceback" not in result.stderr


def _one_line(capsys, args, *fragments) -> None:
    """``marketcast ARGS`` in this process ends with exit 2 and one stderr line holding ``fragments``."""
    code = main(list(args))
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_header_only_csv_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "AAPL.csv"
    path.write_text("Date,Open,High,Low,Close,Adj Close,Volume\n")
    _one_line(capsys, ["data", "check", str(path)], f"{path}: holds no bars")


def test_1e300_in_the_last_row_stops_the_backtest_at_the_file(tmp_path, capsys):
    frame = make_ohlcv(80)
    frame.iloc[-1, frame.columns.get_loc("close")] = frame.iloc[-1, frame.columns.get_loc("high")] = 1e300
    frame.to_csv(tmp_path / "SPY.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow on the way
        _one_line(capsys, ["backtest", "SPY", "--data-dir", str(tmp_path), "-n", "5", "--output-dir",
                           str(tmp_path / "out")], "SPY.csv: row 80 (line 81), column 'high': price 1e+300 is outside")
    assert not (tmp_path / "out").exists()


def test_epoch_parquet_and_semicolon_csv_pass_data_check_with_their_dates(tmp_path, capsys):
    frame = make_ohlcv(30)
    frame.reset_index().assign(timestamp=frame.index.asi8 // 10**9).to_parquet(tmp_path / "epoch.parquet")
    frame.to_csv(tmp_path / "semi.csv", sep=";")
    for name in ("epoch.parquet", "semi.csv"):
        assert main(["data", "check", str(tmp_path / name)]) == 0
        assert "2024-01-01 00:00:00+00:00 / 2024-01-30 00:00:00+00:00" in capsys.readouterr().out


def test_trade_replay_with_an_impossible_date_is_one_line(tmp_path, capsys):
    _one_line(capsys, ["trade", "replay", "--from", "2018-13-45", "--to", "2018-12-31", "--state-dir",
                       str(tmp_path / "s")], "month must be in 1..12: 2018-13-45", "ISO 8601")


@pytest.mark.parametrize("how", ["after", "env"])
def test_debug_after_the_command_or_from_the_environment(tmp_path, how):
    missing = str(tmp_path / "missing.csv")
    if how == "after":
        result = run("data", "check", missing, "--debug")
    else:
        env = {**os.environ, "COLUMNS": "200", "MARKETCAST_DEBUG": "1"}
        result = subprocess.run([sys.executable, "-m", "marketcast.commands", "data", "check", missing],
                                capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode != 0 and "Traceback" in result.stderr and "DataError" in result.stderr


def test_data_check_needs_three_bars_and_says_why(tmp_path, capsys):
    path = tmp_path / "SPY.csv"
    make_ohlcv(2).to_csv(path)
    _one_line(capsys, ["data", "check", str(path)], "has 2 rows but 3 are needed (--min-rows 3; a forecast reads "
                                                    "at least 3 bars, two returns; use a longer file)")
