"""Monte Carlo error (marketcast.backtest.montecarlo): batch figures equal a run on the batch's samples, the
standard error and band by hand, close calls by hand, a quantile model has none, --seeds, and the issue's check
on the embedded SP500: seeds 1-3 land inside seed 0's printed MC band."""

import json
import math

import numpy as np
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_backtest
from marketcast.backtest.job import Job, run_job
from marketcast.backtest.montecarlo import (
    CHI2_95,
    LOG_SD_BIAS,
    LOG_SD_VAR,
    T_975,
    McError,
    batch_count,
    seed_spread,
)
from marketcast.backtest.selection import DEFAULT_LOOKBACK, DEFAULT_MIN_TRADES
from marketcast.backtest.strategies import StrategyParams
from marketcast.backtest.views import ForecastViews
from marketcast.commands import main
from marketcast.errors import ConfigError
from marketcast.forecast.base import Forecast
from marketcast.forecast.baseline import BaselineForecaster

from .helpers import QuantileForecaster, random_bars

CONFIG = BacktestConfig(windows=60, context=64, num_samples=64, maxdiff_min_history=5, spa=False, bootstrap_reps=50)


class BatchOf:
    """Batch ``b`` of ``batches`` of another forecaster's samples (samples b, b + B, ...): a whole run on it is
    what the Monte Carlo estimate decides on for that batch."""

    def __init__(self, inner, b: int, batches: int) -> None:
        self.inner, self.b, self.batches = inner, b, batches
        self.name, self.fields = inner.name, inner.fields

    def forecast(self, batch, horizon, num_samples, seed=0):
        full = self.inner.forecast(batch, horizon, num_samples * self.batches, seed)
        return Forecast(full.samples[:, :, self.b::self.batches], full.fields, dict(full.meta))


@pytest.mark.parametrize("sizing", ["fixed", "cvar"])
def test_each_batch_figure_is_a_whole_run_on_that_batchs_samples(sizing):
    """The reference: backtesting batch b's samples alone gives batch b's total returns and walk-forward record,
    bit for bit; the reported figure stays the full-sample run's."""
    from dataclasses import replace

    bars = random_bars(200, seed=21)
    config = replace(CONFIG, sizing=sizing, risk_per_trade=0.002)
    full = run_backtest(bars, BaselineForecaster(), config)
    mc = full.monte_carlo
    assert (mc.batches, mc.samples, mc.windows) == (8, 64, 60)
    small = replace(config, num_samples=8)
    for b in range(8):
        one = run_backtest(bars, BatchOf(BaselineForecaster(), b, 8), small)
        assert one.monte_carlo is None  # 8 samples make no batches of their own
        for name, run in one.strategies.items():
            assert mc.strategies[name].batch_values[b] == run.metrics["return"]
        assert mc.walk_forward.batch_values[b] == one.walk_forward["metrics"]["return"]
    for name, run in full.strategies.items():
        assert mc.strategies[name].value == run.metrics["return"]
    assert mc.walk_forward.value == full.walk_forward["metrics"]["return"]
    if sizing == "fixed":  # reads no forecast (cvar sizes it from the samples)
        assert mc.strategies["buy_hold"].band == 0.0
    assert mc.strategies["simple"].band > 0.0


def test_standard_error_and_band_by_hand():
    """B = 4 batch figures 1, 3, 2, 4 % and no coarser batches (a run recorded before the scaling was measured):
    sd sqrt(5/3) %, SE = sd * 4^-1/4 = sd / sqrt(2), band = t(0.975, 3) * sqrt(2) * SE = 3.182 * sd."""
    e = McError(0.025, (0.01, 0.03, 0.02, 0.04))
    sd = math.sqrt(5.0 / 3.0) / 100.0
    assert e.se == pytest.approx(sd / math.sqrt(2.0), rel=1e-12)
    assert e.band == pytest.approx(3.182 * sd, rel=1e-12)
    assert e.covers(0.025 + 3.18 * sd) and not e.covers(0.025 - 3.19 * sd)


def test_student_t_quantiles_match_scipy():
    from scipy.stats import t

    for dof, q in T_975.items():
        assert q == pytest.approx(t.ppf(0.975, dof), abs=5e-4)


