"""Perturb the future: replacing every bar after t with garbage never changes what was decided at t, under
both exit rules (``--exit close``; ``next-open``, the default, whose settlement reads bar t+2 and whose
walk-forward pick lags a window). ``--hold`` joins these parametrizations once the backtest has it (issue 53
item 3)."""

import zlib

import numpy as np
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_backtest, run_many
from marketcast.backtest.execution import EXIT_RULES
from marketcast.data.bars import Bars
from marketcast.forecast.baseline import BaselineForecaster

from .helpers import MomentumForecaster, QuantileForecaster, TableForecaster, random_bars, trending_bars

CONFIG = BacktestConfig(windows=60, context=64, num_samples=64, maxdiff_min_history=5)  # the default exit rule


def garbage_after(bars: Bars, t: int, seed: int) -> Bars:
    """Same bars up to row t; after it a different, still valid, random walk at another price level."""
    rng = np.random.default_rng(seed)
    frame = bars.frame.copy()
    n = len(frame) - t - 1
    close = frame["close"].iloc[t] * rng.uniform(0.3, 3.0) * np.exp(np.cumsum(rng.normal(0, 0.05, n)))
    open_ = close * np.exp(rng.normal(0, 0.03, n))
    frame.iloc[t + 1:, frame.columns.get_loc("open")] = open_
    frame.iloc[t + 1:, frame.columns.get_loc("close")] = close
    frame.iloc[t + 1:, frame.columns.get_loc("high")] = np.maximum(open_, close) * np.exp(rng.uniform(0, 0.05, n))
    frame.iloc[t + 1:, frame.columns.get_loc("low")] = np.minimum(open_, close) * np.exp(-rng.uniform(0, 0.05, n))
    return Bars(bars.symbol, frame, bars.asset_class, "garbage")


def _same_up_to(a, b, t_stamp):
    """Everything decided at or before ``t_stamp`` is equal in both runs (views, decisions, offsets, the
    walk-forward pick and which windows its record skips), and so is every settlement whose bars all lie at or
    before it: bar t+1 (``--exit close``), or bars t+1 and t+2 (``next-open``: window k settles on bar t_k + 2's
    open; the walk-forward record under either rule). Returns the windows checked."""
    checked = 0
    assert a.annualisation == b.annualisation  # bar spacing and calendar: prices after t cannot change them
    reads = 2 if a.config.exit == "next-open" else 1  # bars after its decision bar a window's settlement reads
    at = list(a.decision_times).index(t_stamp) if t_stamp in a.decision_times else len(a.decision_times)
    for k, ts in enumerate(a.decision_times):
        if ts > t_stamp:
            break
        assert a.views[k] == b.views[k], f"forecast at {ts} changed"
        if ts < t_stamp:  # buy and hold's return over a bar <= t
            assert a.benchmark.returns[k] == b.benchmark.returns[k], f"benchmark at {ts} changed"
            assert a.benchmark.intraday[k] == b.benchmark.intraday[k], f"intraday benchmark at {ts} changed"
        assert a.walk_forward["picked"][k] == b.walk_forward["picked"][k], f"walk-forward pick at {ts} changed"
        if "refused" in a.walk_forward:  # skipped while the previous pick's exit waits: known at the decision
            assert a.walk_forward["refused"][k] == b.walk_forward["refused"][k], f"refusal at {ts} changed"
            if k + 2 <= at:  # the record's exit reads bar t+2's open at most (24/7 bars under close too)
                assert a.walk_forward["returns"][k] == b.walk_forward["returns"][k], f"record at {ts} changed"
        for name in a.strategies:
            ra, rb = a.strategies[name], b.strategies[name]
            assert ra.decisions[k] == rb.decisions[k], f"{name} at {ts} changed"
            assert ra.offsets[k] == rb.offsets[k], f"{name} offsets at {ts} changed"
            if k + reads <= at:  # settled on bars <= t: the outcome is fixed as well
                assert ra.settlements[k] == rb.settlements[k], f"{name} settlement at {ts} changed"
        checked += 1
    return checked


