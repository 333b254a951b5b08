"""The vectorised engine equals the one-window ``step`` (the live planner's path) window by window: every
strategy's decision, fill, MaxDiff offsets and carried state, in both fill modes and both same-bar modes, for a
stock and a long-only crypto, on the embedded SP500/NASDAQ bars and on synthetic ones."""

from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest

from marketcast.backtest.config import STRATEGY_NAMES, BacktestConfig
from marketcast.backtest.engine import decision_ends, forecast_windows, simulate
from marketcast.backtest.fills import settle, settle_all
from marketcast.backtest.maxdiff import MaxDiffState, grid_scale
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.backtest.strategies import StrategyParams, decide, initial_state, step
from marketcast.data import load_symbol
from marketcast.forecast.baseline import BaselineForecaster

from .helpers import MomentumForecaster, random_bars

# the one-window step (the live planner's) settles on bar t+1's close: the engine under --exit close
CONFIG = BacktestConfig(windows=250, context=96, num_samples=64, maxdiff_min_history=5, exit="close")
DATA = {  # (bars, forecaster): real index bars with the baseline, a synthetic walk with a per-window forecaster
    "embedded": (lambda cls: load_symbol("SP500" if cls == "stock" else "NASDAQ", asset_class=cls), BaselineForecaster),
    "synthetic": (lambda cls: random_bars(400, seed=8, asset_class=cls), MomentumForecaster),
}


@lru_cache(maxsize=None)
def _forecast(data: str, asset_class: str):
    load, forecaster = DATA[data]
    bars = load(asset_class)
    ends = decision_ends(len(bars), CONFIG)
    (fc,) = forecast_windows(forecaster(), [(bars, ends)], CONFIG)
    return bars, ends, fc


def _same_state(a, b) -> bool:
    if isinstance(a, MaxDiffState):
        return a.count == b.count and np.array_equal(a.scores, b.scores)
    return a == b


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("asset_class", ["stock", "crypto"])
@pytest.mark.parametrize("fill_mode", ["touch", "penetrate"])
@pytest.mark.parametrize("same_bar", ["pessimistic", "nearest"])
@pytest.mark.parametrize("grid", ["atr", "percent"])
def test_every_window_equals_the_one_window_step(data, asset_class, fill_mode, same_bar, grid):
    bars, ends, fc = _forecast(data, asset_class)
    config = replace(CONFIG, fill_mode=fill_mode, same_bar=same_bar, maxdiff_grid=grid)
    result = simulate(bars, fc, ends, config)
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)  # the engine's costs
    frame = bars.frame
    rows = frame.index.get_indexer(result.settle_times)
    next_bars = [Bar(*map(float, frame.iloc[t][["open", "high", "low", "close"]])) for t in rows]
    assert set(result.strategies) == set(STRATEGY_NAMES)
    for name, run in result.strategies.items():
        state = initial_state(name)
        for k, (view, bar) in enumerate(zip(result.views, next_bars)):
            if name == "maxdiff":
                assert run.offsets[k] == state.offsets(params.maxdiff_min_history, params.maxdiff_grid,
                                                       grid_scale(view, params.maxdiff_grid)), (name, k)
            d, s, state = step(name, view, state, bar, params)
            assert run.decisions[k] == d, (name, k)
            assert run.settlements[k] == s, (name, k)
            assert run.returns[k] == s.net_return
        assert _same_state(run.final_state, state), name
        assert run.next_decision == decide(name, result.latest_view, state, params), name
    traded = {n: int(r.filled.sum()) for n, r in result.strategies.items()}
    assert traded["maxdiff"] > 0 and traded["entry_takeprofit"] > 0  # the limit and take-profit paths ran
    if asset_class == "crypto":
        assert all((r.decisions.side >= 0).all() for r in result.strategies.values())


def test_settle_all_equals_settle_on_every_kind_of_order():
    """Market and limit entries, take profits above, below and at the entry, prices exactly at the bar's
    extremes, gaps, flat, over random bars."""
    rng = np.random.default_rng(4)
    n = 4000
    o = 100 * np.exp(rng.normal(0, 0.01, n))
    c = 100 * np.exp(rng.normal(0, 0.01, n))
    h = np.maximum(o, c) * np.exp(np.abs(rng.normal(0, 0.006, n)))
    lo = np.minimum(o, c) * np.exp(-np.abs(rng.normal(0, 0.006, n)))
    side = rng.choice([-1, 0, 1], n)
    entry = np.where(rng.random(n) < 0.3, np.nan, 100 * np.exp(rng.normal(0, 0.012, n)))
    tp = np.where(rng.random(n) < 0.3, np.nan, 100 * np.exp(rng.normal(0, 0.012, n)))
    tp[::17] = entry[::17]  # a take profit at the entry price
    entry[::23] = o[::23]  # limits exactly at the open, the low and the high (touch fills, penetrate does not)
    entry[::19], entry[::29] = lo[::19], h[::29]
    tp[::13], tp[::11] = h[::13], lo[::11]
    costs = Costs(0.0005, 0.0004)
    for fill_mode in ("touch", "penetrate"):
        for same_bar in ("pessimistic", "nearest"):
            fills = settle_all(side, entry, tp, o, h, lo, c, costs, fill_mode, same_bar)
            reasons = set()
            for k in range(n):
                d = Decision(int(side[k]), None if np.isnan(entry[k]) else float(entry[k]),
                             None if np.isnan(tp[k]) else float(tp[k]))
                expected = settle(d, Bar(o[k], h[k], lo[k], c[k]), costs, fill_mode, same_bar)
                assert fills[k] == expected, (fill_mode, same_bar, k)
                reasons.add(expected.exit_reason)
            assert reasons == {None, "close", "take_profit"}