def test_log_sd_bias_and_variance_match_simulated_normal_sds():
    """The mean and variance of log(sd) of n + 1 normal draws about log(sigma), as tabulated, against 200,000
    simulated sds per n (a judge that shares no code with the table's formula)."""
    rng = np.random.default_rng(0)
    for dof in LOG_SD_BIAS:
        logs = np.log(rng.normal(0.0, 2.0, (200_000, dof + 1)).std(axis=1, ddof=1)) - np.log(2.0)
        assert logs.mean() == pytest.approx(LOG_SD_BIAS[dof], abs=0.01)
        assert logs.var() == pytest.approx(LOG_SD_VAR[dof], rel=0.02)


@pytest.mark.parametrize("samples, batches", [(256, 8), (64, 8), (63, 7), (40, 5), (32, 4), (31, 0), (8, 0)])
def test_batch_count(samples, batches):
    assert batch_count(samples) == batches


def test_too_few_samples_give_no_estimate_and_the_tables_say_so():
    from dataclasses import replace

    from marketcast.backtest.tables import in_sample_rows, track_rows

    result = run_backtest(random_bars(120, seed=3), BaselineForecaster(), replace(CONFIG, windows=30, num_samples=16))
    assert result.monte_carlo is None
    assert [row[-1] for row in track_rows(result)] == ["—", "—"]
    assert {row[-1] for row in in_sample_rows(result)} == {"—"}


def test_a_model_deciding_from_its_own_quantiles_has_no_sampling_error():
    """The views read the median and the band from the model's knots, which every batch shares: no decision
    moves from batch to batch, so every band is 0 and no decision is a close call."""
    result = run_backtest(random_bars(200, seed=8), QuantileForecaster(), CONFIG)
    mc = result.monte_carlo
    assert {e.band for e in mc.strategies.values()} == {0.0} and mc.walk_forward.band == 0.0
    assert set(mc.close_calls.values()) == {0} and mc.unreliable == []


def _views(close, high, low, band_low, band_high) -> ForecastViews:
    n = len(close)
    return ForecastViews(list(range(n)), np.full(n, 100.0), *(np.asarray(x, dtype=float) for x in
                                                               (close, high, low, band_low, band_high)), np.zeros(n))


def test_close_calls_are_the_windows_whose_side_differs_on_a_batch_of_twice_the_samples():
    """The reference: a whole run on each of the B/2 = 4 batches of 16 samples (samples b, b + 4, ...); a window
    is close for a strategy when its side in any of those runs differs from the full run's."""
    from dataclasses import replace

    from marketcast.backtest.strategies import StrategyParams
    from marketcast.backtest.vectorised import decision_sides

    bars = random_bars(200, seed=21)
    full = run_backtest(bars, BaselineForecaster(), CONFIG)
    p = StrategyParams.from_config(CONFIG, bars.asset_class, bars.periods_per_year)
    quarters = [run_backtest(bars, BatchOf(BaselineForecaster(), b, 4), replace(CONFIG, num_samples=16))
                for b in range(4)]
    for name in full.strategies:
        side = decision_sides(name, full.views, p)
        expected = np.any([decision_sides(name, q.views, p) != side for q in quarters], axis=0)
        assert full.monte_carlo.close[name].tolist() == expected.tolist(), name
    assert 0 < full.monte_carlo.close_calls["simple"] < 60
    assert not full.monte_carlo.close["buy_hold"].any()
    assert "of 60 decisions differ on a batch of 16 samples" in full.monte_carlo.note()


