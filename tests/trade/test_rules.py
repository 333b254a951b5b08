"""Gates, sizing, MaxDiff decisions, walk-forward stats and order ids, against hand-computed numbers."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from marketcast.backtest.orders import FLAT, LONG, SHORT, Costs, Decision
from marketcast.trade.risk.gates import GateConfig, check_entry, dollar_volume
from marketcast.trade.journal.ids import client_order_id
from marketcast.backtest.views import WindowView
from marketcast.trade.loop.planner import expected_edge
from marketcast.trade.risk.portfolio import PortfolioConfig, allocate
from marketcast.trade.risk.rules import round_qty

from .helpers import signal

def test_every_gate_passes_for_a_good_signal():
    result = check_entry(signal("A", edge=0.002, sharpe=0.5, drawdown=0.1), 2e6, GateConfig())
    assert result.passed and result.reasons == ()


@pytest.mark.parametrize(
    "kwargs, dollar_vol, reason",
    [
        ({"edge": 0.0009}, 2e6, "edge 0.0900% < 0.1000%"),
        ({"sharpe": 0.0}, 2e6, "sharpe 0.00 <= 0.00"),
        ({"drawdown": 0.25}, 2e6, "drawdown -25.0% <= -25.0%"),
        ({}, 999_999.0, "dollar volume 999,999 < 1,000,000"),
        ({"side": 0}, 2e6, "flat decision"),
    ],
)
def test_each_gate_blocks_with_its_reason(kwargs, dollar_vol, reason):
    result = check_entry(signal("A", **kwargs), dollar_vol, GateConfig())
    assert not result.passed
    assert result.reasons == (reason,)


def test_dollar_volume_is_mean_of_last_20_close_times_volume():
    close = np.arange(1.0, 31.0)  # 30 bars; the last 20 closes are 11..30
    volume = np.full(30, 1000.0)
    assert dollar_volume(close, volume) == pytest.approx(1000.0 * np.mean(np.arange(11.0, 31.0)))  # 20_500


def test_sizing_respects_max_positions_per_symbol_cap_and_exposure():
    cfg = PortfolioConfig(max_positions=2, max_exposure=1.2, per_symbol_cap=0.5)
    sigs = [signal("C", edge=0.005, entry=10.0), signal("A", edge=0.02, entry=100.0), signal("B", edge=0.01, entry=30.0)]
    out = allocate(sigs, 100_000.0, cfg)
    # best edge first, 2 slots: A gets min(50_000, 120_000 / 2) -> 500 shares at 100
    # B gets min(50_000, (120_000 - 50_000) / 1) = 50_000 -> floor(50_000 / 30) = 1666 shares
    assert [(a.signal.symbol, a.qty) for a in out] == [("A", 500.0), ("B", 1666.0)]
    assert out[1].notional == pytest.approx(49_980.0)


def test_sizing_counts_what_is_already_held():
    cfg = PortfolioConfig(max_positions=2, max_exposure=1.2, per_symbol_cap=0.5)
    # one slot left and 120_000 - 100_000 = 20_000 of exposure: A gets 200 shares; held X is skipped
    out = allocate([signal("A", edge=0.02), signal("X", edge=0.5)], 100_000.0, cfg, held_exposure=100_000.0,
                   held_symbols=frozenset({"X"}))
    assert [(a.signal.symbol, a.qty) for a in out] == [("A", 200.0)]
    assert allocate([signal("A")], 100_000.0, cfg, held_exposure=120_000.0) == []
    assert allocate([signal("A")], 0.0, cfg) == []


def test_quantities_round_down_to_tradable_units():
    assert round_qty(16.999, Decimal(1)) == 16.0
    assert round_qty(1.6666669, Decimal("0.000001")) == 1.666666
    assert round_qty(0.30000000000000004, Decimal("0.1")) == 0.3  # 0.1 + 0.2: the float's printed value counts
    steps = {"BTCUSD": Decimal("0.0001")}
    out = allocate([signal("BTCUSD", entry=30_000.7)], 100_000.0, PortfolioConfig(), steps=steps)
    assert out[0].qty == math.floor(50_000 / 30_000.7 * 1e4) / 1e4 == 1.6666  # 50_000 / 30_000.7 = 1.6666277...
    # sized at the price the broker will get (a sell limit rounded up), not the decision's
    # (at the decision's 2380.952 it would be 21 shares = 49_999.99, at 2380.96 those cost 50_000.16 > the cap)
    assert allocate([signal("A", side=-1, entry=2380.952)], 100_000.0, PortfolioConfig())[0].qty == 21
    out = allocate([signal("A", side=-1, entry=2380.952)], 100_000.0, PortfolioConfig(), prices={"A": 2380.96})
    assert out[0].qty == 20 and out[0].notional == pytest.approx(47_619.2)


def test_expected_edge_by_hand():
    costs = Costs(fee=0.0005)
    view = WindowView("2024-01-02", close=100.0, close_ret=0.01, high_ret=0.03, low_ret=-0.02,
                      band_low=-0.001, band_high=0.002)
    # limit entry at 98, take profit at 103
    assert expected_edge(Decision(LONG, 98.0, 103.0), view, costs) == pytest.approx(103 / 98 - 1 - 0.001)
    assert expected_edge(Decision(SHORT, 102.0, 97.0), view, costs) == pytest.approx(1 - 97 / 102 - 0.001)
    # market entry near close_t (100), exit at the forecast close 101
    assert expected_edge(Decision(LONG), view, costs) == pytest.approx(0.01 - 0.001)
    assert expected_edge(Decision(SHORT), view, costs) == pytest.approx(-0.01 - 0.001)
    # limit entry at 99, exit at the forecast close
    assert expected_edge(Decision(LONG, 99.0), view, costs) == pytest.approx(101 / 99 - 1 - 0.001)
    assert expected_edge(Decision(FLAT), view, costs) == 0.0


def test_client_order_id_is_keyed_on_symbol_bar_and_role_only():
    a = client_order_id("SP500", "2017-03-01T00:00:00+00:00", "entry")
    assert a == client_order_id("sp500", "2017-03-01T00:00:00+00:00", "entry")
    assert a.startswith("mc-") and len(a) == 27 <= 48
    assert a != client_order_id("SP500", "2017-03-01T00:00:00+00:00", "close")
    assert a != client_order_id("SP500", "2017-03-02T00:00:00+00:00", "entry")
    assert a != client_order_id("NASDAQ", "2017-03-01T00:00:00+00:00", "entry")
    # what strategy or side a re-plan picks cannot change it: neither is part of the key
    assert a == "mc-" + __import__("hashlib").sha256(b"SP500|2017-03-01T00:00:00+00:00|entry").hexdigest()[:24]
