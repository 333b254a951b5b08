"""--calibrate and --sizing in the engine: fills by hand at a size of 0.4, sizes that follow the forecast's
spread (narrow vs wide, same median; and ranked against it when the means differ too) scaled by the skill
measured on earlier windows (against statsmodels' regression), Kelly sizes on the embedded daily files that are
no on/off switch, the sequential step equal to the vectorised engine with sizes and calibration, conformal
calibration fixing a forecaster twice too narrow, and bad settings one line, exit 2."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import spearmanr

from marketcast.backtest.config import CALIBRATIONS, BacktestConfig
from marketcast.backtest.engine import (
    decision_ends, decision_mean, decision_size, forecast_windows, run_backtest, simulate,
)
from marketcast.backtest.fills import settle, settle_all
from marketcast.backtest.orders import LONG, SHORT, Bar, Costs, Decision
from marketcast.backtest.sizing import MIN_SKILL_TRADES, Skill
from marketcast.backtest.sizing_check import earlier_period, figures, placed_orders, skewed_series
from marketcast.backtest.strategies import StrategyParams, decide, initial_state, step
from marketcast.calibrate.coverage import coverage
from marketcast.calibrate.recalibrate import METHODS
from marketcast.commands import main
from marketcast.errors import ConfigError
from marketcast.forecast.base import ContextBatch, Forecast

from .helpers import MomentumForecaster, TableForecaster, make_bars, random_bars, trending_bars


def test_a_fill_at_size_0_4_by_hand():
    """Long at the open 100, out at the close 102; fee 0.1 % a side: unit net 0.02 - 0.002 = 0.018; at 0.4 of
    the capital 0.0072. A short take-profit at 98 on a bar 100/101/97/99: unit 0.02 - 0.002, at 0.4 0.0072."""
    costs = Costs(0.001)
    bar = Bar(100.0, 103.0, 99.0, 102.0)
    s = settle(Decision(LONG), bar, costs, size=0.4)
    assert (s.filled, s.entry_price, s.exit_price, s.size) == (True, 100.0, 102.0, 0.4)
    assert s.gross_return == pytest.approx(0.02, abs=1e-15) and s.fees == pytest.approx(0.002, abs=1e-15)
    assert s.net_return == pytest.approx(0.0072, abs=1e-15)
    tp = settle(Decision(SHORT, None, 98.0), Bar(100.0, 101.0, 97.0, 99.0), costs, size=0.4)
    assert (tp.exit_price, tp.exit_reason) == (98.0, "take_profit")
    assert tp.net_return == pytest.approx(0.4 * (0.02 - 0.002), abs=1e-15)
    assert settle(Decision(LONG), bar, costs, size=0.0).filled is False  # sized to nothing: no trade
    # the array form: the same settlements, sized afterwards
    fills = settle_all(np.array([1, -1, 1]), np.full(3, np.nan), np.array([np.nan, 98.0, np.nan]),
                       np.array([100.0, 100.0, 100.0]), np.array([103.0, 101.0, 103.0]),
                       np.array([99.0, 97.0, 99.0]), np.array([102.0, 99.0, 102.0]), costs)
    sized = fills.sized(np.array([0.4, 0.4, 0.0]))
    assert sized[0] == s and sized[1] == tp and not sized[2].filled
    assert sized.net.tolist() == [s.net_return, tp.net_return, 0.0]


def _engine_windows(n=120):
    """Bars whose every bar t+1 opens at close_t and moves +0.5 % (even rows) or -0.3 % (odd rows)."""
    close = [100.0]
    for k in range(1, n):
        close.append(close[-1] * (1.005 if k % 2 == 0 else 0.997))
    close = np.array(close)
    open_ = np.concatenate([[100.0], close[:-1]])
    return make_bars(np.column_stack([open_, np.maximum(open_, close) * 1.001, np.minimum(open_, close) * 0.999,
                                      close]))


# 20 samples point + spread * linspace(-1, 1, 20): mean = point, variance = spread^2 * 7 / 19 (the mean of
# ((2i - 19) / 19)^2), and the 95 % tail of 20 samples is the worst one, a loss of spread - point.
NARROW, WIDE, POINT = 0.05, 0.10, 0.0005
# exit close: every window's order fills and settles on its own bar, as the hand references assume (under the
# default next-open every other same-side entry is refused as a wash and a window's outcome lands a window later)
SIZED = dict(windows=40, context=16, num_samples=20, strategies=("simple", "buy_hold"), spa=False,
             bootstrap_reps=10, fee=0.001, spread=0.0, slippage=0.0, borrow_rate=0.0, exit="close")


def measured_skill(means, realised):
    """The reference for the sizing's skill factor: statsmodels' OLS of the realised returns on the forecast
    means without a constant (slope and its standard error), shrunk by max(0, 1 - se^2 / slope^2) (Baker &
    McHale 2013; positive-part James-Stein); 0 under MIN_SKILL_TRADES pairs or for a slope <= 0."""
    import statsmodels.api as sm

    if len(means) < MIN_SKILL_TRADES:
        return 0.0
    fit = sm.OLS(np.asarray(realised), np.asarray(means)[:, None]).fit()
    b, se = float(fit.params[0]), float(fit.bse[0])
    return b * max(0.0, 1.0 - se ** 2 / b ** 2) if b > 0 else 0.0


def _factors(unit: np.ndarray, mean: float) -> np.ndarray:
    """Each window's skill factor from the windows before it: every order filled, all with forecast mean
    ``mean``, realised ``unit`` (the reference, window by window)."""
    return np.array([measured_skill(np.full(k, mean), unit[:k]) for k in range(len(unit))])


@pytest.mark.parametrize("policy, narrow, wide", [
    ("kelly", 0.25 * POINT * 19 / (7 * NARROW ** 2), 0.25 * POINT * 19 / (7 * WIDE ** 2)),  # 0.135714, 0.033929
    ("cvar", NARROW, WIDE),  # 0.01 / (spread - b* POINT): the worst sample at the conditional mean b* POINT
])
def test_sizes_follow_the_spread_of_narrow_and_wide_forecasters(policy, narrow, wide):
    """Every window forecasts the same mean POINT; the bars alternate +0.5 % / -0.3 %, so the realised returns
    show a slope of about 2 on it with a wide error: the first MIN_SKILL_TRADES windows size 0, then each window's
    face-value size is scaled by the factor measured on the windows before it (statsmodels, window by window)."""
    bars = _engine_windows()
    config = BacktestConfig(**SIZED, sizing=policy, kelly_cap=1.0)
    got = {}
    for name, spread in (("narrow", NARROW), ("wide", WIDE)):
        forecaster = TableForecaster({}, spread=spread, default=(POINT, POINT, POINT))  # same median
        got[name] = run_backtest(bars, forecaster, config)
    fixed = run_backtest(bars, TableForecaster({}, spread=NARROW, default=(POINT,) * 3),
                         replace(config, sizing="fixed"))
    for strategy in ("simple", "buy_hold"):
        n, w, f = (got["narrow"].strategies[strategy], got["wide"].strategies[strategy], fixed.strategies[strategy])
        factor = _factors(f.settlements.gross, POINT)
        assert (factor[:MIN_SKILL_TRADES] == 0).all() and (factor[MIN_SKILL_TRADES:] > 0.1).all()
        budget = [np.where(factor > 0, 0.01 / (s - factor * POINT), 0.0) for s in (NARROW, WIDE)]  # the cvar size
        if policy == "kelly":  # within the ES budget (here Kelly's is the smaller size in every window)
            expect_n, expect_w = np.minimum(narrow * factor, budget[0]), np.minimum(wide * factor, budget[1])
            assert (narrow * factor <= budget[0]).all() and (wide * factor <= budget[1]).all()
        else:
            expect_n, expect_w = budget
        assert n.sizes == pytest.approx(expect_n, rel=1e-9, abs=1e-15)
        assert w.sizes == pytest.approx(expect_w, rel=1e-9, abs=1e-15)
        assert (w.sizes[MIN_SKILL_TRADES:] < n.sizes[MIN_SKILL_TRADES:]).all() and f.sizes.tolist() == [1.0] * 40
        # sized to 0: decided and unfilled; the sized window earns size x the unit-size net return, costs included
        assert f.filled.all() and np.array_equal(n.filled, factor > 0)
        np.testing.assert_array_equal(n.returns, n.sizes * (f.settlements.gross - f.settlements.fees))
        # the skill after the last window, stored and printed, is the reference's over all 40
        assert n.skill.trades == 40 and n.skill.factor == pytest.approx(
            measured_skill(np.full(40, POINT), f.settlements.gross), rel=1e-9)
        assert n.skill.describe()["factor"] == n.skill.factor
        face = narrow if policy == "kelly" else 1.0
        next_budget = 0.01 / (NARROW - n.skill.factor * POINT)
        next_expect = min(face * n.skill.factor, next_budget) if policy == "kelly" else next_budget
        assert n.next_size == pytest.approx(next_expect, rel=1e-9)
        # by hand: a long bought at the open close_t and sold at the close; 0.2 % costs a round trip
        c = bars.frame["close"].to_numpy()
        k = 30
        t = len(c) - 41 + k  # windows: the last 40 bars that have a t+1
        unit = c[t + 1] / c[t] - 1.0 - 0.002
        assert n.returns[k] == pytest.approx(expect_n[k] * unit, rel=1e-9)
        assert n.metrics["return"] == pytest.approx(np.prod(1.0 + n.returns) - 1.0, rel=1e-12)
    assert "size" in got["wide"].trades().columns


@pytest.mark.parametrize("policy", ["kelly", "cvar"])
def test_sizes_rank_against_the_spread_of_narrow_and_wide_forecasters_whose_means_vary(policy):
    """Two forecasters share each window's mean (drawn per window, 0.05 % +- 0.05 % in size, on the side the bar
    then moves: a forecaster with skill) and differ in spread (4 % vs 8 %): both measure the same skill, and
    pooled, the size falls with the spread though a narrow window with a small mean can get less than a wide one
    with a large mean. Kelly: wide = narrow / 4 window by window below the cap; CVaR about half."""
    bars = _engine_windows()
    c = bars.frame["close"].to_numpy()
    decided = bars.frame.index[-41:-1]
    moves = c[-40:] / c[-41:-1] - 1.0
    means = np.sign(moves) * np.abs(np.random.default_rng(4).normal(0.0005, 0.0005, len(decided)))
    table = {t: (m, m, m) for t, m in zip(decided, means)}
    # kelly: an ES budget of all the equity, which these trades' ES never reaches: the Kelly size alone
    config = BacktestConfig(**{**SIZED, "strategies": ("simple",)}, sizing=policy,
                            risk_per_trade=1.0 if policy == "kelly" else 0.01)
    narrow, wide = (run_backtest(bars, TableForecaster(table, spread=s), config) for s in (0.04, 0.08))
    n, w = narrow.strategies["simple"].sizes, wide.strategies["simple"].sizes
    run = narrow.strategies["simple"]  # filled where sized; the unit-size gross is |move| on a side it trades
    on = run.decisions.side != 0  # simple stays flat where the mean does not pay the round trip
    assert np.array_equal(run.decisions.side[on], np.sign(moves[on])) and on.sum() > 25
    assert np.array_equal(run.settlements.gross[run.filled], np.abs(moves)[run.filled])
    factor = np.array([measured_skill(np.abs(means[:k][on[:k]]), np.abs(moves[:k][on[:k]])) for k in range(40)])
    assert (factor[on.cumsum() > MIN_SKILL_TRADES] > 0.5).all()
    if policy == "kelly":
        face = np.where(on, 0.25 * factor * np.abs(means) * 19 / 7, 0.0)  # / sigma^2, capped at 1
        assert n == pytest.approx(np.minimum(face / 0.04 ** 2, 1.0), rel=1e-9, abs=1e-15)
        assert w == pytest.approx(np.minimum(face / 0.08 ** 2, 1.0), rel=1e-9, abs=1e-15)
        below = n < 1.0
        assert w[below] == pytest.approx(n[below] / 4, rel=1e-9, abs=1e-15) and below.sum() > 30
    else:
        assert ((w > 0.45 * n) & (w < 0.55 * n))[n > 0].all() and (n[:MIN_SKILL_TRADES] == 0).all()
    sizes, widths = (np.concatenate(pair) for pair in zip(placed_orders(narrow), placed_orders(wide)))
    assert np.ptp(widths) > 0.05 and spearmanr(sizes[sizes > 0], widths[sizes > 0]).statistic < -0.5


@pytest.mark.parametrize("symbol", ["SP500", "NASDAQ"])
def test_kelly_sizes_on_the_default_70_windows_measure_no_skill(symbol):
    """The embedded daily files with the baseline, the default 70 windows: no strategy's slope over its 20-50
    orders clears one standard error but ``highlow``'s, late (measured: 99.2 % / 99.7 % of the orders at 0, none at
    the cap): the honest size of a forecaster that has not earned a bet (an information coefficient under about
    1 / sqrt(50) cannot show on 50 orders)."""
    from marketcast.data import load_symbol
    from marketcast.forecast.baseline import BaselineForecaster

    config = BacktestConfig(sizing="kelly", spa=False, bootstrap_reps=10, exit="close")  # measured under close
    sizes, _ = placed_orders(run_backtest(load_symbol(symbol), BaselineForecaster(), config))
    assert len(sizes) > 300 and (sizes == config.kelly_cap).mean() == 0.0 and (sizes == 0).mean() > 0.95


def _sizing_cases():
    from marketcast.data import load_symbol

    for symbol in ("SP500", "NASDAQ"):
        yield pytest.param(lambda symbol=symbol: (load_symbol(symbol), 1000), id=f"{symbol}-1000-windows")
        yield pytest.param(lambda symbol=symbol: earlier_period(load_symbol(symbol)), id=f"{symbol}-2005-2008")
    for seed in (0, 1):
        yield pytest.param(lambda seed=seed: (skewed_series(seed=seed), 1000), id=f"skewed-heavy-tailed-seed-{seed}")


@pytest.mark.parametrize("case", list(_sizing_cases()))
def test_kelly_sizes_are_no_on_off_switch_and_fall_with_the_spread(case):
    """Over 1,000 windows of the embedded daily files, their earlier period 2005-2008 and a synthetic GARCH series
    with skewed, heavy-tailed (skew-t) returns: fewer than a quarter of the orders at the cap, and among the sizes
    strictly between 0 and the cap the size falls with the spread (Spearman < -0.1). Measured
    (benchmarks/sizing_bench.py): 0-2.6 % at the cap, Spearman -0.27 to -0.81; Kelly alone, without the ES budget,
    put 33-37 % of the synthetic series' orders at the cap and ranked SP500 2005-2008's +0.09."""
    from marketcast.forecast.baseline import BaselineForecaster

    bars, windows = case()
    config = BacktestConfig(sizing="kelly", windows=windows, spa=False, bootstrap_reps=10, exit="close")
    f = figures(*placed_orders(run_backtest(bars, BaselineForecaster(), config)), config.kelly_cap)
    assert f["at_cap"] < 0.25 and f["inner"] > 150 and f["spearman_inner"] < -0.1, f


def test_a_take_profit_counts_in_the_trade_return_samples():
    """entry_takeprofit exits at its take-profit on the sample paths whose high reaches it. Close samples
    0.0005 + 0.01 z and high samples 0.004 + 0.01 z (z = linspace(-1, 1, 20)): ``simple``'s trade has mean
    0.0005 > 0 (a quarter of Kelly 0.0005 / (1e-4 * 7 / 19) = 13.6, capped at 0.3), but the take-profit at the
    median high cuts the upper half to +0.4 % and leaves the lower half's closes: a negative mean, size 0, no trade."""
    bars = _engine_windows()
    forecaster = TableForecaster({}, spread=0.01, default=(POINT, 0.004, -0.004))
    config = BacktestConfig(**{**SIZED, "strategies": ("entry_takeprofit", "simple")}, sizing="kelly", kelly_cap=0.3)
    result = run_backtest(bars, forecaster, config)
    z = np.linspace(-1, 1, 20)
    trade = np.where(0.004 + 0.01 * z >= 0.004, 0.004, POINT + 0.01 * z)
    assert trade.mean() == pytest.approx((0.004 * 10 + (POINT * 10 + 0.01 * z[:10].sum())) / 20) and trade.mean() < 0
    tp, simple = result.strategies["entry_takeprofit"], result.strategies["simple"]
    assert tp.sizes.tolist() == [0.0] * 40 and not tp.filled.any() and tp.returns.tolist() == [0.0] * 40
    c = bars.frame["close"].to_numpy()
    factor = _factors(c[-40:] / c[-41:-1] - 1.0, POINT)  # simple: long at the open close_t, out at the close
    assert simple.sizes == pytest.approx(np.minimum(0.25 * factor * POINT * 19 / (7e-4 * 0.01 * 100), 0.3))
    assert (simple.sizes[MIN_SKILL_TRADES:] == 0.3).any() and simple.filled[MIN_SKILL_TRADES:].all()