@pytest.mark.parametrize("exit_rule", ["close", "next-open"])
def test_a_walk_without_state_decides_and_settles_as_the_walk_with_it(exit_rule):
    """The Monte Carlo batches walk without the final state (never read there): every strategy's orders,
    fills and MaxDiff's offsets are the full walk's, bit for bit; MaxDiff's state alone is left out."""
    from marketcast.backtest.engine import Exits
    from marketcast.backtest.vectorised import walk
    from marketcast.backtest.views import ForecastReturns, atr_fraction

    bars, ends, fc = _forecast("embedded", "stock")
    config = replace(CONFIG, exit=exit_rule)
    frame = bars.frame
    o, h, lo, c = (frame[col].to_numpy(dtype=np.float64) for col in ("open", "high", "low", "close"))
    settled = ends[:-1] if config.include_latest else ends
    views = ForecastReturns.from_forecast(fc, c[ends]).views(frame.index[ends], config.point, config.ci_band,
                                                            atr_fraction(h, lo, c, ends))[:len(settled)]
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
    bar = Bar(o[settled + 1], h[settled + 1], lo[settled + 1], c[settled + 1])
    exit_open = Exits.of(exit_rule, frame.index, bars.asset_class, o, settled).exit_open
    for name in STRATEGY_NAMES:
        full, bare = walk(name, views, bar, params, exit_open), walk(name, views, bar, params, exit_open, state=False)
        for field in ("side", "entry_limit", "take_profit"):
            assert np.array_equal(getattr(full.orders, field), getattr(bare.orders, field), equal_nan=True), name
        for field in ("filled", "entry_price", "exit_price", "reason", "gross", "fees"):
            assert np.array_equal(getattr(full.fills, field), getattr(bare.fills, field), equal_nan=True), name
        assert (full.offsets is None) == (bare.offsets is None), name
        if name == "maxdiff":
            assert np.array_equal(full.offsets, bare.offsets) and full.offsets.any()
            assert isinstance(full.final_state, MaxDiffState) and bare.final_state is None
            assert len(full.final_state.pending) == (exit_rule == "next-open")
        else:
            assert _same_state(full.final_state, bare.final_state), name


@pytest.mark.parametrize("fill_mode", ["touch", "penetrate"])
@pytest.mark.parametrize("same_bar", ["pessimistic", "nearest"])
def test_settle_all_on_a_grid_equals_it_on_arrays_broadcast_first(fill_mode, same_bar):
    """MaxDiff's grid settles each window's bar ``[N, 1]`` against ``[N, K]`` prices, a side given once: every
    field equals the settlement of the same orders with every argument broadcast to ``[N, K]`` first, and has
    that shape."""
    rng = np.random.default_rng(3)
    n, k = 40, 25
    o = 100 + rng.standard_normal((n, 1))
    h, lo = o + np.abs(rng.standard_normal((n, 1))), o - np.abs(rng.standard_normal((n, 1)))
    c = lo + (h - lo) * rng.random((n, 1))
    exit_open = np.where(rng.random((n, 1)) < 0.5, 100 + rng.standard_normal((n, 1)), np.nan)
    costs = Costs(fee=0.0005, spread=0.0002, borrow_rate=0.03)
    for side in (1, -1):
        low, high = (lo, h) if side == 1 else (h, lo)
        entry = low * (1 + 0.01 * rng.standard_normal(k))
        entry[::7] = np.nan  # market entries at the open
        tp = high * (1 + 0.01 * rng.standard_normal(k))
        tp[:, ::5] = np.nan  # no take profit
        grid = settle_all(side, entry, tp, o, h, lo, c, costs, fill_mode, same_bar, exit_open)
        wide = settle_all(*np.broadcast_arrays(np.full((n, k), side), entry, tp, o, h, lo, c), costs, fill_mode,
                          same_bar, np.broadcast_to(exit_open, (n, k)))
        for field in ("filled", "entry_price", "exit_price", "reason", "gross", "fees"):
            a, b = getattr(grid, field), getattr(wide, field)
            assert a.shape == (n, k) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (side, field)
        assert grid.filled.flags.writeable and 0 < grid.filled.sum() < n * k
        assert set(np.unique(grid.reason)) >= {1, 2}  # fills that took profit and fills that did not
