"""Multiple-testing statistics (marketcast.backtest.overfit) against known answers: the deflated Sharpe
paper's own example, hand-computed CSCV splits, and seeded synthetic returns with and without an edge."""

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from marketcast.backtest import BacktestConfig, run_backtest
from marketcast.backtest.markdown import markdown_summary
from marketcast.backtest.overfit import (
    SelectionStats, cscv, deflated_sharpe, expected_max_sharpe, moments, series_dsr, spa_test,
)
from marketcast.backtest.report import symbol_json
from marketcast.backtest.stats import probabilistic_sharpe
from marketcast.backtest.tables import selection_rows
from marketcast.commands import main
from marketcast.errors import ConfigError
from marketcast.forecast.registry import load_forecaster
from tests.backtest.helpers import random_bars


def test_dsr_reproduces_the_papers_numerical_example():
    """Bailey & López de Prado (2014), "A numerical example": annualised SR 2.5 over T = 1,250 daily returns
    (250 a year), skewness -3, kurtosis 10, N = 100 trials whose annualised Sharpe ratios have variance 1/2.
    The paper gets SR0 = 0.1132 per day and DSR = 0.9004."""
    sr0_annual = expected_max_sharpe(100, 0.5)
    # by hand: sqrt(1/2) * ((1 - g) Z^-1(0.99) + g Z^-1(1 - 1/(100 e))), Z^-1(0.99) = 2.32635, Z^-1(0.99632) = 2.68021
    g = 0.5772156649015329
    by_hand = math.sqrt(0.5) * ((1 - g) * sps.norm.ppf(0.99) + g * sps.norm.ppf(1 - 1 / (100 * math.e)))
    assert sr0_annual == pytest.approx(by_hand, rel=1e-12) and sr0_annual == pytest.approx(1.7894, abs=1e-4)
    sr0 = sr0_annual / math.sqrt(250)
    assert sr0 == pytest.approx(0.1132, abs=1e-4)
    sr = 2.5 / math.sqrt(250)  # 0.1581 per day
    z = (sr - sr0) * math.sqrt(1250 - 1) / math.sqrt(1 + 3 * sr + (10 - 1) / 4 * sr**2)
    assert z == pytest.approx(1.2838, abs=1e-4)
    dsr = deflated_sharpe(sr, 1250, -3.0, 10.0, sr0)
    assert dsr == pytest.approx(sps.norm.cdf(z), rel=1e-12)
    assert dsr == pytest.approx(0.9004, abs=5e-5)


def test_one_trial_deflates_nothing_so_dsr_is_the_psr():
    """With one trial SR0 is 0 and the DSR is the PSR of marketcast.backtest.stats; moments are scipy's."""
    r = np.random.default_rng(5).normal(0.001, 0.01, 250)
    assert expected_max_sharpe(1, 0.7) == 0.0
    assert series_dsr(r, 0.0) == pytest.approx(probabilistic_sharpe(r), rel=1e-12)
    sr, skew, kurt = moments(r)
    assert sr == pytest.approx(r.mean() / r.std(ddof=1)) and skew == pytest.approx(sps.skew(r), rel=1e-10)
    assert kurt == pytest.approx(sps.kurtosis(r, fisher=False), rel=1e-10)
    assert moments(np.zeros(20)) is None and series_dsr(np.zeros(20), 0.0) is None


def test_cscv_by_hand():
    """T = 4 windows, S = 2 blocks (rows 0-1, rows 2-3), so 2 splits. A is better in block 0 and B in block 1:
    each split's in-sample best is the worst out of sample, rank 1 of 2, w = 1/3, logit log(1/2): PBO 1.
    A strategy best in both blocks is best out of sample, rank 2, w = 2/3, logit log 2: PBO 0."""
    swapped = np.array([[0.01, 0.00], [0.03, 0.01], [-0.01, 0.02], [0.01, 0.04]])  # SRs: A 1.41 / 0, B 0.71 / 2.12
    found = cscv(swapped, 2)
    assert found.pbo == 1.0 and found.logits == pytest.approx([math.log(0.5)] * 2)
    steady = np.array([[0.02, 0.00], [0.04, 0.01], [0.02, 0.00], [0.04, 0.01]])
    found = cscv(steady, 2)
    assert found.pbo == 0.0 and found.logits == pytest.approx([math.log(2)] * 2)
    assert cscv(np.column_stack([swapped[:, 0], np.zeros(4)]), 2) is None  # one strategy that varies


