"""The engine on six hand-made bars: every strategy's positions and net returns computed by hand."""

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import decision_ends, run_backtest, run_many
from marketcast.backtest.orders import LONG, Decision
from marketcast.backtest.selection import SelectionRule
from marketcast.errors import ConfigError, DataError, MarketcastError

from .helpers import TableForecaster, make_bars, random_bars

OHLC = [
    (100.0, 101.0, 99.0, 100.0),   # b0
    (100.0, 102.0, 99.0, 101.0),   # b1  t=1
    (101.0, 103.0, 100.0, 102.0),  # b2  t=2, settles t=1
    (102.0, 102.5, 99.0, 100.0),   # b3  t=3
    (99.0, 101.0, 98.0, 98.5),     # b4  t=4 (opens below the previous close)
    (100.5, 101.0, 97.0, 98.0),    # b5  latest bar: decided, never settled
]
DAYS = pd.date_range("2024-01-01", periods=6, freq="D")
TABLE = {  # (close, high, low) forecast returns made at each t
    DAYS[1]: (0.01, 0.02, -0.005),
    DAYS[2]: (-0.01, 0.005, -0.02),
    DAYS[3]: (0.005, 0.01, 0.002),
    DAYS[4]: (-0.002, -0.001, -0.01),
    DAYS[5]: (0.01, 0.02, -0.01),
}
FEES = 0.002  # fee 0.001 per side, no spread
# These tests are about the strategies' decisions and fills: they keep the old explicit costs (fee only; no
# spread, slippage or borrow), not the per-class defaults of marketcast.backtest.costs (test_costs.py has those).
# The hand figures settle at bar t+1's close: --exit close (test_execution.py has the next-open rule's by hand).
CONFIG = BacktestConfig(windows=4, context=3, num_samples=101, fee=0.001, spread=0.0, slippage=0.0, borrow_rate=0.0,
                        exit="close")

# gross returns settled on b2..b5
SIMPLE = [102 / 101 - 1, -(100 / 102 - 1), 98.5 / 99 - 1, -(98 / 100.5 - 1)]
EXPECTED_STOCK = {
    "simple": (SIMPLE, [1, 1, 1, 1]),
    "all_signals": ([0, 0, SIMPLE[2], SIMPLE[3]], [0, 0, 1, 1]),
    "buy_hold": ([102 / 101 - 1, 100 / 102 - 1, 98.5 / 99 - 1, 98 / 100.5 - 1], [1, 1, 1, 1]),
    # w3's long was wrong (b4 closed below its open) -> flat on w4
    "unprofit_shutdown": ([*SIMPLE[:3], 0], [1, 1, 1, 0]),
    # band = point +- 0.004: w4's (-0.006, 0.002) holds zero
    "ci_guard": ([*SIMPLE[:3], 0], [1, 1, 1, 0]),
    # w1 high 103 < target 103.02 -> close; w2 target 99.96 hit; w3 target 101 touched; w4 target 97.515
    "entry_takeprofit": ([SIMPLE[0], -(99.96 / 102 - 1), 101 / 99 - 1, -(97.515 / 100.5 - 1)], [1, 1, 1, 1]),
    # w1 buy 100.495 fills; w2 sell 102.51 > high 102.5 unfilled; w3 buy 100.2 gaps -> open 99; w4 sell
    # 98.4015 gaps -> open 100.5
    "highlow": ([102 / 100.495 - 1, 0, SIMPLE[2], SIMPLE[3]], [1, 0, 1, 1]),
    # w1 as highlow (take profit 103.02 not reached); w2 short entry 102.51 unfilled; w3 long fills at the
    # open 99, take profit 101 touched; w4 short fills at the open 100.5, buys back at 97.515
    "maxdiff": ([102 / 100.495 - 1, 0, 101 / 99 - 1, -(97.515 / 100.5 - 1)], [1, 0, 1, 1]),
}


def _check(result, expected, fees):
    for name, (gross, filled) in expected.items():
        run = result.strategies[name]
        net = [g - fees if f else 0.0 for g, f in zip(gross, filled)]
        assert run.returns == pytest.approx(net, abs=1e-12), name
        assert [s.filled for s in run.settlements] == [bool(f) for f in filled], name
        assert run.metrics["return"] == pytest.approx(np.prod(1 + np.array(net)) - 1, abs=1e-12), name