class PositivePrices:
    """Random-weight Toto can sample negative prices, which the engine rightly rejects: map each window's
    paths through a monotone positive transform of their return to that window's last close (per window,
    from the window alone, so it cannot hide a leak)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.fields = inner, inner.name, inner.fields

    def forecast(self, batch, horizon, num_samples, seed=0):
        out = self.inner.forecast(batch, horizon, num_samples, seed)
        last = batch.last_close()[:, None, None, None]
        out.samples = last * np.exp(0.05 * np.tanh(out.samples / last - 1.0))
        return out


def tiny_toto():
    from marketcast.forecast.toto import TotoConfig, TotoForecaster
    from marketcast.forecast.toto.model import TotoModel, init_weights

    return PositivePrices(TotoForecaster(init_weights(TotoModel(TotoConfig.tiny()), seed=3), compile="eager"))


def tiny_kronos():
    from marketcast.forecast.kronos import Kronos, KronosForecaster, KronosTokenizer, from_config
    from tests.kronos.conftest import TINY_MODEL, TINY_TOKENIZER

    return KronosForecaster(from_config(Kronos, TINY_MODEL, seed=1), from_config(KronosTokenizer, TINY_TOKENIZER,
                                                                                  seed=2))


def tiny_toto2():
    from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster

    return Toto2Forecaster.from_config(Toto2Config.size("4m"), seed=1)


FORECASTERS = {
    "baseline": BaselineForecaster,
    "momentum": MomentumForecaster,
    "table": lambda: TableForecaster({}, spread=0.01, default=(0.001, 0.004, -0.006)),
    "quantiles": QuantileForecaster,  # views, skill and calibration read its knots (test_quantile_views.py)
    "toto": tiny_toto,  # the real models (tiny configs, random weights): their batching must not leak either
    "kronos": tiny_kronos,
    "toto2": tiny_toto2,  # quantiles of its own, 4m config
}


@pytest.mark.parametrize("exit_rule", EXIT_RULES)
@pytest.mark.parametrize("forecaster", sorted(FORECASTERS))
@pytest.mark.parametrize("asset_class", ["stock", "crypto"])
def test_decisions_at_t_ignore_every_later_bar(forecaster, asset_class, exit_rule):
    from dataclasses import replace

    config = replace(CONFIG, exit=exit_rule)
    bars = random_bars(200, seed=11, asset_class=asset_class)
    n = len(bars)
    rng = np.random.default_rng(zlib.crc32(f"{forecaster}-{asset_class}".encode()))
    base = run_backtest(bars, FORECASTERS[forecaster](), config)
    for t in rng.integers(n - 61, n - 1, size=4):  # decision bars inside the 60 windows
        other = run_backtest(garbage_after(bars, int(t), seed=int(t)), FORECASTERS[forecaster](), config)
        t_stamp = bars.frame.index[t]
        assert _same_up_to(base, other, t_stamp) == t - (n - 61) + 1
        # and the garbage did change something later, so the test can tell
        k = list(base.decision_times).index(t_stamp)
        if k + 1 < base.windows:
            assert base.views[k + 1] != other.views[k + 1]
        if exit_rule == "next-open" and k >= 1:  # window k - 1 exits at bar t + 1's open, which the garbage moved
            traded = [r.settlements[k - 1].exit_reason == "next_open" for r in base.strategies.values()]
            moved = [base.strategies[s].settlements[k - 1] != other.strategies[s].settlements[k - 1]
                     for s in base.strategies]
            assert any(moved) or not any(traded)


@pytest.mark.parametrize("exit_rule", ["close", "next-open"])
@pytest.mark.parametrize("forecaster", ["baseline", "momentum", "table", "quantiles"])
@pytest.mark.parametrize("asset_class", ["stock", "crypto"])
def test_holding_at_t_ignores_every_later_bar(forecaster, asset_class, exit_rule):
    """``--hold``: what the held pick earned in every window settled by bar t (each window's return reads its bar
    t+1 only), whether a position was open or entered in it, and every held trade that left by t are fixed at t."""
    from dataclasses import replace

    config = replace(CONFIG, exit=exit_rule, hold=True)
    bars = random_bars(200, seed=11, asset_class=asset_class)
    n = len(bars)
    base = run_backtest(bars, FORECASTERS[forecaster](), config)
    assert len(base.held.trades) >= 3 and (base.held.trades.exit_window > base.held.trades.entry_window).any()
    rng = np.random.default_rng(zlib.crc32(f"hold-{forecaster}-{asset_class}-{exit_rule}".encode()))
    for t in rng.integers(n - 61, n - 1, size=4):
        other = run_backtest(garbage_after(bars, int(t), seed=int(t)), FORECASTERS[forecaster](), config)
        t_stamp = bars.frame.index[t]
        assert _same_up_to(base, other, t_stamp) == t - (n - 61) + 1
        at = list(base.decision_times).index(t_stamp)  # windows before it settled on bars <= t
        a, b = base.held, other.held
        assert np.array_equal(a.returns[:at], b.returns[:at]) and np.array_equal(a.filled[:at], b.filled[:at])
        assert np.array_equal(a.entered[:at], b.entered[:at])
        done = a.trades.exit_window < at
        for name in ("side", "entry_window", "exit_window", "entry_price", "exit_price", "reason"):
            np.testing.assert_array_equal(getattr(a.trades, name)[done], getattr(b.trades, name)[:done.sum()])
        assert np.array_equal(base.walk_forward["returns"][:at], other.walk_forward["returns"][:at])


@pytest.mark.parametrize("exit_rule", EXIT_RULES)
def test_only_the_latest_decision_sees_the_last_bar(exit_rule):
    """Changing the last bar changes the live loop's next decision view, and no scored decision (under
    next-open the last window, marked at bar t+1's close, reads nothing after it either)."""
    from dataclasses import replace

    config = replace(CONFIG, exit=exit_rule)
    bars = random_bars(200, seed=5)
    base = run_backtest(bars, BaselineForecaster(), config)
    moved = garbage_after(bars, len(bars) - 2, seed=1)
    other = run_backtest(moved, BaselineForecaster(), config)
    assert base.latest_view != other.latest_view
    assert _same_up_to(base, other, bars.frame.index[-2]) == CONFIG.windows


