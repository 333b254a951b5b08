"""The run store shows the costs a cell paid: fee, half-spread and slippage in basis points, the borrow rate."""

import pytest

from marketcast.runs.cells import Cell
from marketcast.runs.rows import RunContext, fingerprint, ok_rows

from .conftest import CONFIG

CTX = RunContext(run_id="r1", kind="sweep", spec_hash="h", code_version="v")


def test_every_row_has_the_costs_of_its_asset_class(results, embedded_bars):
    result = results[0]  # SP500, a stock: the class defaults (marketcast.backtest.costs)
    rows = ok_rows(CTX, Cell(symbol=result.symbol, config=CONFIG), 0, result, fingerprint(embedded_bars[0]), 0.1)
    for row in rows:
        assert (row["costs.fee_bps"], row["costs.half_spread_bps"], row["costs.slippage_bps"],
                row["costs.borrow_rate"]) == pytest.approx((5, 1, 1, 0.005))
        assert row["costs.round_trip_bps"] == pytest.approx(14)
        assert row["costs.borrow_per_bar_bps"] == pytest.approx(0.005 / 252 * 1e4)