def test_every_strategy_by_hand_stock():
    f = TableForecaster(TABLE, spread=0.02)
    result = run_backtest(make_bars(OHLC), f, CONFIG)
    assert f.calls == 1
    assert list(result.decision_times) == list(DAYS[1:5].tz_localize("UTC"))
    assert list(result.settle_times) == list(DAYS[2:6].tz_localize("UTC"))
    _check(result, EXPECTED_STOCK, FEES)
    nxt = result.next_decisions  # made at b5 (close 98) for a bar that does not exist yet
    assert nxt["simple"] == Decision(LONG)
    assert nxt["maxdiff"].entry_limit == pytest.approx(98 * 0.99)
    assert nxt["maxdiff"].take_profit == pytest.approx(98 * 1.02)
    assert result.market_return == pytest.approx(98 / 101 - 1)


def test_crypto_is_long_only():
    result = run_backtest(make_bars(OHLC, "ETHUSD", "crypto"), TableForecaster(TABLE, spread=0.02), CONFIG)
    expected = {
        "simple": ([SIMPLE[0], 0, SIMPLE[2], 0], [1, 0, 1, 0]),
        "all_signals": ([0, 0, SIMPLE[2], 0], [0, 0, 1, 0]),
        "ci_guard": ([SIMPLE[0], 0, SIMPLE[2], 0], [1, 0, 1, 0]),
        "entry_takeprofit": ([SIMPLE[0], 0, 101 / 99 - 1, 0], [1, 0, 1, 0]),
        "highlow": ([102 / 100.495 - 1, 0, SIMPLE[2], 0], [1, 0, 1, 0]),
        "maxdiff": ([102 / 100.495 - 1, 0, 101 / 99 - 1, 0], [1, 0, 1, 0]),
    }
    _check(result, expected, FEES)
    assert all(d.side >= 0 for run in result.strategies.values() for d in run.decisions)


def test_default_crypto_fee_and_spread():
    config = BacktestConfig(windows=4, context=3, num_samples=101, spread=0.002)
    result = run_backtest(make_bars(OHLC, "BTCUSD", "crypto"), TableForecaster(TABLE, spread=0.02), config)
    # crypto's default 0.0025 taker fee + 0.001 half spread (given) + 0.0002 default slippage per side
    assert result.strategies["simple"].returns[0] == pytest.approx(SIMPLE[0] - 2 * 0.0037)
    default = run_backtest(make_bars(OHLC, "BTCUSD", "crypto"), TableForecaster(TABLE, spread=0.02),
                           BacktestConfig(windows=4, context=3, num_samples=101))
    # all defaults: 25 bp fee + 5 bp half spread + 2 bp slippage = 32 bp a side
    assert default.strategies["simple"].returns[0] == pytest.approx(SIMPLE[0] - 2 * 0.0032)


def test_trades_table_traces_every_number():
    result = run_backtest(make_bars(OHLC), TableForecaster(TABLE, spread=0.02), CONFIG)
    trades = result.trades()
    assert len(trades) == 8 * 4
    for name, run in result.strategies.items():
        rows = trades[trades.strategy == name]
        assert np.prod(1 + rows.net_return.to_numpy()) - 1 == pytest.approx(run.metrics["return"])
    hl = trades[trades.strategy == "highlow"].iloc[0]
    assert hl.entry_limit == pytest.approx(100.495) and hl.entry_price == pytest.approx(100.495)
    assert hl.exit_price == 102.0 and hl.fc_low_ret == pytest.approx(-0.005)


def test_one_forecaster_call_for_all_symbols_and_windows():
    f = TableForecaster({}, spread=0.01)
    a, b = random_bars(80, seed=1, symbol="A"), random_bars(90, seed=2, symbol="B")
    results = run_many([a, b], f, BacktestConfig(windows=20, context=16, num_samples=32))
    assert f.calls == 1
    assert [r.symbol for r in results] == ["A", "B"] and all(r.windows == 20 for r in results)
    assert results[1].settle_times[-1] == b.frame.index[-1]


