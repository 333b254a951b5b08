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
