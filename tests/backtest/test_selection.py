"""The one selection rule of the backtest's walk-forward and the live planner."""

import numpy as np
import pytest

from marketcast.backtest.selection import SelectionRule
from marketcast.errors import ConfigError

YES = np.ones(4, dtype=bool)
ONE = 1  # min_trades in the ranking tests below: eligibility is tested on its own (test_too_few_trades_...)


def test_pick_the_best_compounded_return_among_strategies_that_traded():
    returns = {"idle": [0.0] * 4, "a": [-0.01, -0.01, 0.0, 0.0], "b": [0.01, -0.03, 0.0, 0.0]}
    filled = {"idle": [False] * 4, "a": YES, "b": YES}
    # everything lost: the strategy that never traded is still not picked (0.99^2 = 0.9801 > 1.01 * 0.97)
    assert SelectionRule(None, ONE).pick(returns, filled) == "a"
    assert SelectionRule(None, ONE).pick({"idle": [0.0]}, {"idle": [False]}) is None


def test_ties_go_to_the_higher_sharpe_then_the_listing_order():
    returns = {"a": [1.0, -0.25], "b": [0.5, 0.0]}  # both compound to exactly 1.5; b's Sharpe 0.71 > a's 0.42
    filled = {"a": [True, True], "b": [True, True]}
    assert SelectionRule(None, ONE).pick(returns, filled) == "b"
    assert SelectionRule(None, ONE).pick({"a": [0.01], "b": [0.01]}, {"a": [True], "b": [True]}) == "a"


def test_only_the_last_lookback_windows_count():
    returns = {"a": [0.10, -0.01, -0.01], "b": [-0.10, 0.0, 0.005]}
    filled = {"a": [True] * 3, "b": [True] * 3}
    assert SelectionRule(None, ONE).pick(returns, filled) == "a"
    assert SelectionRule(2, ONE).pick(returns, filled) == "b"
    # a strategy that traded only before the lookback is not eligible in it
    assert SelectionRule(1, ONE).pick({"a": [0.1, 0.0]}, {"a": [True, False]}) is None


def test_walk_forward_uses_only_earlier_windows():
    returns = {"a": np.array([0.01, -0.02, 0.01]), "b": np.array([-0.01, 0.03, -0.01])}
    filled = {"a": np.array([True, True, True]), "b": np.array([True, False, True])}
    sel = SelectionRule(None, ONE).walk_forward(returns, filled)
    # k=0: nothing settled -> flat; k=1: a (1.01 > 0.99); k=2: b (0.99*1.03 = 1.0197 > 1.01*0.98 = 0.9898)
    assert sel["picked"] == [None, "a", "b"]
    assert list(sel["returns"]) == [0.0, -0.02, -0.01]
    assert list(sel["filled"]) == [False, True, True]
    # with a one-window lookback k=2 sees only window 1, where b's order did not fill: only a is eligible
    assert SelectionRule(1, ONE).walk_forward(returns, filled)["picked"] == [None, "a", "a"]


def test_lookback_must_be_positive():
    with pytest.raises(ConfigError, match="--select-lookback"):
        SelectionRule(0)


def test_too_few_trades_are_never_picked():
    """GOOG's case: a strategy with one lucky trade led the ranking. Below min_trades (default 10) it is not
    eligible, however high its return; at min_trades it is."""
    lucky = [0.05] + [0.0] * 19  # one trade, +5 %
    steady = [0.001] * 12 + [0.0] * 8  # twelve trades, +1.2 %
    returns = {"lucky": lucky, "steady": steady}
    filled = {"lucky": [True] + [False] * 19, "steady": [True] * 12 + [False] * 8}
    assert SelectionRule(None, 1).pick(returns, filled) == "lucky"  # the old rule: traded at all
    assert SelectionRule(None).min_trades == 10 and SelectionRule(None).pick(returns, filled) == "steady"
    assert SelectionRule(None, 13).pick(returns, filled) is None  # nobody has 13 trades: flat
    # the walk-forward: steady becomes eligible at window 10 (ten trades settled in windows 0..9)
    picked = SelectionRule(None).walk_forward({k: np.array(v) for k, v in returns.items()},
                                              {k: np.array(v) for k, v in filled.items()})["picked"]
    assert picked == [None] * 10 + ["steady"] * 10
    assert "at least 10 trades" in SelectionRule().describe()