def test_pbo_near_zero_for_a_real_edge_and_above_half_for_noise():
    """16 strategies x 400 windows of N(0, 1 %) noise; S = 16 gives C(16, 8) = 12,870 splits."""
    noise = np.random.default_rng(1).normal(0.0, 0.01, (400, 16))
    luck = cscv(noise, 16)
    assert len(luck.logits) == 12870
    assert luck.pbo == pytest.approx(8763 / 12870) and luck.pbo > 0.5  # 0.681
    edge = noise.copy()
    edge[:, 3] += 0.003  # a per-window Sharpe of 0.3 for one strategy
    real = cscv(edge, 16)
    assert real.pbo == pytest.approx(226 / 12870) and real.pbo < 0.02  # 0.018


def test_spa_p_value_small_for_a_planted_edge_and_large_for_noise():
    """8 strategies against buy and hold over 500 windows, arch's stationary bootstrap, seed 0."""
    rng = np.random.default_rng(1)
    rng.normal(0.0, 0.01, (400, 16))  # the draws of the PBO test, so these are fresh
    held = rng.normal(0.0, 0.01, 500)
    models = rng.normal(0.0, 0.01, (500, 8))
    noise = spa_test(held, models, reps=1000, seed=0)
    assert noise == {"spa_pvalue": 0.766, "reality_check_pvalue": 0.766, "spa_block_size": 22}
    models[:, 2] += 0.004
    assert spa_test(held, models, reps=1000, seed=0)["spa_pvalue"] == 0.0
    assert spa_test(held[:9], models[:9], reps=100) is None  # fewer than 10 windows


@pytest.mark.parametrize("splits", [15, 0, 72])
def test_bad_cscv_splits_are_config_errors(splits):
    with pytest.raises(ConfigError, match="--cscv-splits must be an even number from 2 to the 70 windows"):
        BacktestConfig(windows=70, cscv_splits=splits)


def test_bad_cscv_splits_on_the_command_line_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["backtest", "--windows", "12", "--cscv-splits", "14", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cscv-splits must be an even number from 2 to the 12 windows, got 14" in err[0]
    assert not out.exists()


def test_the_sentence_names_the_trials_and_both_figures():
    stats = SelectionStats(8, 0.01, 1.5, "simple", 0.41, 0.2, 0.62, 16, 12870, 0.3, 0.3, 8, 1000)
    assert stats.verdict() == "the best of 8 strategies is not distinguishable from luck (DSR 0.41, PBO 0.62)"
    fine = SelectionStats(8, 0.01, 1.5, "simple", 0.97, 0.96, 0.2, 16, 12870, 0.01, 0.01, 8, 1000)
    assert fine.verdict() is None and fine.as_dict()["verdict"] is None


def test_a_backtest_reports_them_in_every_output():
    """Random-walk bars, the baseline model: figures recomputed here from the result's own series."""
    bars = random_bars(200, seed=3)
    result = run_backtest(bars, load_forecaster("baseline"), BacktestConfig(windows=64, num_samples=32, context=32))
    o = result.overfit
    returns = {n: r.returns for n, r in result.strategies.items()}
    sharpes = [moments(r)[0] for r in returns.values() if moments(r) is not None]
    sr0 = expected_max_sharpe(8, np.var(sharpes, ddof=1))
    assert o.trials == 8 and o.expected_max_sharpe == pytest.approx(sr0 * math.sqrt(252))
    assert o.dsr_walk_forward == pytest.approx(series_dsr(result.walk_forward["returns"], sr0))
    assert o.pick == result.best_strategy
    assert o.dsr_pick == (None if o.pick is None else pytest.approx(series_dsr(returns[o.pick], sr0)))
    matrix = np.column_stack(list(returns.values()))
    assert o.cscv_splits == 16 and o.pbo == cscv(matrix, 16).pbo
    assert o.spa_pvalue == spa_test(result.benchmark.returns, matrix, 1000, 0)["spa_pvalue"]
    doc = json.loads(json.dumps(symbol_json(result)))
    assert doc["selection"]["trials"] == 8 and doc["selection"]["pbo"] == o.pbo
    assert doc["selection"]["verdict"] == o.verdict() and doc["config"]["cscv_splits"] is None
    assert selection_rows(result)[0][0] == "8" and selection_rows(result)[0][4] == "16"
    md = markdown_summary([result])
    assert "### Multiple testing: is the best better than luck?" in md and "| 8 | " in md
    small = run_backtest(bars, load_forecaster("baseline"),
                         BacktestConfig(windows=9, num_samples=32, context=32, spa=False))
    assert small.overfit.cscv_splits == 8 and small.overfit.spa_pvalue is None  # 16 blocks need 16 windows