@pytest.mark.parametrize("settings", [
    dict(sizing="kelly", kelly_cap=0.5), dict(sizing="cvar", risk_per_trade=0.002),
    dict(sizing="kelly", calibrate="conformal", calibration_min_windows=30),
    dict(sizing="cvar", risk_per_trade=0.002, calibrate="conformal", calibration_min_windows=30),
    dict(sizing="cvar", calibrate="quantile", calibration_min_windows=30),
])
@pytest.mark.parametrize("asset_class", ["stock", "crypto"])
def test_the_one_window_step_equals_the_vectorised_engine_with_sizes(settings, asset_class):
    bars = trending_bars(400, seed=8, asset_class=asset_class)  # momentum has skill to measure here
    config = BacktestConfig(windows=150, context=64, num_samples=64, maxdiff_min_history=5, spa=False,
                            bootstrap_reps=10, exit="close", **settings)  # the one-window step settles at the close
    ends = decision_ends(len(bars), config)
    (fc,) = forecast_windows(MomentumForecaster(), [(bars, ends)], config)
    result = simulate(bars, fc, ends, config)
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
    frame = bars.frame
    rows = frame.index.get_indexer(result.settle_times)
    samples = result.sample_returns
    sized_somewhere = False
    for name, run in result.strategies.items():
        state, skill = initial_state(name), Skill()
        for k, (view, t) in enumerate(zip(result.views, rows)):
            bar = Bar(*map(float, frame.iloc[t][["open", "high", "low", "close"]]))
            window = {f: v[k:k + 1] for f, v in samples.items()}
            factor = skill.factor  # from the windows settled before this one
            d, s, state = step(name, view, state, bar, params,
                               lambda dec: decision_size(dec, view, window, config, factor))
            assert run.decisions[k] == d and run.settlements[k] == s, (name, k)
            assert run.returns[k] == s.net_return
            if d.side:
                assert run.sizes[k] == decision_size(d, view, window, config, factor)
                sized_somewhere |= 0.0 < run.sizes[k] < 1.0
            unit = settle(d, bar, params.costs, params.fill_mode, params.same_bar)  # learnt at size 1, traded or not
            skill = skill.add(decision_mean(d, view, window), unit.gross_return if unit.filled else np.nan)
        assert skill == run.skill  # the same sums, bit for bit
        latest = {f: v[-1:] for f, v in samples.items()}
        nxt = decide(name, result.latest_view, state, params)
        assert run.next_decision == nxt
        assert run.next_size == decision_size(nxt, result.latest_view, latest, config, skill.factor)
    assert sized_somewhere
    if asset_class == "crypto":  # a 24/7 record follows the pick's path (exits at the next open, windows skipped
        return                   # while one waits): tests/backtest/test_pick_path_wash.py judges it
    wf = result.walk_forward  # the pick reads the sized returns
    assert np.array_equal(wf["returns"][[p is not None for p in wf["picked"]]],
                          np.array([result.strategies[p].returns[k] for k, p in enumerate(wf["picked"]) if p]))