@pytest.mark.parametrize("kwargs, message", [
    ({"min_trades": 0}, "--min-trades must be an integer >= 1, got 0"),
    ({"min_trades": -3}, "--min-trades must be an integer >= 1, got -3"),
    ({"lookback": 5, "min_trades": 6}, "--min-trades 6 is more than --select-lookback 5 windows hold"),
])
def test_min_trades_below_one_or_above_the_lookback_is_a_config_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SelectionRule(**kwargs)


def test_the_live_planner_picks_with_the_same_rule():
    from marketcast.backtest import BacktestConfig, run_backtest
    from marketcast.backtest.orders import FLAT, Costs
    from marketcast.trade.loop.planner import NO_PICK, BacktestPlanner

    from .helpers import MomentumForecaster, TableForecaster, random_bars

    bars = random_bars(200, seed=3)
    config = BacktestConfig(windows=30, context=64, num_samples=16)
    signal = BacktestPlanner(MomentumForecaster(), config).plan(bars, Costs(0.0005))
    result = run_backtest(bars, MomentumForecaster(), config)  # the same 30 windows, settled up to the last bar
    runs = result.strategies
    assert signal.strategy == config.selection.pick({n: r.returns for n, r in runs.items()},
                                                    {n: r.filled for n, r in runs.items()})
    assert signal.decision == result.next_decisions[signal.strategy]
    never = TableForecaster({}, default=(0.001, 0.004, -0.006))  # all_signals never trades on these forecasts
    flat = BacktestPlanner(never, config, strategies=("all_signals",)).plan(bars, Costs(0.0005))
    assert flat.strategy == NO_PICK and flat.decision.side == FLAT


def _walk_forward_one_by_one(rule, returns, filled):
    """The rule applied window by window with :meth:`SelectionRule.pick`, as the live planner applies it."""
    picked, out, fills = [], [], []
    for k in range(len(next(iter(returns.values())))):
        start = 0 if rule.lookback is None else max(0, k - rule.lookback)
        name = rule.pick({n: r[start:k] for n, r in returns.items()}, {n: f[start:k] for n, f in filled.items()})
        picked.append(name)
        out.append(0.0 if name is None else returns[name][k])
        fills.append(False if name is None else bool(filled[name][k]))
    return picked, out, fills


@pytest.mark.parametrize("lookback", [None, 1, 3, 7])
def test_walk_forward_equals_picking_window_by_window(lookback):
    """Random returns with many exact ties: copies, shuffled copies, never- and rarely-filled series, and
    series of growth factors 1/2, 1, 2, 4, whose products tie exactly with different Sharpe ratios."""
    rng = np.random.default_rng(lookback or 0)
    for trial in range(20):
        n = int(rng.integers(1, 40))
        base = np.round(rng.normal(0, 0.01, n), 3)
        returns = {"a": base, "b": base.copy(), "c": np.round(rng.normal(0, 0.01, n), 3),
                   "d": np.where(rng.random(n) < 0.2, base, 0.0), "e": rng.permutation(base), "idle": np.zeros(n),
                   "p": rng.choice([-0.5, 0.0, 1.0, 3.0], n), "q": rng.choice([-0.5, 0.0, 1.0, 3.0], n)}
        filled = {k: v != 0 for k, v in returns.items()}
        filled["b"] = rng.random(n) < 0.8
        rule = SelectionRule(lookback, min(2, lookback or 2))  # eligibility by a count, not just "traded"
        got = rule.walk_forward(returns, filled)
        picked, out, fills = _walk_forward_one_by_one(rule, returns, filled)
        assert got["picked"] == picked, trial
        assert list(got["returns"]) == out and list(got["filled"]) == fills
