"""MaxDiff: the vectorised grid equals ``settle``; offsets come from earlier windows only."""

from dataclasses import replace

import numpy as np
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_backtest
from marketcast.backtest.fills import settle
from marketcast.backtest.maxdiff import (
    GRID_ENTRY,
    GRID_EXIT,
    MULTIPLES,
    OFFSETS,
    MaxDiffState,
    grid_pairs,
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
    assert MaxDiffState(scores, 5).offsets(5, "percent") == (-0.004, 0.0)
    assert MaxDiffState(scores, 4).offsets(5, "percent") == (0.0, 0.0)
    # the same pair of the "atr" grid: -0.4 ATR, times the window's ATR%
    assert MaxDiffState(scores, 5).multiples(5, "atr") == (-0.4, 0.0)
    assert MaxDiffState(scores, 5).offsets(5, "atr", 0.02) == (-0.4 * 0.02, 0.0)


@pytest.mark.parametrize("exit_rule", ["close", "next-open"])
@pytest.mark.parametrize("grid", ["atr", "percent"])
def test_offsets_are_the_best_pair_over_the_windows_settled_by_the_decision(grid, exit_rule):
    """Recompute each window's offsets by brute force with ``settle`` over the windows settled by its decision
    bar only, each window's grid at its own scale (its ATR% for "atr") and exiting where the run's rule exits:
    under ``close`` windows 0..k-1 at bar t+1's close; under ``next-open`` windows 0..k-2 (window k-1 exits at
    bar t_k + 1's open, after window k decided) at bar t+2's open."""
    bars = random_bars(120, seed=3)
    config = BacktestConfig(windows=14, context=20, num_samples=64, maxdiff_min_history=3,
                            strategies=("maxdiff",), maxdiff_grid=grid, exit=exit_rule)
    lag = 1 if exit_rule == "next-open" else 0
    grid_e, grid_x = grid_pairs(grid)
    result = run_backtest(bars, MomentumForecaster(), config)
    run = result.strategies["maxdiff"]
    costs = config.costs("stock")
    frame = bars.frame
    pos = {ts: i for i, ts in enumerate(frame.index)}
    learned = 0
    for k, view in enumerate(result.views):
        if k < 3 + lag:
            assert run.offsets[k] == (0.0, 0.0)
            continue
        totals = np.zeros(441)
        for j in range(k - lag):  # the windows settled by window k's decision bar
            v = result.views[j]
            t = pos[result.decision_times[j]]
            assert t + 1 + lag <= pos[result.decision_times[k]]  # its exit bar is no later than k's decision bar
            bar = Bar(*frame.iloc[t + 1][["open", "high", "low", "close"]].to_numpy())
            exit_open = float(frame.iloc[t + 2]["open"]) if lag else None
            side = maxdiff_side(v.high_ret, v.low_ret, True)
            s = v.atr if grid == "atr" else 1.0
            for g, (e, x) in enumerate(zip(grid_e, grid_x)):
                entry, tp = maxdiff_prices(side, v.price(v.high_ret), v.price(v.low_ret), e * s, x * s)
                totals[g] += settle(Decision(side, entry, tp), bar, costs, exit_open=exit_open).net_return
        best = np.flatnonzero(np.isclose(totals, totals.max(), rtol=0, atol=1e-12))
        s = view.atr if grid == "atr" else 1.0
        candidates = {(float(grid_e[i] * s), float(grid_x[i] * s)) for i in best}
        assert run.offsets[k] in candidates
        e, x = run.offsets[k]
        learned += (e, x) != (0.0, 0.0)
        d = run.decisions[k]
        entry, tp = maxdiff_prices(d.side, view.price(view.high_ret), view.price(view.low_ret), e, x)
        assert (d.entry_limit, d.take_profit) == (pytest.approx(entry), pytest.approx(tp))
    assert learned > 0  # the test exercised non-zero offsets


# --- the "atr" grid: offsets are multiples of each window's ATR% ------------------------------------------------

def test_atr_fraction_of_a_hand_made_series():
    """True range = max(high, previous close) - min(low, previous close); the first bar's is high - low."""
    from marketcast.backtest.views import atr_fraction

    high = np.array([11.0, 12.0, 13.0, 11.0])
    low = np.array([9.0, 10.0, 11.5, 8.0])
    close = np.array([10.0, 11.0, 12.0, 10.0])
    # TR: 11 - 9 = 2; max(12, 10) - min(10, 10) = 2; max(13, 11) - min(11.5, 11) = 2; max(11, 12) - min(8, 12) = 4
    got = atr_fraction(high, low, close, np.array([0, 1, 2, 3]), period=3)
    np.testing.assert_allclose(got, [2 / 1 / 10, (2 + 2) / 2 / 11, (2 + 2 + 2) / 3 / 12, (2 + 2 + 4) / 3 / 10],
                               rtol=0, atol=1e-15)
    # the default 14 bars: all four here; a gap up counts from the previous close
    assert atr_fraction(high, low, close, np.array([3]))[0] == pytest.approx((2 + 2 + 2 + 4) / 4 / 10, abs=1e-15)
    assert atr_fraction([10.0, 14.0], [9.0, 13.0], [9.5, 13.5], np.array([1]))[0] == pytest.approx(
        ((10.0 - 9.0) + (14.0 - 9.5)) / 2 / 13.5, abs=1e-15)  # the gap bar's TR is 14 - 9.5, not 14 - 13


def test_atr_at_t_ignores_every_later_bar_and_the_start_of_the_series():
    from marketcast.backtest.views import atr_fraction

    bars = random_bars(80, seed=4)
    h, lo, c = (bars.frame[k].to_numpy() for k in ("high", "low", "close"))
    ends = np.arange(20, 60)
    base = atr_fraction(h, lo, c, ends)
    rng = np.random.default_rng(0)
    for t in (30, 45, 59):
        h2, lo2, c2 = h.copy(), lo.copy(), c.copy()
        c2[t + 1:] *= rng.uniform(0.2, 5.0, len(c) - t - 1)
        h2[t + 1:], lo2[t + 1:] = c2[t + 1:] * 1.3, c2[t + 1:] * 0.6
        got = atr_fraction(h2, lo2, c2, ends)
        assert np.array_equal(got[ends <= t], base[ends <= t])  # bitwise: window t's scale is unchanged
        assert not np.array_equal(got[ends > t], base[ends > t]) or t == 59
    # dropping bars more than 14 before the first window changes nothing; one window alone equals the batch
    assert np.array_equal(atr_fraction(h[5:], lo[5:], c[5:], ends - 5), base)
    assert all(atr_fraction(h, lo, c, np.array([t]))[0] == base[k] for k, t in enumerate(ends))


def _twin(scale: float, n: int = 40):
    """Bars closing at 100 every bar (close_t = 100 in every window), each ``scale`` times the same range, and a
    forecast of ``scale`` times the same high/low moves: a market and its volatility-scaled twin.

    A long entry at 100 (1 - s l)(1 + m s A) fills when it is >= the low 100 (1 - s d), i.e. when
    m >= (l - d) / ((1 - s l) A) = -0.35 / (1 - s l): -0.3504 for s = 1, -0.3536 for s = 10. Both learn
    m_e = -0.3 ATR, the lowest entry that fills (the exit, at the next open = the close here, is the same for every
    x)."""
    from .helpers import TableForecaster, make_bars

    up, low_fc, high_fc = 0.002, 0.001, 0.002
    down = (low_fc + 0.35 * up) / 0.65  # so that (l - d) / (u + d) = -0.35 (A = u + d: the close stays inside)
    ohlc = np.tile([100.0, 100 * (1 + scale * up), 100 * (1 - scale * down), 100.0], (n, 1))
    return make_bars(ohlc), TableForecaster({}, default=(0.0, scale * high_fc, -scale * low_fc))


def test_volatility_scaled_twin_learns_the_same_multiples_and_scaled_offsets():
    """EURUSD-like ranges (a few bp) and a x10 twin (BTC-like): with "atr" both learn the same multiples, so
    the offsets scale with the volatility; the fixed "percent" grid learns -0.1 % for one and hits its -1 %
    edge for the other."""
    runs = {}
    for grid in ("atr", "percent"):
        config = BacktestConfig(windows=30, context=16, num_samples=8, maxdiff_min_history=5,
                                strategies=("maxdiff",), fee=0.0, spread=0.0, slippage=0.0, include_latest=False,
                                maxdiff_grid=grid)
        for scale in (1.0, 10.0):
            runs[grid, scale] = run_backtest(*_twin(scale), config)
    small, big = runs["atr", 1.0], runs["atr", 10.0]
    atr = (0.002 + (0.001 + 0.35 * 0.002) / 0.65)  # (high - low) / close, every bar
    np.testing.assert_allclose(small.views.atr, atr, rtol=1e-12)
    np.testing.assert_allclose(big.views.atr, 10 * atr, rtol=1e-12)  # ATR% scales x10
    a, b = (np.array(r.strategies["maxdiff"].offsets) for r in (small, big))
    first = 5 + small.settle_delay  # 5 windows settled: window 6 under the default next-open exit (lag 1)
    assert first == 6 and np.array_equal(a[:first], np.zeros((first, 2)))
    assert np.array_equal(b[:first], np.zeros((first, 2)))
    np.testing.assert_allclose(a[first:], [[-0.3 * atr, 0.0]] * (30 - first), rtol=1e-12)  # the same multiples ...
    np.testing.assert_allclose(b[first:], [[-0.3 * 10 * atr, 0.0]] * (30 - first), rtol=1e-12)  # ... offsets x10
    np.testing.assert_allclose(b, 10 * a, rtol=1e-12)
    pct_small, pct_big = (np.array(runs["percent", s].strategies["maxdiff"].offsets) for s in (1.0, 10.0))
    assert {tuple(r) for r in pct_small[first:]} == {(-0.001, 0.0)}
    assert {tuple(r) for r in pct_big[first:]} == {(-0.01, 0.0)}


def test_percent_grid_equals_the_fixed_grid_of_the_first_version_exactly():
    """The "percent" grid is the old one: the offsets are OFFSETS pairs learned from unscaled prices, recomputed
    here as the first version did (prefix sum of settle_all over GRID_ENTRY/GRID_EXIT, first maximum in
    preference order), and every decision and return equals it bitwise, whatever the views' ATR."""
    from marketcast.backtest.fills import settle_all
    from marketcast.backtest.maxdiff import _PREFERENCE, maxdiff_sides

    bars = random_bars(200, seed=9)
    config = BacktestConfig(windows=120, context=32, num_samples=32, maxdiff_min_history=5, strategies=("maxdiff",),
                            maxdiff_grid="percent", include_latest=False, exit="close")  # the first version's exit
    result = run_backtest(bars, MomentumForecaster(), config)
    run = result.strategies["maxdiff"]
    v, costs = result.views, result.costs  # the run's costs, borrow per bar included
    rows = bars.frame.index.get_indexer(result.settle_times)
    nxt = [bars.frame[k].to_numpy()[rows] for k in ("open", "high", "low", "close")]
    side = maxdiff_sides(v.high_ret, v.low_ret, True)
    net = np.zeros((len(v), len(GRID_ENTRY)))
    for s in (1, -1):
        at = np.flatnonzero(side == s)
        entry, tp = maxdiff_prices(s, v.price(v.high_ret)[at, None], v.price(v.low_ret)[at, None], GRID_ENTRY,
                                   GRID_EXIT)
        net[at] = settle_all(s, entry, tp, *(x[at, None] for x in nxt), costs, "touch", "pessimistic").net
    scores = np.cumsum(np.vstack([np.zeros(len(GRID_ENTRY)), net]), axis=0)[:-1]
    pick = _PREFERENCE[np.argmax(scores[:, _PREFERENCE], axis=1)]
    old = np.where((np.arange(len(v)) >= 5)[:, None], np.column_stack([GRID_ENTRY[pick], GRID_EXIT[pick]]), 0.0)
    assert np.array_equal(np.array(run.offsets), old)
    assert np.any(old != 0)
    entry, tp = maxdiff_prices(side, v.price(v.high_ret), v.price(v.low_ret), old[:, 0], old[:, 1])
    assert np.array_equal(run.decisions.entry_limit, entry) and np.array_equal(run.decisions.take_profit, tp)
    assert np.array_equal(run.returns, settle_all(side, entry, tp, *nxt, costs, "touch", "pessimistic").net)


def test_the_learned_offset_follows_the_exit_rule_hand_computed():
    """One window to learn from, whose next open differs from its close, picks a different offset per rule.

    Window 0 (decision at bar 3, close 100) forecasts high +2 %, low -1 %: a long, buy limit 99 (1 + e), take
    profit 102 (1 + x) >= 100.98, above bar 4's high 100.5, so no take-profit fills and x never matters. Bar 4
    trades down to 98.5, so the entries with e >= -0.5 % (98.505 and up) fill; e <= -0.6 % (98.406 and down)
    do not (net 0).

    * ``close``: a fill exits at bar 4's close 98.5, below every fill price: each loses, so the best is not to
      fill; among the pairs scoring 0 the smallest |e| + |x| is (-0.6 %, 0). Window 1 (bar 4) learns it.
    * ``next-open``: a fill exits at bar 5's open 101, above every fill price: the lowest fill wins,
      101 / 98.505 - 1 = +2.53 %: (-0.5 %, 0). Window 1 decides at bar 4, before that exit: zero offsets.

    Window 1 (decision at bar 4, close 98.5, buy limit at most 97.515 * 1.01 = 98.49) never fills on bar 5
    (low 100): every pair scores 0, so window 2 learns from window 0 alone under either rule."""
    from .helpers import TableForecaster, make_bars

    flat = (100.0, 100.5, 99.5, 100.0)
    bars = make_bars([flat] * 4 + [(100.0, 100.5, 98.5, 98.5), (101.0, 101.5, 100.0, 100.5),
                                   (100.5, 101.0, 100.0, 100.5)])
    config = BacktestConfig(windows=3, context=3, num_samples=8, strategies=("maxdiff",), maxdiff_grid="percent",
                            maxdiff_min_history=1, fee=0.0, spread=0.0, slippage=0.0, include_latest=False,
                            bootstrap_reps=10, spa=False)
    runs = {rule: run_backtest(bars, TableForecaster({}, default=(0.0, 0.02, -0.01)),
                               replace(config, exit=rule)).strategies["maxdiff"] for rule in ("close", "next-open")}
    assert runs["close"].offsets == [(0.0, 0.0), (-0.006, 0.0), (-0.006, 0.0)]
    assert runs["next-open"].offsets == [(0.0, 0.0), (0.0, 0.0), (-0.005, 0.0)]
    # the fills exit where the learning scored them: window 0 (e = 0, limit 99) at 98.5 or at 101
    assert runs["close"].settlements[0].exit_price == 98.5
    assert runs["next-open"].settlements[0].exit_price == 101.0
    assert runs["next-open"].decisions[2].entry_limit == pytest.approx(100.5 * 0.99 * (1 - 0.005), abs=1e-12)


def test_a_state_learns_a_window_once_the_delay_has_passed():
    """``MaxDiffState.add(net, delay=1)``: each window's grid waits for the next one, then adds in order."""
    a, b = np.full(441, 0.01), np.where(GRID_ENTRY == 0.005, 0.02, -0.01)
    one = MaxDiffState.initial().add(a, delay=1)
    assert one.count == 0 and not one.scores.any() and len(one.pending) == 1
    two = one.add(b, delay=1)
    assert two.count == 1 and np.array_equal(two.scores, a) and np.array_equal(two.pending[0], b)
    assert np.array_equal(two.add(a, delay=1).scores, MaxDiffState.initial().add(a).add(b).scores)