def test_window_placement_and_errors():
    assert list(decision_ends(10, BacktestConfig(windows=3))) == [6, 7, 8, 9]
    assert list(decision_ends(10, BacktestConfig(windows=3, include_latest=False))) == [6, 7, 8]
    assert decision_ends(10, BacktestConfig(windows=8))[0] == 1  # the first window holds 2 bars
    with pytest.raises(DataError, match="10 bars fit at most 8 windows, not 9 .* use --windows 8 or fewer"):
        decision_ends(10, BacktestConfig(windows=9))
    with pytest.raises(DataError, match="fit at most 7 windows, not 8 .* needs 3 bars of history"):
        decision_ends(10, BacktestConfig(windows=8), min_context=3)
    with pytest.raises(ConfigError):
        BacktestConfig(windows=0)
    with pytest.raises(ConfigError):
        BacktestConfig(fill_mode="cross")
    with pytest.raises(ConfigError):
        BacktestConfig(strategies=("simple", "moon"))
    with pytest.raises(ConfigError):
        BacktestConfig(point="best_guess")


class _BadForecaster:
    name, fields = "bad", ("close", "high", "low")

    def forecast(self, batch, horizon, num_samples, seed=0):
        from marketcast.forecast.base import Forecast
        return Forecast(np.full((batch.batch_size, 3, num_samples, horizon), np.nan), self.fields)


def test_a_forecaster_returning_nan_is_refused():
    with pytest.raises(MarketcastError, match="non-finite"):
        run_backtest(make_bars(OHLC), _BadForecaster(), CONFIG)


def test_forecast_skill_is_scored_against_bar_t_plus_1():
    result = run_backtest(make_bars(OHLC), TableForecaster(TABLE, spread=0.02), CONFIG)
    closes = [101, 102, 100, 98.5]  # close_t of the four scored windows
    actual = {
        "close": [102 / 101 - 1, 100 / 102 - 1, 98.5 / 100 - 1, 98 / 98.5 - 1],
        "high": [103 / 101 - 1, 102.5 / 102 - 1, 101 / 100 - 1, 101 / 98.5 - 1],
        "low": [100 / 101 - 1, 99 / 102 - 1, 98 / 100 - 1, 97 / 98.5 - 1],
    }
    assert [v.close for v in result.views] == closes
    from marketcast.backtest.skill import crps_bruteforce

    for i, name in enumerate(("close", "high", "low")):
        pred = np.array([TABLE[d][i] for d in DAYS[1:5]])
        mae = np.mean(np.abs(pred - actual[name]))
        assert result.skill[f"{name}_val_loss"] == pytest.approx(mae, abs=1e-12)
        assert result.skill[f"mase_{name}"] == pytest.approx(mae / np.mean(np.abs(actual[name])), rel=1e-9)
        z = np.linspace(-1, 1, 101) * 0.02
        crps = np.mean([crps_bruteforce(p + z, a) for p, a in zip(pred, actual[name])])
        assert result.skill[f"crps_{name}"] == pytest.approx(crps, abs=1e-12)


def test_buy_and_hold_benchmark_by_hand():
    result = run_backtest(make_bars(OHLC), TableForecaster(TABLE, spread=0.02), CONFIG)
    # in at b2's open 101, out at b5's close 98, 0.001 a side; closes of the settle bars 102, 100, 98.5, 98
    expected = [0.999 * 102 / 101 - 1, 100 / 102 - 1, 98.5 / 100 - 1, 0.999 * 98 / 98.5 - 1]
    assert result.benchmark.returns == pytest.approx(expected, abs=1e-15)
    assert result.benchmark.metrics["return"] == pytest.approx(0.999**2 * 98 / 101 - 1)
    assert result.benchmark.metrics["trades"] == 1
    assert result.benchmark.equity[-1] == pytest.approx(0.999**2 * 98 / 101)
    # buy_hold the strategy pays two costs on every bar and misses the overnight gaps
    per_bar = result.strategies["buy_hold"].metrics["return"]
    assert per_bar == pytest.approx(np.prod([1 + g - FEES for g in EXPECTED_STOCK["buy_hold"][0]]) - 1)
    simple = result.strategies["simple"]
    b = np.array(expected)
    beta = np.cov(simple.returns, b, ddof=1)[0, 1] / b.var(ddof=1)
    assert simple.metrics["beta"] == pytest.approx(beta)
    # four daily windows are not a year: no annualised alpha (its formula: tests/backtest/test_benchmark.py)
    assert simple.metrics["alpha"] is None and simple.metrics["alpha_reason"] == "n/a (< 1 year): 4 bars, 252 a year"


