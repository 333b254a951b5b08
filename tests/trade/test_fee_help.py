"""The --fee help of backtest, trade replay and trade run says fee, half-spread and slippage apart with the
numbers a run charges: each asset class's three numbers read back from the help equal Costs.for_asset's."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from marketcast.backtest.costs import DEFAULT_COSTS, Costs


def _help(*args: str) -> str:
    from typer.main import get_command

    from marketcast.commands import app

    result = CliRunner().invoke(get_command(app), [*args, "--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize("command", [("backtest",), ("trade", "replay"), ("trade", "run")])
def test_help_numbers_are_the_costs_charged(command):
    text = _help(*command)
    for asset in DEFAULT_COSTS:
        found = re.search(rf"{asset}: fee ([\d.]+) \+ half-spread ([\d.]+) \+ slippage ([\d.]+) = ([\d.]+) bp per "
                          "side", text)
        assert found, (asset, text)
        charged = Costs.for_asset(asset).describe()
        fee, half, slip, total = (float(g) for g in found.groups())
        assert (fee, half, slip) == (charged["fee_bps"], charged["half_spread_bps"], charged["slippage_bps"])
        assert total == pytest.approx(charged["round_trip_bps"] / 2, abs=1e-9)
    assert "crypto: fee 25 + half-spread 5 + slippage 2 = 32 bp per side" in text  # the replay
    assert "0.0015" not in text


@pytest.mark.parametrize("command", [("backtest",), ("trade", "replay"), ("trade", "run")])
def test_the_fee_range_the_help_shows_is_the_one_the_cost_check_keeps(command):
    from marketcast.backtest.costs import check_costs
    from marketcast.errors import ConfigError

    low, high = map(float, re.search(r"--fee FLOAT \[([\d.]+)\.\.([\d.]+)\]", _help(*command)).groups())
    check_costs(fee=low)
    check_costs(fee=high)  # both ends of [low..high] are inside
    for outside in (low - 1e-9, high + 1e-9):
        with pytest.raises(ConfigError, match="--fee must"):
            check_costs(fee=outside)