def test_the_scaling_is_one_slope_fitted_over_the_runs_figures():
    """Two figures whose sd falls as m^-0.3 at levels 0.1 and 0.02 on 8, 4, 2 batches of 32, 64, 128 samples
    (S = 256), each sd at its expected log (sigma times exp(LOG_SD_BIAS) for its 7, 3, 1 dof): the run's
    exponent 0.3, each SE = level * 256^-0.3. Slopes 0.2 and 0.4 (weights equal): 0.3. Spreads growing with m
    clip to 0 (SE = the finest spread less its bias; a run recorded before: the inverse-variance weighted
    geometric mean of the debiased spreads), falling as m^-0.8 to 1/2; a figure with a spread of 0 is left out
    of the fit and scaled at the mean's rate."""
    from marketcast.backtest.montecarlo import exponent, scaled

    def law(level, a):
        return {b: level * (256 // b) ** -a * math.exp(LOG_SD_BIAS[b - 1]) for b in (8, 4, 2)}

    assert exponent([law(0.1, 0.3), law(0.02, 0.3)]) == pytest.approx(0.3, abs=1e-12)
    assert scaled(law(0.1, 0.3), 0.3) == pytest.approx(0.1 * 256 ** -0.3, rel=1e-12)
    assert exponent([law(0.1, 0.2), law(0.02, 0.4)]) == pytest.approx(0.3, abs=1e-12)
    growing = {8: 0.02, 4: 0.03, 2: 0.05}
    assert exponent([growing]) == 0.0
    w = {b: 1.0 / LOG_SD_VAR[b - 1] for b in growing}
    centre = sum(w[b] * (math.log(v) - LOG_SD_BIAS[b - 1]) for b, v in growing.items()) / sum(w.values())
    assert scaled(growing, 0.0, finest=False) == pytest.approx(math.exp(centre), rel=1e-12)
    assert scaled(growing, 0.0) == pytest.approx(0.02 * math.exp(-LOG_SD_BIAS[7]), rel=1e-12)
    assert scaled(growing, 0.2) == pytest.approx(0.02 * math.exp(-LOG_SD_BIAS[7]) * 8 ** -0.2, rel=1e-12)
    assert exponent([law(1.0, 0.8)]) == 0.5
    still = {8: 0.02, 4: 0.0, 2: 0.01}
    assert exponent([still, law(0.1, 0.3)]) == pytest.approx(0.3, abs=1e-12) and exponent([still]) is None
    assert scaled(still, 0.3) == pytest.approx(0.02 / math.sqrt(8), rel=1e-12)


def test_the_bands_exponent_weighs_the_runs_slope_against_a_quarter_by_their_precisions():
    """Two figures exactly on a line of slope 0.3 (8, 4, 2 batches at S = 256): the fit's variance is
    1 / sum(w x^2) over both, x = -log B centred on each figure's weighted mean, w = 1 / var(log sd); the band's
    exponent (w_run 0.3 + 100 * 0.25) / (w_run + 100) with the prior's sd 0.1. A slope measured on many figures
    moves further from 1/4 than one measured on one; none measured: None."""
    from marketcast.backtest.montecarlo import exponent, rate

    def law(level, a):
        return {b: level * (256 // b) ** -a * math.exp(LOG_SD_BIAS[b - 1]) for b in (8, 4, 2)}

    w = np.array([1 / LOG_SD_VAR[b - 1] for b in (8, 4, 2)])
    x = -np.log([8.0, 4.0, 2.0])
    one = float(np.sum(w * (x - np.sum(w * x) / np.sum(w)) ** 2))  # one figure's sum(w x^2)
    w_run = 2 * one
    assert exponent([law(0.1, 0.3), law(0.02, 0.3)]) == pytest.approx(0.3, abs=1e-12)
    assert rate([law(0.1, 0.3), law(0.02, 0.3)]) == pytest.approx((w_run * 0.3 + 25.0) / (w_run + 100.0), abs=1e-12)
    steep = [law(0.1, 0.45)]
    many = [law(0.1 / k, 0.45) for k in range(1, 8)]
    assert 0.25 < rate(steep) < rate(many) < 0.45
    assert rate([{8: 0.02, 4: 0.0, 2: 0.01}]) is None


def test_the_bands_exponent_scatters_less_than_the_runs_own_slope():
    """Seven figures per run with normal batch figures whose sd falls as m^-0.25 (2,000 runs): the band's SE
    at S scatters less around the truth than the one read with the run's own fitted slope (interquartile range
    of log SE / truth), and its median stays within 5 % of it; where the truth is m^-0.1 the band's exponent
    lies between the truth and 1/4 (it leans to a quarter, so the band runs wider, never narrower)."""
    from marketcast.backtest.montecarlo import exponent, rate, scaled

    rng = np.random.default_rng(2)
    levels = np.array([0.2, 0.1, 0.1, 0.05, 0.05, 0.02, 0.01])

    def runs(a):
        for _ in range(2000):
            yield [{b: float(np.std(rng.normal(0.0, lv * (256 // b) ** -a, b), ddof=1)) for b in (8, 4, 2)}
                   for lv in levels]

    own, band = [], []
    for figures in runs(0.25):
        own.append(math.log(scaled(figures[1], exponent(figures)) / (0.1 * 256 ** -0.25)))
        band.append(math.log(scaled(figures[1], rate(figures)) / (0.1 * 256 ** -0.25)))
    iqr = lambda v: float(np.subtract(*np.percentile(v, [75, 25])))  # noqa: E731
    assert iqr(band) < 0.8 * iqr(own)
    assert abs(math.exp(np.median(band)) - 1.0) < 0.05
    flat = [rate(figures) for figures in runs(0.1)]
    assert 0.1 < np.median(flat) < 0.25


@pytest.mark.parametrize("a", [0.0, 0.15, 0.3])
def test_the_fitted_exponent_is_unbiased_for_normal_batch_figures(a):
    """Seven figures per run, each with normal batch figures of sd level * m^-a on 8, 4, 2 batches of 32, 64,
    128 samples: over 2,000 runs the median fitted exponent lies within 0.03 of a, and the median SE within 5 %
    of level * 256^-a (the log of a 1-dof sd sits 0.64 below log sigma: fitted raw, the exponent came out about
    0.3 too steep and the next-open bands too narrow, docs/backtest.md)."""
    from marketcast.backtest.montecarlo import exponent, scaled

    rng = np.random.default_rng(1)
    levels = np.array([0.2, 0.1, 0.1, 0.05, 0.05, 0.02, 0.01])
    fitted, ratio = [], []
    for _ in range(2000):
        figures = [{b: float(np.std(rng.normal(0.0, lv * (256 // b) ** -a, b), ddof=1)) for b in (8, 4, 2)}
                   for lv in levels]
        e = exponent(figures)
        fitted.append(e)
        ratio.append(scaled(figures[1], e) / (0.1 * 256 ** -a))
    if a > 0:  # at 0 half the fits clip to 0
        assert np.median(fitted) == pytest.approx(a, abs=0.03)
    else:
        assert np.median(fitted) <= 0.03
    assert np.median(ratio) == pytest.approx(1.0, abs=0.05 if a > 0 else 0.15)


def test_a_run_recorded_before_the_log_sds_were_debiased_keeps_its_printed_band():
    """A stored McError with coarse batches and an exponent but no ``debiased`` field reads its line as it was
    printed (raw log sds weighted 7, 3, 1); one with ``debiased`` but no ``finest`` the debiased line through
    the weighted centre (weights 1 / var(log sd)); a new one the debiased line through the finest spread."""
    from marketcast.runs.codec import decode, encode

    fine, mid, coarse = (0.01, 0.03, 0.02, 0.04, 0.0, 0.05, 0.02, 0.03), (0.02, 0.03, 0.01, 0.035), (0.02, 0.03)
    new = McError(0.025, fine, (mid, coarse), exponent=0.3, debiased=True)
    fields = {"value": 0.025, "batch_values": {"$tuple": list(fine)},
              "coarse": {"$tuple": [{"$tuple": list(mid)}, {"$tuple": list(coarse)}]}, "exponent": 0.3}
    old = decode(json.dumps({"$dc": "marketcast.backtest.montecarlo:McError", "fields": fields}))
    sds = {b: float(np.std(v, ddof=1)) for b, v in ((8, fine), (4, mid), (2, coarse))}
    x = {b: -math.log(b) for b in sds}
    raw = sum((b - 1) * (math.log(sd) + 0.3 * x[b]) for b, sd in sds.items()) / 11
    w = {b: 1 / LOG_SD_VAR[b - 1] for b in sds}
    fit = sum(w[b] * (math.log(sd) - LOG_SD_BIAS[b - 1] + 0.3 * x[b]) for b, sd in sds.items()) / sum(w.values())
    centred = decode(json.dumps({"$dc": "marketcast.backtest.montecarlo:McError",
                                 "fields": {**fields, "debiased": True}}))
    finest = McError(0.025, fine, (mid, coarse), exponent=0.3, debiased=True, finest=True)
    assert old.se == pytest.approx(math.exp(raw), rel=1e-12)
    assert new.se == pytest.approx(math.exp(fit), rel=1e-12) and centred.se == new.se
    assert finest.se == pytest.approx(sds[8] * math.exp(-LOG_SD_BIAS[7]) * 8 ** -0.3, rel=1e-12)
    assert decode(encode(new)).band == new.band and new.band > old.band
    assert decode(encode(finest)).band == finest.band


def test_biased_batches_flag_the_band_by_return_or_by_trades():
    """Batch mean 2.5 % vs the run's 2.5 %: z 0; vs 10 %: z = 7.5 / (sd / sqrt(4)) > t(0.975, 3); batches
    trading 20-26 times where the run traded 3: biased though the returns agree."""
    batches = (0.01, 0.03, 0.02, 0.04)
    sd = float(np.std(batches, ddof=1))
    assert McError(0.025, batches).bias_z == 0.0 and not McError(0.025, batches).biased
    far = McError(0.10, batches)
    assert far.bias_z == pytest.approx(0.075 / (sd / 2.0), rel=1e-12) and far.biased
    rare = McError(0.025, batches, trades=3, batch_trades=(20, 22, 24, 26))
    assert rare.trades_z == pytest.approx(20.0 / (np.std([20, 22, 24, 26], ddof=1) / 2.0)) and rare.biased
    assert not McError(0.025, batches, trades=23, batch_trades=(20, 22, 24, 26)).biased
    assert McError(0.0, (0.0, 0.0, 0.0, 0.01), trades=0, batch_trades=(0, 0, 0, 1)).biased  # the run never traded


def test_overdispersed_batch_trade_counts_flag_the_band():
    """Trade counts 10, 30, 20, 20 (mean 20, the run's 20; s^2 = 200 / 3): index of dispersion 3 s^2 / 20 = 10 >
    chi-square(0.95, 3) = 7.815, so the band is flagged though the batches agree with the run in mean return and
    trade count; 20, 22, 24, 26 (s^2 = 20 / 3, mean 23): 20 / 23 < 7.815, not flagged. No batch trading: 0."""
    batches = (0.01, 0.03, 0.02, 0.04)
    spread = McError(0.025, batches, trades=20, batch_trades=(10, 30, 20, 20))
    assert spread.trades_z == 0.0 and spread.bias_z == 0.0
    assert spread.trades_dispersion == pytest.approx(10.0, rel=1e-12) and spread.biased
    steady = McError(0.025, batches, trades=23, batch_trades=(20, 22, 24, 26))
    assert steady.trades_dispersion == pytest.approx(20.0 / 23.0, rel=1e-12) and not steady.biased
    assert McError(0.0, (0.0,) * 4, trades=0, batch_trades=(0, 0, 0, 0)).trades_dispersion == 0.0


@pytest.mark.parametrize("most", [1.0, 0.1, 0.02])
def test_independent_windows_rarely_look_overdispersed(most):
    """A strategy whose windows trade independently (window k with its own probability p_k, uniform on (0, most);
    70 windows, 8 batches): the counts are Poisson-binomial, variance <= mean, so the dispersion test flags at most
    its 5 % (measured over 4,000 runs: 0 %, 3.7 % and 3.2 %; a rarely trading strategy's counts are nearly
    Poisson)."""
    rng = np.random.default_rng(7)
    flagged = 0
    for _ in range(4000):
        p = rng.uniform(0.0, most, 70)
        counts = (rng.random((8, 70)) < p).sum(axis=1)
        error = McError(0.0, tuple(np.zeros(8)), trades=0, batch_trades=tuple(int(c) for c in counts))
        flagged += error.trades_dispersion > CHI2_95[7]
    assert flagged / 4000 <= 0.05


def test_the_json_summary_and_tables_show_the_band_and_close_calls(tmp_path):
    from marketcast.backtest.markdown import markdown_summary
    from marketcast.backtest.report import symbol_json
    from marketcast.backtest.tables import in_sample_note, in_sample_rows, track_rows

    result = run_backtest(random_bars(200, seed=21), BaselineForecaster(), CONFIG)
    mc = result.monte_carlo
    doc = json.loads(json.dumps(symbol_json(result)))
    simple = doc["strategies"]["simple"]
    assert simple["mc_band"] == mc.strategies["simple"].band and simple["mc_se"] == mc.strategies["simple"].se
    assert simple["close_calls"] == mc.close_calls["simple"] and len(simple["mc_batch_returns"]) == 8
    assert simple["mc_exponent"] == doc["monte_carlo"]["exponent"] == mc.walk_forward.exponent
    assert simple["mc_unreliable"] == mc.strategies["simple"].unreliable
    maxdiff = doc["strategies"]["maxdiff"]  # its offsets carry every earlier window's samples: always flagged
    assert maxdiff["mc_unreliable"] is True and "maxdiff" in doc["monte_carlo"]["unreliable"]
    assert doc["walk_forward"]["mc_band"] == doc["metrics"]["walk_forward_oos_return_mc_band"] == mc.walk_forward.band
    assert doc["monte_carlo"]["batches"] == 8 and doc["monte_carlo"]["samples_per_batch"] == 8
    assert doc["monte_carlo"]["decisions_total"] == 8 * 60
    union = np.any(list(mc.close.values()), axis=0)  # each window once, whichever strategies call it close
    assert doc["monte_carlo"]["close_calls_total"] == int(union.sum()) <= sum(mc.close_calls.values())
    assert doc["monte_carlo"]["close_windows"] == np.flatnonzero(union).tolist()
    assert doc["monte_carlo"]["unreliable"] == mc.unreliable and doc["monte_carlo"]["batch_counts"] == [8, 4, 2]
    assert track_rows(result)[0][-1] == f"±{100 * mc.walk_forward.band:.1f}"
    rows = {row[0].rstrip("*†"): row for row in in_sample_rows(result)}
    assert rows["simple"][-1] == f"±{100 * mc.strategies['simple'].band:.1f}"
    note = in_sample_note(result)
    assert f"simple {mc.close_calls['simple']}" in note and "of 60 decisions differ on a batch" in note
    md = markdown_summary([result])
    assert "| MC ± |" in md and f"±{100 * mc.walk_forward.band:.1f} |" in md


def test_the_run_store_record_keeps_the_band_and_runs_show_prints_it(tmp_path, capsys):
    out = tmp_path / "bt"
    assert main(["backtest", "SP500", "--windows", "40", "--samples", "64", "--context", "128", "--no-spa",
                 "--seeds", "2", "--output-dir", str(out)]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1].split()[-1]
    doc = json.loads((out / "latest" / "SP500.json").read_text())
    band = doc["walk_forward"]["mc_band"]
    assert doc["seeds"]["seeds"] == [0, 1] and len(doc["seeds"]["walk_forward"]["returns"]) == 2
    summary = (out / "latest" / "summary.md").read_text()
    assert f"±{100 * band:.1f}" in summary and "Seeds 0..1: the spread of each return" in summary
    assert main(["runs", "show", run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["records"][0]["walk_forward"]["mc_band"] == pytest.approx(band, rel=1e-12)
    assert main(["runs", "show", run_id]) == 0
    assert f"±{100 * band:.1f}" in capsys.readouterr().out


def test_seeds_below_one_is_one_line_and_exit_2_before_any_work(tmp_path, capsys):
    with pytest.raises(ConfigError, match="--seeds must be a whole number >= 1, got 0"):
        Job(seeds=0).config(None)
    out = tmp_path / "bt"
    assert main(["backtest", "SP500", "--seeds", "0", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--seeds must be a whole number >= 1, got 0" in err
    assert not out.exists()


def test_seed_spread_by_hand():
    class R:
        def __init__(self, seed, returns, wf, mc=None):
            self.config = BacktestConfig(seed=seed)
            self.strategies = {n: type("S", (), {"metrics": {"return": r}})() for n, r in returns.items()}
            self.walk_forward = {"metrics": {"return": wf}}
            self.monte_carlo = mc

    mc = type("M", (), {"strategies": {"a": McError(0.10, (0.0, 0.1, 0.2, 0.3))}, "walk_forward":
                         McError(0.0, (0.0, 0.0, 0.0, 0.0))})()
    block = seed_spread(R(5, {"a": 0.10}, 0.0, mc), [R(6, {"a": 0.30}, 0.0), R(7, {"a": 0.20}, 0.01)])
    a = block["strategies"]["a"]
    assert block["seeds"] == [5, 6, 7] and a["returns"] == [0.10, 0.30, 0.20]
    assert (a["min"], a["max"]) == (0.10, 0.30) and a["sd"] == pytest.approx(0.1)
    assert a["inside_mc_band"] == 2  # band 3.182 * sd(0, .1, .2, .3) = 0.41 covers both
    assert block["walk_forward"]["inside_mc_band"] == 1  # band 0: 0.0 inside, 0.01 not


def _printed(result) -> dict[str, tuple[float, float]]:
    """Each strategy's printed return and MC band, in percent, read back from the table rows."""
    from marketcast.backtest.tables import in_sample_rows

    return {row[0].rstrip("*†"): (float(row[1].rstrip("%")), float(row[-1].lstrip("±")))
            for row in in_sample_rows(result)}


def test_seeds_1_to_3_land_inside_seed_0s_printed_band_on_sp500(tmp_path):
    """The issue's check: ``backtest SP500`` (default settings) with --seed 0..3; every printed strategy return
    inside seed 0's printed MC band for at least 90 % of the 32 strategy x seed pairs. And --seeds 4 reports the
    same four runs."""
    def job(**kw) -> Job:  # the command's defaults
        return Job(symbols=["SP500"], select_lookback=DEFAULT_LOOKBACK, min_trades=DEFAULT_MIN_TRADES, **kw)

    runs = [run_job(job(seed=s, output_dir=tmp_path / str(s))).results[0] for s in range(4)]
    printed = [_printed(r) for r in runs]
    inside = [abs(p[name][0] - printed[0][name][0]) <= printed[0][name][1] for p in printed for name in p]
    assert len(inside) == 32 and sum(inside) >= 29  # 90 % of 32
    together = run_job(job(seeds=4, output_dir=tmp_path / "all")).results[0]
    assert together.seeds["seeds"] == [0, 1, 2, 3]
    for name, spread in together.seeds["strategies"].items():
        assert spread["returns"] == [r.strategies[name].metrics["return"] for r in runs]
    assert together.seeds["walk_forward"]["returns"] == [r.walk_forward["metrics"]["return"] for r in runs]


def test_the_strip_names_the_figures_whose_band_is_unreliable():
    """The MC error cell carries one note, the flagged figures (two, then 'and more') and what to do; the
    verdict's JSON lists them."""
    from marketcast.backtest.verdict import MISSING, build, cells

    v = {"excess_return_points": None, "sharpe_difference": None, "trials": 0, "effective_trials": None,
         "dsr_pick": None, "dsr_walk_forward": None, "pbo": None, "spa_pvalue": None, "coverage80": None,
         "mc_band_points": 8.3, "mc_unreliable": ["ci_guard", "walk-forward"],
         "context": {"asked": 1, "min": None, "max": None}, "pick": None, "pick_reads_forecast": None,
         "walk_forward_blind_share": None, "answer": "no verdict",
         "status": dict.fromkeys(("answer", "vs_buy_hold", "mc_error", "trials", "dsr_pick", "dsr_walk_forward",
                                  "pbo", "spa_p", "coverage80", "context", "pick"), MISSING)}
    text = {c.key: c.text for c in cells(v)}["mc_error"]
    assert text == "±8.3 pts (unreliable for ci_guard, walk-forward: use --seeds)"
    assert {c.key: c.text for c in cells({**v, "mc_unreliable": []})}["mc_error"] == "±8.3 pts"
    three = {c.key: c.text for c in cells({**v, "mc_unreliable": ["simple", "ci_guard", "walk-forward"]})}
    assert three["mc_error"] == "±8.3 pts (unreliable for simple, ci_guard and more: use --seeds)"
    result = run_backtest(random_bars(200, seed=21), BaselineForecaster(), CONFIG)
    assert build(result)["mc_unreliable"] == result.monte_carlo.unreliable


def test_a_run_recorded_before_the_scaling_was_measured_keeps_its_printed_band():
    """The run store rebuilds a record field by field: an old McError has no coarse batches, trades or exponent,
    an old MonteCarlo no ``close``; the band stays t * sqrt(2) * sd * B^-1/4 and nothing is flagged."""
    from marketcast.backtest.montecarlo import MonteCarlo
    from marketcast.runs.codec import decode

    old = {"$dc": "marketcast.backtest.montecarlo:MonteCarlo", "fields": {
        "batches": 4, "samples": 32, "windows": 3, "close_calls": {"simple": 1},
        "strategies": {"simple": {"$dc": "marketcast.backtest.montecarlo:McError",
                                  "fields": {"value": 0.025, "batch_values": {"$tuple": [0.01, 0.03, 0.02, 0.04]}}}},
        "walk_forward": {"$dc": "marketcast.backtest.montecarlo:McError",
                         "fields": {"value": 0.0, "batch_values": {"$tuple": [0.0, 0.0, 0.0, 0.0]}}}}}
    mc = decode(json.dumps(old))
    assert isinstance(mc, MonteCarlo) and mc.close is None and mc.unreliable == []
    sd = math.sqrt(5.0 / 3.0) / 100.0
    assert mc.strategies["simple"].band == pytest.approx(3.182 * math.sqrt(2.0) * sd * 4 ** -0.25, rel=1e-12)
    assert mc.as_dict()["close_calls_total"] is None and mc.as_dict()["batch_counts"] == [4]
    assert mc.note().startswith("simple 1 of 3 decisions")
