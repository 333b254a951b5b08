"""The CLI end to end, in a real subprocess: one error line, exit code 2, no partial output."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import make_ohlcv


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}  # wide tables, whatever terminal ran the tests
    return subprocess.run([sys.executable, "-m", "marketcast.cli", *args], capture_output=True, text=True,
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
    (("backtest", "--bogus"), "No such option: --bogus (see 'marketcast backtest --help')"),
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
