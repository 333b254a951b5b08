"""Costs by hand: fee + half-spread + slippage on each side, borrow per bar held short, per-class defaults,
overrides, and a negative cost refused before anything runs."""

import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.costs import BP, DEFAULT_COSTS, Costs
from marketcast.backtest.fills import settle, settle_all
from marketcast.backtest.orders import LONG, SHORT, Bar, Decision
from marketcast.errors import ConfigError

BAR = Bar(100.0, 105.0, 98.0, 103.0)


def test_round_trip_pays_fee_half_spread_and_slippage_on_each_side():
    costs = Costs(fee=5 * BP, spread=2 * BP, slippage=1 * BP)  # 5 + 1 + 1 = 7 bp a side
    s = settle(Decision(LONG), BAR, costs)
    assert s.gross_return == pytest.approx(0.03)
    assert s.fees == pytest.approx(0.0014)
    assert s.net_return == pytest.approx(0.03 - 0.0014)  # 0.0286


def test_a_short_pays_borrow_rate_over_periods_per_year_per_bar():
    # stock defaults on daily bars: 7 bp a side, 0.5 % a year over 252 bars
    costs = Costs.for_asset("stock", periods_per_year=252)
    per_bar = 0.005 / 252
    assert costs.borrow == pytest.approx(per_bar)
    short = settle(Decision(SHORT), BAR, costs)
    assert short.gross_return == pytest.approx(-0.03)
    assert short.fees == pytest.approx(0.0014 + per_bar)
    long = settle(Decision(LONG), BAR, costs)
    assert long.fees == pytest.approx(0.0014)  # a long borrows nothing
    # held N bars short: N bars' borrow, rate x N / periods a year
    n = 10
    many = settle_all([SHORT] * n, float("nan"), float("nan"), 100.0, 105.0, 98.0, 103.0, costs)
    assert (many.fees - 2 * costs.per_side).sum() == pytest.approx(0.005 * n / 252)
    # the vectorised rule equals the one-bar rule exactly
    assert many.fees[0] == short.fees and many.net[0] == short.net_return
    # hourly forex-like bars: the same rate spread over more bars
    hourly = Costs.for_asset("stock", borrow_rate=0.03, periods_per_year=6048)
    assert hourly.borrow == pytest.approx(0.03 / 6048)


def test_per_class_defaults_differ():
    stock, crypto = Costs.for_asset("stock"), Costs.for_asset("crypto")
    assert (stock.fee, stock.spread / 2, stock.slippage, stock.borrow_rate) == pytest.approx(
        (5 * BP, 1 * BP, 1 * BP, 0.005))
    assert (crypto.fee, crypto.spread / 2, crypto.slippage, crypto.borrow_rate) == pytest.approx(
        (25 * BP, 5 * BP, 2 * BP, 0.0))
    assert stock.per_side == pytest.approx(7 * BP) and crypto.per_side == pytest.approx(32 * BP)
    forex, future = Costs.for_asset("forex"), Costs.for_asset("future")
    assert forex.per_side == pytest.approx(1.0 * BP) and future.per_side == pytest.approx(0.6 * BP)
    assert set(DEFAULT_COSTS) == {"stock", "crypto", "forex", "future"}


def test_overrides_win():
    c = Costs.for_asset("crypto", fee=0.001, spread=0.0004, slippage=0.0, borrow_rate=0.1, periods_per_year=365)
    assert (c.fee, c.spread, c.slippage, c.borrow_rate) == (0.001, 0.0004, 0.0, 0.1)
    assert c.per_side == pytest.approx(0.0012) and c.borrow == pytest.approx(0.1 / 365)
    cfg = BacktestConfig(fee=0.0, spread=0.0, slippage=0.0, borrow_rate=0.0)
    assert cfg.costs("stock", 252) == Costs(0.0)
    only_fee = BacktestConfig(fee=0.002).costs("stock", 252)  # the rest keep the stock defaults
    assert only_fee.per_side == pytest.approx(0.002 + 2 * BP)


@pytest.mark.parametrize("field", ["fee", "spread", "slippage", "borrow_rate"])
def test_negative_cost_is_a_config_error(field):
    with pytest.raises(ConfigError, match="must not be negative"):
        BacktestConfig(**{field: -0.0001})
    with pytest.raises(ConfigError):
        Costs.for_asset("stock", **{field: -1.0})


@pytest.mark.parametrize("option, message", [
    ("--fee", "Invalid value for '--fee': Input should be greater than or equal to 0"),
    ("--half-spread-bps", "--half-spread-bps must not be negative, got -1"),
    ("--spread", "--spread must not be negative, got -1"),
    ("--slippage-bps", "--slippage-bps must not be negative, got -1"),
    ("--borrow-rate", "--borrow-rate must not be negative"),
])
def test_negative_cost_exits_2_with_one_line_before_anything_runs(tmp_path, capsys, option, message):
    from marketcast.commands import main

    out = tmp_path / "never"
    assert main(["backtest", "NO_SUCH_SYMBOL", option, "-1", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_every_report_shows_the_costs_used():
    from marketcast.backtest.engine import run_backtest
    from marketcast.backtest.markdown import markdown_summary
    from marketcast.backtest.report import symbol_json
    from marketcast.backtest.tables import track_note

    from .helpers import TableForecaster, random_bars

    bars = random_bars(60, seed=3)
    config = BacktestConfig(windows=20, context=8, num_samples=16, slippage=3 * BP)
    result = run_backtest(bars, TableForecaster({}, spread=0.01), config)
    expected = Costs.for_asset(bars.asset_class, slippage=3 * BP, periods_per_year=result.periods_per_year)
    assert result.costs == expected
    doc = symbol_json(result)
    assert doc["costs"] == expected.describe() and doc["costs"]["slippage_bps"] == pytest.approx(3)
    assert doc["config"]["slippage"] == 3 * BP
    note = expected.note()
    assert note in track_note(result)  # the terminal table, summary.md and the HTML tearsheet all print it
    assert note in markdown_summary([result])


def test_a_sweep_grid_takes_the_costs_and_refuses_a_negative_one(tmp_path, capsys):
    from marketcast.commands import main
    from marketcast.sweep.spec import load_spec

    path = tmp_path / "grid.toml"
    path.write_text("[data]\nsymbols = ['SP500']\n[grid]\nslippage = [0.0, 0.0002]\nborrow_rate = [0.0, 0.02]\n")
    cells = load_spec(path).cells()
    assert {(c.config.slippage, c.config.borrow_rate) for c in cells} == {
        (0.0, 0.0), (0.0, 0.02), (0.0002, 0.0), (0.0002, 0.02)}
    assert cells[0].config.costs("stock", 252).slippage == cells[0].config.slippage
    path.write_text("[data]\nsymbols = ['SP500']\n[grid]\nspread = [0.0, -0.001]\n")
    assert main(["sweep", str(path), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "spread must not be negative" in err[0], err
