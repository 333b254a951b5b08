"""The CLI follows its own conventions: --version, --debug in the help, the same name, short flag, range
and help for the same concept in every command, every option documented, bare groups print help (exit 0),
device and dtype checked whatever the model, prices printed with their tick's decimals."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import typer

from marketcast.commands import app, main
from tests.conftest import make_ohlcv

SHARED = ("--model", "--weights", "--device", "--dtype", "--context", "--samples", "--seed", "--data-dir",
          "--on-duplicate", "--asset-class", "--periods-per-year")
BARS_OPTIONS = ("--asset-class", "--periods-per-year")  # every command that reads bars
MINE = ("backtest", "forecast", "data check", "models download")  # compile and trade adopt them later


def _command(path: str):
    command = typer.main.get_command(app)
    for name in path.split():  # the root group imports a command only when asked (marketcast.commands.lazy)
        command = command.load(name) if hasattr(command, "load") else command.commands[name]
    return command


def _options(path: str) -> dict:
    return {p.opts[0]: p for p in _command(path).params if p.param_type_name == "option"}


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("marketcast 0.1.0 (Python 3.")


def test_help_lists_debug_and_version(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    assert "--debug" in shown and "--version" in shown and "models" in shown


@pytest.mark.parametrize("group", ["data", "models", "trade", "compile"])
def test_a_bare_group_prints_its_help_and_exits_0(capsys, group):
    assert main([group]) == 0
    assert f"Usage: marketcast {group}" in capsys.readouterr().out


def test_shared_options_are_declared_identically():
    backtest, forecast = _options("backtest"), _options("forecast")
    for name in SHARED:
        a, b = backtest[name], forecast[name]
        assert (a.opts, a.help, a.min, a.max, a.callback is None) == (b.opts, b.help, b.min, b.max,
                                                                      b.callback is None), name
    assert backtest["--samples"].opts == ["--samples", "-s"] and backtest["--windows"].opts == ["--windows", "-n"]
    assert backtest["--context"].min == forecast["--context"].min == 3
    assert _options("data check")["--asset-class"].help == backtest["--asset-class"].help
    for path in ("data check", "trade replay"):
        for name in BARS_OPTIONS:
            a, b = _options(path)[name], backtest[name]
            assert (a.opts, a.help, a.callback is None) == (b.opts, b.help, b.callback is None), (path, name)


@pytest.mark.parametrize("path", MINE)
def test_every_option_and_argument_is_documented(path):
    for param in _command(path).params:
        assert (param.help or "").strip(), f"{path} {param.name} has no help"


@pytest.mark.parametrize("command", [["forecast", "SP500"], ["backtest", "SP500"]])
@pytest.mark.parametrize("option,value", [("--device", "bogus"), ("--device", ""), ("--dtype", "bogus"),
                                          ("--dtype", "float16")])
def test_device_and_dtype_are_checked_for_the_baseline_too(tmp_path, capsys, command, option, value):
    assert main([*command, f"{option}={value}", "--output-dir" if command[0] == "backtest" else "--seed",
                 str(tmp_path / "out") if command[0] == "backtest" else "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"Invalid value for '{option}'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["forecast", "SP500"], ["backtest"]])
def test_the_same_context_range_and_message_everywhere(capsys, command):
    assert main([*command, "--context", "2"]) == 2
    assert "Invalid value for '--context' / '-c'" in capsys.readouterr().err


def test_forecast_prints_forex_prices_with_their_five_decimals(tmp_path, capsys):
    frame = make_ohlcv(60, seed=3)
    frame[["open", "high", "low", "close"]] = (frame[["open", "high", "low", "close"]] / 92.0).round(5)
    frame["high"] = frame[["open", "high", "close"]].max(axis=1)
    frame["low"] = frame[["open", "low", "close"]].min(axis=1)
    frame.to_csv(tmp_path / "EURUSD.csv")
    assert main(["forecast", "EURUSD", "--data-dir", str(tmp_path), "-H", "2", "-s", "64"]) == 0
    out = capsys.readouterr().out
    assert f"close {frame['close'].iloc[-1]:,.5f}," in out
    rows = [line for line in out.splitlines() if re.match(r"^│\s+[12] │", line)]
    assert len(rows) == 2 and all(len(re.findall(r"\b1\.\d{5}\b", row)) == 7 for row in rows), out


@pytest.mark.parametrize("prices,decimals", [
    ([1228.099976, 1230.5, 1190.25], 2),  # float32 export of a 0.01 tick
    ([1.08345, 1.0834, 1.09], 5),
    ([43125.5, 43130.0], 2),
    ([0.00001234, 0.00001301], 8),
    ([123.0, 124.0], 2),
])
def test_price_decimals_follow_the_tick(prices, decimals):
    from marketcast.data.ticks import price_decimals

    assert price_decimals(np.array(prices)) == decimals


def test_data_check_reports_ns_spacing_for_millisecond_parquet(tmp_path, capsys):
    out = make_ohlcv(10, freq="h").reset_index()
    out["timestamp"] = out["timestamp"].dt.tz_localize(None).astype("datetime64[ms]")
    path = tmp_path / "ETHUSD.parquet"
    out.to_parquet(path)
    assert main(["data", "check", str(path)]) == 0
    assert "3600 s" in capsys.readouterr().out
    assert pd.read_parquet(path)["timestamp"].dtype == "datetime64[ms]"