def test_a_strategy_that_never_trades_is_never_best():
    falling = [(100.0 - i, 100.5 - i, 98.5 - i, 99.0 - i) for i in range(12)]  # every bar opens high, closes low
    never = TableForecaster({}, default=(0.001, 0.004, -0.006))  # mixed signs: all_signals stays flat
    one = SelectionRule(min_trades=1)  # eligibility as "traded at all", so 8 windows can show the ranking
    config = BacktestConfig(windows=8, context=3, num_samples=11, strategies=("all_signals", "simple", "buy_hold"),
                            selection=one, exit="close")
    result = run_backtest(make_bars(falling), never, config)
    assert result.strategies["all_signals"].metrics["return"] == 0.0  # flat beat both losers ...
    assert result.strategies["simple"].metrics["return"] < 0
    assert result.best_strategy == "simple"  # ... and is still not "best" (simple ties buy_hold, listed first)
    assert set(result.walk_forward["picked"][1:]) == {"simple"}
    only_flat = run_backtest(make_bars(falling), never, BacktestConfig(windows=8, context=3, num_samples=11,
                                                                        strategies=("all_signals",), selection=one,
                                                                        exit="close"))
    assert only_flat.best_strategy is None and only_flat.walk_forward["picked"] == [None] * 8


def test_fewer_than_min_trades_is_never_best_and_gets_no_psr_or_interval():
    """The default min_trades (10) over 8 windows: simple and buy_hold trade all 8, too few to be picked, called
    best or given a PSR and a bootstrap interval; the rows say why."""
    from marketcast.backtest.markdown import markdown_summary
    from marketcast.backtest.report import symbol_json
    from marketcast.backtest.tables import in_sample_note, in_sample_rows, track_rows

    falling = [(100.0 - i, 100.5 - i, 98.5 - i, 99.0 - i) for i in range(12)]
    never = TableForecaster({}, default=(0.001, 0.004, -0.006))
    config = BacktestConfig(windows=8, context=3, num_samples=11, strategies=("all_signals", "simple", "buy_hold"),
                            exit="close")  # every window trades (under next-open every other one is a wash)
    result = run_backtest(make_bars(falling), never, config)
    simple = result.strategies["simple"].metrics
    assert simple["trades"] == 8 and result.best_strategy is None and result.walk_forward["picked"] == [None] * 8
    assert (simple["psr"], simple["sharpe_ci_low"], simple["sharpe_ci_high"]) == (None, None, None)
    assert simple["psr_ci_reason"] == "too few trades (8)" and simple["sharpe"] != 0  # the Sharpe itself stays
    assert result.benchmark.metrics["psr_ci_reason"] == "too few windows held (8)"
    rows = {row[0]: row for row in in_sample_rows(result)}
    assert rows["simple"][3] == "too few trades (8)" and rows["simple"][4] == "—"
    assert rows["all_signals"][3] == "too few trades (0)"
    assert track_rows(result)[0][4] == "too few trades (0)"  # the walk-forward stayed flat
    note = in_sample_note(result)
    assert note.startswith("No strategy has 10 trades, so none is best")
    assert "too few trades (< 10) to be best: simple (8), buy_hold (8)" in note
    doc = symbol_json(result)
    assert doc["best_strategy"] is None and doc["strategies"]["simple"]["psr_ci_reason"] == "too few trades (8)"
    assert doc["config"]["min_trades"] == 10 and "| simple | " in markdown_summary([result])


def test_the_fair_naive_of_high_and_low_sees_only_the_context():
    result = run_backtest(make_bars(OHLC), TableForecaster(TABLE, spread=0.02), CONFIG)
    c = [b[3] for b in OHLC]
    highs = {t: [OHLC[i][1] / c[i - 1] - 1 for i in range(max(t - 1, 1), t + 1)] for t in range(1, 5)}  # context 3
    actual = [OHLC[t + 1][1] / c[t] - 1 for t in range(1, 5)]
    naive_mae = np.mean([abs(np.mean(highs[t]) - a) for t, a in zip(range(1, 5), actual)])
    assert result.skill["high_excursion_naive_mae"] == pytest.approx(naive_mae, abs=1e-15)
    assert result.skill["mase_high_excursion"] == pytest.approx(result.skill["high_val_loss"] / naive_mae)