class NarrowForecaster:
    """Samples of bar t+1 with half the bars' volatility (``random_bars(vol=0.01)``: close-to-close log
    returns N(0, 0.01)): an 80 % interval that holds the outcome 48 % of the time (80 % after conformal
    calibration). Seeded by each window's own last close, so a window's forecast depends on that window alone."""

    name = "narrow"
    fields = ("close", "high", "low")

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        last = batch.last_close()
        out = np.empty((batch.batch_size, 3, num_samples, horizon))
        for i in range(batch.batch_size):
            g = np.random.default_rng([seed, int(last[i] * 1e6) % (2**32)])
            c = last[i] * np.exp(g.normal(0.0, 0.005, num_samples))
            out[i, 0] = c[:, None]
            out[i, 1] = (c * np.exp(np.abs(g.normal(0.0, 0.0025, num_samples))))[:, None]
            out[i, 2] = (c * np.exp(-np.abs(g.normal(0.0, 0.0025, num_samples))))[:, None]
        return Forecast(out, self.fields, {"model": self.name})


def _close_coverage(result, bars, calibrated_only):
    c = bars.frame["close"].to_numpy()
    rows = bars.frame.index.get_indexer(result.decision_times)
    actual = c[rows + 1] / c[rows] - 1.0
    samples = result.sample_returns["close"][:result.windows]
    keep = result.calibrated if calibrated_only else np.ones(result.windows, dtype=bool)
    (cov,) = coverage(samples[keep], actual[keep], levels=(0.8,), axis=-1)
    return cov