def test_batched_and_one_window_at_a_time_agree_for_a_per_window_forecaster():
    bars = [random_bars(150, seed=s, symbol=f"S{s}") for s in (1, 2)]
    a = run_many(bars, MomentumForecaster(), CONFIG)
    b = run_many(bars, MomentumForecaster(), CONFIG, batched=False)
    for ra, rb in zip(a, b):
        assert ra.views == rb.views and ra.latest_view == rb.latest_view
        for name in ra.strategies:
            assert np.array_equal(ra.strategies[name].returns, rb.strategies[name].returns)


def test_the_fair_naive_of_high_and_low_ignores_later_bars():
    from marketcast.backtest.skill import excursion_naive

    bars = random_bars(120, seed=7)
    t = 80
    other = garbage_after(bars, t, seed=3)
    ends = np.arange(20, t + 1)
    got = [excursion_naive(*(x.frame[c].to_numpy() for c in ("high", "low", "close")), ends, 16) for x in (bars, other)]
    for name in ("high", "low"):
        np.testing.assert_array_equal(got[0][name], got[1][name])


NEW_OPTIONS = {  # calibration learns from settled windows only, sizes from the window's own samples
    "conformal": dict(calibrate="conformal", calibration_min_windows=20),
    "quantile+cvar": dict(calibrate="quantile", calibration_min_windows=20, sizing="cvar", risk_per_trade=0.002),
    # the default exit, next-open: window k - 1 exits at the open after window k's decision, so its outcome may
    # not reach k's measured skill or the calibration k learns from
    "kelly": dict(sizing="kelly", kelly_cap=1.0),
    # and the close rule, where window k - 1 has settled before window k decides
    "kelly+close": dict(sizing="kelly", kelly_cap=1.0, exit="close"),
    "conformal+close": dict(calibrate="conformal", calibration_min_windows=20, exit="close"),
    "kelly-fraction": dict(sizing="kelly", kelly_fraction=0.05, kelly_cap=0.8),
    "cvar": dict(sizing="cvar", risk_per_trade=0.002),
    "conformal+kelly": dict(calibrate="conformal", calibration_min_windows=20, sizing="kelly"),
    "min_context": dict(min_context=40),  # --min-context: which windows are scored, never what they read
}


@pytest.mark.parametrize("options", sorted(NEW_OPTIONS))
@pytest.mark.parametrize("forecaster", ["baseline", "momentum", "table", "quantiles"])
def test_calibration_and_sizing_at_t_ignore_every_later_bar(forecaster, options):
    from dataclasses import replace

    config = replace(CONFIG, **NEW_OPTIONS[options])
    # sized: bars with momentum in them, so that a strategy measures skill and its sizes vary (a leak could show)
    bars = (random_bars if config.sizing == "fixed" else trending_bars)(200, seed=13)
    n = len(bars)
    base = run_backtest(bars, FORECASTERS[forecaster](), config)
    rng = np.random.default_rng(zlib.crc32(f"{forecaster}-{options}".encode()))
    if config.sizing != "fixed":  # the sizes vary from trade to trade, so a leak into them could show
        assert any(np.unique(r.sizes[r.decisions.side != 0]).size > 1 for r in base.strategies.values())
    for t in (*rng.integers(n - 61, n - 1, size=3), n - 40):  # n - 40: a window past the calibration warm-up
        other = run_backtest(garbage_after(bars, int(t), seed=int(t)), FORECASTERS[forecaster](), config)
        t_stamp = bars.frame.index[t]
        assert _same_up_to(base, other, t_stamp) == t - (n - 61) + 1  # views, decisions, sized settlements
        k = list(base.decision_times).index(t_stamp)
        if config.calibrate != "none":
            assert np.array_equal(base.calibrated[:k + 1], other.calibrated[:k + 1]) and base.calibrated[k:].any()
            for name in ("close", "high", "low"):
                np.testing.assert_array_equal(base.sample_returns[name][:k + 1], other.sample_returns[name][:k + 1])
                if base.quantile_returns is not None:  # the recalibrated knots learn from settled windows only
                    np.testing.assert_array_equal(base.quantile_returns[name][:k + 1],
                                                  other.quantile_returns[name][:k + 1])
        for name in base.strategies:  # the size decided at t (filled or not) is fixed at t
            np.testing.assert_array_equal(base.strategies[name].sizes[:k + 1], other.strategies[name].sizes[:k + 1])
        if k + 1 < base.windows:
            assert base.views[k + 1] != other.views[k + 1]


