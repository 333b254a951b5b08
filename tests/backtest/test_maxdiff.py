"""MaxDiff: the vectorised grid equals ``settle``; offsets come from earlier windows only."""

import numpy as np
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_backtest
from marketcast.backtest.fills import settle
from marketcast.backtest.maxdiff import (
    GRID_ENTRY,
    GRID_EXIT,
    OFFSETS,
    MaxDiffState,
    maxdiff_prices,
    maxdiff_side,
    settle_grid,
)
from marketcast.backtest.orders import Bar, Costs, Decision

from .helpers import MomentumForecaster, random_bars


def test_grid_is_documented_size_and_contains_zero():
    assert len(OFFSETS) == 21 and OFFSETS[0] == -0.01 and OFFSETS[-1] == 0.01 and 0.0 in OFFSETS
    assert len(GRID_ENTRY) == 441


@pytest.mark.parametrize("fill_mode", ["touch", "penetrate"])
@pytest.mark.parametrize("same_bar", ["pessimistic", "nearest"])
def test_vectorised_grid_equals_settle_exactly(fill_mode, same_bar):
    rng = np.random.default_rng(7)
    costs = Costs(0.0005, 0.0004)
    for _ in range(30):
        o = 100 * np.exp(rng.normal(0, 0.01))
        c = 100 * np.exp(rng.normal(0, 0.01))
        bar = Bar(o, max(o, c) * (1 + abs(rng.normal(0, 0.005))), min(o, c) * (1 - abs(rng.normal(0, 0.005))), c)
        high, low = 100 * (1 + abs(rng.normal(0, 0.008))), 100 * (1 - abs(rng.normal(0, 0.008)))
        for side in (1, -1):
            entry, tp = maxdiff_prices(side, high, low, GRID_ENTRY, GRID_EXIT)
            fast = settle_grid(side, entry, tp, bar, costs, fill_mode, same_bar)
            slow = [settle(Decision(side, float(e), float(t)), bar, costs, fill_mode, same_bar).net_return
                    for e, t in zip(entry, tp)]
            assert np.array_equal(fast, np.array(slow))


def test_no_history_means_zero_offsets_and_ties_prefer_zero():
    state = MaxDiffState.initial()
    assert state.offsets(1) == (0.0, 0.0)
    flat = state.add(np.zeros(441))  # every pair scored the same
    assert flat.offsets(1) == (0.0, 0.0)
    scores = np.zeros(441)
    scores[(GRID_ENTRY == 0.004) & (GRID_EXIT == 0.0)] = 0.01
    scores[(GRID_ENTRY == -0.004) & (GRID_EXIT == 0.0)] = 0.01  # tie: equal |e|+|x|, smaller e wins
    assert MaxDiffState(scores, 5).offsets(5) == (-0.004, 0.0)
    assert MaxDiffState(scores, 4).offsets(5) == (0.0, 0.0)


def test_offsets_are_the_best_pair_over_strictly_earlier_windows():
    """Recompute each window's offsets by brute force with ``settle`` over windows 0..k-1 only."""
    bars = random_bars(120, seed=3)
    config = BacktestConfig(windows=14, context=20, num_samples=64, maxdiff_min_history=3,
                            strategies=("maxdiff",))
    result = run_backtest(bars, MomentumForecaster(), config)
    run = result.strategies["maxdiff"]
    costs = config.costs("stock")
    frame = bars.frame
    pos = {ts: i for i, ts in enumerate(frame.index)}
    learned = 0
    for k, view in enumerate(result.views):
        if k < 3:
            assert run.offsets[k] == (0.0, 0.0)
            continue
        totals = np.zeros(441)
        for j in range(k):  # strictly earlier windows
            v = result.views[j]
            t = pos[result.decision_times[j]]
            bar = Bar(*frame.iloc[t + 1][["open", "high", "low", "close"]].to_numpy())
            side = maxdiff_side(v.high_ret, v.low_ret, True)
            for g, (e, x) in enumerate(zip(GRID_ENTRY, GRID_EXIT)):
                entry, tp = maxdiff_prices(side, v.price(v.high_ret), v.price(v.low_ret), e, x)
                totals[g] += settle(Decision(side, entry, tp), bar, costs).net_return
        best = np.flatnonzero(np.isclose(totals, totals.max(), rtol=0, atol=1e-12))
        candidates = {(float(GRID_ENTRY[i]), float(GRID_EXIT[i])) for i in best}
        assert run.offsets[k] in candidates
        e, x = run.offsets[k]
        learned += (e, x) != (0.0, 0.0)
        d = run.decisions[k]
        entry, tp = maxdiff_prices(d.side, view.price(view.high_ret), view.price(view.low_ret), e, x)
        assert (d.entry_limit, d.take_profit) == (pytest.approx(entry), pytest.approx(tp))
    assert learned > 0  # the test exercised non-zero offsets