def test_conformal_brings_a_too_narrow_forecaster_to_80_percent_coverage():
    bars = random_bars(1300, seed=21, vol=0.01)
    config = BacktestConfig(windows=1000, context=32, num_samples=128, strategies=("simple",), spa=False,
                            bootstrap_reps=10)
    raw = run_backtest(bars, NarrowForecaster(), config)
    fixed = run_backtest(bars, NarrowForecaster(), replace(config, calibrate="conformal", calibration_min_windows=50))
    assert raw.calibrated is None and fixed.calibrated.sum() == 950 and not fixed.calibrated[:50].any()
    assert fixed.calibration_note == "conformal calibration from window 51 on (950 of 1000 windows)"
    before = _close_coverage(raw, bars, calibrated_only=False)
    after = _close_coverage(fixed, bars, calibrated_only=True)
    assert before.rate < 0.6  # 48 %: the test can tell
    assert abs(after.rate - 0.8) <= 0.05, after
    # the warm-up windows kept their raw samples, and the strategies and the skill table saw the calibrated ones
    np.testing.assert_array_equal(fixed.sample_returns["close"][:50], raw.sample_returns["close"][:50])
    assert fixed.skill["crps_close"] < raw.skill["crps_close"]  # a too-narrow forecast scores worse


def test_default_settings_keep_unit_sizes_and_no_calibration():
    bars = random_bars(200, seed=3)
    result = run_backtest(bars, MomentumForecaster(), BacktestConfig(windows=60, context=32, num_samples=32, spa=False))
    assert result.calibrated is None and result.calibration_note == ""
    for run in result.strategies.values():
        assert run.settlements.size is None and run.sizes.tolist() == [1.0] * 60 and run.next_size == 1.0
        assert np.array_equal(run.returns, run.settlements.gross - run.settlements.fees)
    assert CALIBRATIONS == METHODS  # the config's list without importing scipy, kept equal to the calibrator's