@pytest.mark.parametrize("exit_rule", EXIT_RULES)
@pytest.mark.parametrize("forecaster", ["baseline", "momentum", "quantiles"])
def test_min_context_with_windows_all_at_t_ignores_every_later_bar(forecaster, exit_rule):
    """``--windows all --min-context 40`` through the one preparation path: the first window is row 39 (40 real
    bars of a 64-bar context), and the garbage after t changes nothing decided at or before t."""
    from dataclasses import replace

    from marketcast.backtest.period import ALL, Period
    from marketcast.backtest.prepare import prepare

    config = replace(CONFIG, min_context=40, exit=exit_rule)

    def run(bars):
        model_minimum = getattr(FORECASTERS[forecaster], "min_context", 2)
        prepared = prepare([bars], Period(ALL), config, min_context=model_minimum)
        return run_many(prepared.bars, FORECASTERS[forecaster](), prepared.configs[0])[0]

    bars = random_bars(200, seed=17)
    base = run(bars)
    assert base.windows == 200 - 40 and base.decision_times[0] == bars.frame.index[39]
    assert list(base.context_seen[[0, 23, 24, -1]]) == [40, 63, 64, 64]  # row t reads min(64, t + 1) bars
    for t in (39, 50, 120, 198):
        other = run(garbage_after(bars, t, seed=t))
        assert _same_up_to(base, other, bars.frame.index[t]) == t - 39 + 1
        np.testing.assert_array_equal(base.context_seen, other.context_seen)


class BatchOf:
    """Batch ``b`` of 8 of another forecaster's samples (samples b, b + 8, ...): what the Monte Carlo error
    (:mod:`marketcast.backtest.montecarlo`) decides and settles each batch on; a run on it gives that batch's
    figures bit for bit (tests/backtest/test_montecarlo.py), so its decisions at t are the batch's."""

    def __init__(self, inner, b: int) -> None:
        self.inner, self.b, self.name, self.fields = inner, b, inner.name, inner.fields

    def forecast(self, batch, horizon, num_samples, seed=0):
        from marketcast.forecast.base import Forecast

        full = self.inner.forecast(batch, horizon, num_samples * 8, seed)
        return Forecast(full.samples[:, :, self.b::8], full.fields, dict(full.meta))


@pytest.mark.parametrize("exit_rule", EXIT_RULES)
@pytest.mark.parametrize("case", ["seed+1", "seed+3", "batch 0", "batch 5", "batch 5+cvar"])
def test_seeds_and_monte_carlo_batches_at_t_ignore_every_later_bar(case, exit_rule):
    """``--seeds N`` re-runs with seeds seed + 1 .. seed + N - 1; the Monte Carlo error decides on each batch of
    the samples: neither may read a bar after t."""
    from dataclasses import replace

    if case.startswith("seed"):
        config, forecaster = replace(CONFIG, seed=CONFIG.seed + int(case[-1]), exit=exit_rule), BaselineForecaster
    else:
        b = int(case.split()[1][0])
        config = replace(CONFIG, num_samples=CONFIG.num_samples // 8, exit=exit_rule,
                         **({"sizing": "cvar", "risk_per_trade": 0.002} if case.endswith("cvar") else {}))
        forecaster = lambda: BatchOf(BaselineForecaster(), b)  # noqa: E731
    bars = random_bars(200, seed=17)
    n = len(bars)
    base = run_backtest(bars, forecaster(), config)
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    for t in rng.integers(n - 61, n - 1, size=3):
        other = run_backtest(garbage_after(bars, int(t), seed=int(t)), forecaster(), config)
        assert _same_up_to(base, other, bars.frame.index[t]) == t - (n - 61) + 1
        k = list(base.decision_times).index(bars.frame.index[t])
        if k + 1 < base.windows:  # the garbage did change something later, so the test can tell
            assert base.views[k + 1] != other.views[k + 1]