@pytest.mark.parametrize("kwargs, message", [
    (dict(calibrate="isotonic"), "--calibrate must be one of none, conformal, quantile"),
    (dict(calibrate="conformal", calibration_min_windows=9), "--calibration-min-windows must be a whole number >= 10"),
    (dict(calibrate="conformal", windows=40, calibration_min_windows=41), "exceeds --windows 40"),
    (dict(sizing="martingale"), "--sizing must be one of fixed, kelly, cvar"),
    (dict(sizing="kelly", kelly_cap=0.0), "--kelly-cap must be in (0, 1]"),
    (dict(sizing="kelly", kelly_cap=1.5), "--kelly-cap must be in (0, 1]"),
    (dict(sizing="kelly", kelly_fraction=0.0), "--kelly-fraction must be in (0, 1]"),
    (dict(sizing="kelly", kelly_fraction=1.01), "--kelly-fraction must be in (0, 1]"),
    (dict(kelly_fraction="a quarter"), "--kelly-fraction must be in (0, 1]"),
    (dict(sizing="cvar", risk_per_trade=0.0), "--risk-per-trade must be in (0, 1]"),
    (dict(sizing="cvar", risk_per_trade=2.0), "--risk-per-trade must be in (0, 1]"),
])
def test_bad_settings_are_one_config_error_line(kwargs, message):
    with pytest.raises(ConfigError) as err:
        BacktestConfig(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("args, message", [
    (["--calibrate", "isotonic"], "'--calibrate': 'isotonic' is not one of 'none', 'conformal', 'quantile'"),
    (["--calibrate", "conformal", "--calibration-min-windows", "5"], "--calibration-min-windows must be"),
    (["--calibrate", "conformal", "--calibration-min-windows", "13"], "exceeds --windows 12"),
    (["--sizing", "martingale"], "'--sizing': 'martingale' is not one of 'fixed', 'kelly', 'cvar'"),
    (["--sizing", "kelly", "--kelly-cap", "0"], "--kelly-cap must be in (0, 1]"),
    (["--sizing", "kelly", "--kelly-fraction", "0"], "--kelly-fraction must be in (0, 1]"),
    (["--sizing", "kelly", "--kelly-fraction", "1.5"], "--kelly-fraction must be in (0, 1]"),
    (["--kelly-fraction", "-0.25"], "--kelly-fraction must be in (0, 1]"),
    (["--sizing", "cvar", "--risk-per-trade", "1.5"], "--risk-per-trade must be in (0, 1]"),
])
def test_bad_flags_exit_2_in_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "bt"
    assert main(["backtest", "SP500", "--windows", "12", "--samples", "32", "--context", "128", *args,
                 "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_cli_calibrates_and_sizes_and_says_so(tmp_path, capsys):
    import json

    import pandas as pd

    out = tmp_path / "bt"
    # 120 windows: the baseline measures skill for a few strategies (entry_takeprofit, highlow, ci_guard) and trades
    assert main(["backtest", "SP500", "--windows", "120", "--samples", "32", "--context", "128", "--no-spa",
                 "--calibrate", "conformal", "--calibration-min-windows", "20", "--sizing", "cvar", "-v",
                 "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "SP500: conformal calibration from window 21 on (100 of 120 windows)" in printed
    assert "SP500: cvar sizing: risk per trade 0.01 at the conditional mean b* mu, cap 1; measured skill" in printed
    summary = (out / "latest" / "summary.md").read_text()
    assert "Samples: conformal calibration from window 21 on (100 of 120 windows)." in summary
    assert "Positions sized `cvar` (risk per trade 0.01)" in summary and "Skill b* after the last window" in summary
    report = json.loads((out / "latest" / "SP500.json").read_text())
    assert report["calibration"]["first_calibrated_window"] == 21 and report["calibration"]["calibrated_windows"] == 100
    assert report["config"]["sizing"] == "cvar" and report["config"]["risk_per_trade"] == 0.01
    for name, record in report["strategies"].items():  # the estimate after the last window, and the next size
        sizing = record["sizing"]
        assert set(sizing) == {"trades", "slope", "slope_se", "factor", "next_size"}
        assert sizing["factor"] >= 0 and 0 <= sizing["next_size"] <= 1
        if sizing["trades"] < 20:
            assert sizing["slope"] is None and sizing["factor"] == 0
    assert any(r["sizing"]["factor"] > 0 for r in report["strategies"].values())
    trades = pd.read_csv(out / "latest" / "trades.csv")
    traded = trades[trades.filled]
    assert ((traded["size"] > 0) & (traded["size"] <= 1)).all() and (traded["size"] < 1).any()
    # net = size x (gross - fees), to the csv's digits
    assert np.allclose(traded.net_return, traded["size"] * (traded.gross_return - traded.fees), rtol=0, atol=1e-9)
