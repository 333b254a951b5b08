"""Multiple-testing statistics (marketcast.backtest.overfit) against known answers: the deflated Sharpe
paper's own example, hand-computed CSCV splits, seeded synthetic returns with and without an edge, CSCV under
the selection rule against a loop-by-loop reference, Li & Ji's effective trials, and the sentence's wording."""

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from marketcast.backtest import BacktestConfig, run_backtest
from marketcast.backtest.markdown import markdown_summary
from marketcast.backtest.overfit import (
    SelectionStats, _halves, cscv, deflated_sharpe, effective_trials, expected_max_sharpe, luck_sentence, moments,
    series_dsr, spa_test,
)
from marketcast.backtest.report import symbol_json
from marketcast.backtest.selection import SelectionRule
from marketcast.backtest.stats import probabilistic_sharpe
from marketcast.backtest.tables import selection_note, selection_rows, selection_verdict
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
    """8 strategies against buy and hold over 500 windows, the stationary bootstrap, seed 0: within Monte Carlo
    error of arch's SPA (seed 0, its own random numbers), each p-value with its MC standard error."""
    from arch.bootstrap import SPA

    rng = np.random.default_rng(1)
    rng.normal(0.0, 0.01, (400, 16))  # the draws of the PBO test, so these are fresh
    held = rng.normal(0.0, 0.01, 500)
    models = rng.normal(0.0, 0.01, (500, 8))
    noise = spa_test(held, models, seed=0)
    reference = SPA(-held, -models, reps=1900, bootstrap="stationary", seed=0)
    reference.compute()
    assert set(noise) == {"spa_pvalue", "reality_check_pvalue", "spa_block_size", "spa_mc_error",
                          "reality_check_mc_error"}
    assert noise["spa_block_size"] == reference.block_size == 22 and noise["spa_pvalue"] > 0.5
    for key, ref in (("spa_pvalue", "consistent"), ("reality_check_pvalue", "upper")):
        p = reference.pvalues[ref]
        assert abs(noise[key] - p) <= 4 * math.sqrt(2 * p * (1 - p) / 1900)
    assert noise["spa_mc_error"] == pytest.approx(math.sqrt(noise["spa_pvalue"] * (1 - noise["spa_pvalue"]) / 1900))
    models[:, 2] += 0.004
    edge = spa_test(held, models, seed=0)
    assert edge["spa_pvalue"] == 0.0 and edge["spa_mc_error"] == 0.0
    assert spa_test(held[:9], models[:9], reps=100) is None  # fewer than 10 windows


@pytest.mark.parametrize("splits", [2, 4, 6, 10, 16])
def test_cscv_halves_are_itertools_combinations_in_order(splits):
    combos = list(itertools.combinations(range(splits), splits // 2))
    assert [tuple(np.flatnonzero(row)) for row in _halves(splits)] == combos


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


def _sharpe(r: np.ndarray) -> float:
    sd = r.std(ddof=1)
    return 0.0 if sd == 0 else float(r.mean() / sd)


def _rule_cscv_by_loops(m: np.ndarray, filled: np.ndarray, splits: int, min_trades: int) -> tuple[float, int]:
    """CSCV under the selection rule, written out one split at a time (the reference): the candidates have
    min_trades fills in the in-sample half; the winner has the highest compounded return there (np.prod, as
    SelectionRule.pick), then the higher Sharpe, then the first listed; its out-of-sample rank by the same key
    among the same candidates; splits with fewer than two candidates are not counted."""
    blocks = np.array_split(np.arange(len(m)), splits)
    trials = [j for j in range(m.shape[1]) if filled[:, j].any()]
    logits = []
    for half in itertools.combinations(range(splits), splits // 2):
        ins = np.concatenate([blocks[b] for b in half])
        outs = np.setdiff1d(np.arange(len(m)), ins)
        candidates = [j for j in trials if filled[ins, j].sum() >= min_trades]
        if len(candidates) < 2:
            continue
        key = lambda rows, j: (float(np.prod(1 + m[rows, j])), _sharpe(m[rows, j]))  # noqa: E731
        winner = max(candidates, key=lambda j: (*key(ins, j), -j))
        chosen = key(outs, winner)
        below = sum(key(outs, j) < chosen for j in candidates)
        same = sum(key(outs, j) == chosen for j in candidates)
        w = (below + (same + 1) / 2) / (len(candidates) + 1)
        logits.append(math.log(w / (1 - w)))
    return float(np.mean(np.array(logits) <= 0)), len(logits)


def test_the_issues_reproducer_gives_a_high_pbo_once_the_flat_strategy_is_no_trial():
    """Issue 42: 8 losing strategies (70 windows), one of them flat and never filled. Ranked by Sharpe among all
    eight the flat one 'wins' in sample and PBO reads 0.013; under the rule (it never trades, so it is never a
    candidate) PBO is that of the seven that trade: the loop-by-loop reference, and above 0.4."""
    rng = np.random.default_rng(0)
    m = rng.normal(-0.004, 0.01, (70, 8))
    m[:, 1] = 0
    filled = np.ones(m.shape, dtype=bool)
    filled[:, 1] = False
    assert cscv(m, 16).pbo == pytest.approx(164 / 12870)  # the matrix-only path: 0.013, as the issue says
    found = cscv(m, 16, filled, 10)
    assert found.pbo >= 0.4 and found.counted == found.combinations == 12870
    assert (cscv(m, 10, filled, 10).pbo, 252) == _rule_cscv_by_loops(m, filled, 10, 10)  # C(10, 5) splits by loop
    seven = np.delete(m, 1, axis=1)  # the same PBO without the flat column at all
    assert cscv(seven, 16, np.ones(seven.shape, dtype=bool), 10).pbo == found.pbo


def test_a_planted_edge_among_16_strategies_still_gives_a_pbo_near_zero_under_the_rule():
    noise = np.random.default_rng(1).normal(0.0, 0.01, (400, 16))
    edge = noise.copy()
    edge[:, 3] += 0.003
    every = np.ones(edge.shape, dtype=bool)
    assert cscv(edge, 16, every, 10).pbo <= 0.05
    assert cscv(noise, 16, every, 10).pbo > 0.5


def test_cscv_under_the_rule_matches_the_reference_with_sparse_fills_ties_and_uncounted_splits():
    """Strategy 0 trades only in the first half of the windows and 1 only in the second, so some splits have a
    single candidate (not counted); 2 trades now and then; 3 never (no trial); 4 is a copy of 5 (ties)."""
    rng = np.random.default_rng(4)
    t = 64
    filled = np.zeros((t, 6), dtype=bool)
    filled[:32, 0] = True
    filled[32:, 1] = True
    filled[:, 2] = rng.random(t) < 0.2
    filled[:, 4] = filled[:, 5] = rng.random(t) < 0.15
    m = np.where(filled, rng.normal(0.0, 0.01, (t, 6)), 0.0)
    m[:, 4] = m[:, 5]
    found = cscv(m, 8, filled, 5)
    assert 0 < found.counted < found.combinations == 70
    assert (found.pbo, found.counted) == _rule_cscv_by_loops(m, filled, 8, 5)
    assert cscv(m, 8, np.zeros(m.shape, dtype=bool), 1) is None  # nothing trades: no split to count
    assert cscv(m, 8, filled, 40) is None  # no half holds 40 trades of any strategy


def _li_ji(matrix: np.ndarray) -> float:
    """Li & Ji (2005), equation for M_eff, from numpy's eigenvalues of the correlation matrix."""
    eigen = np.abs(np.linalg.eigvals(np.corrcoef(matrix.T)).real)
    return float(sum((1.0 if x >= 1 else 0.0) + x - math.floor(x) for x in eigen))


def test_strategies_sharing_one_signal_count_as_fewer_trials():
    rng = np.random.default_rng(2)
    signal = rng.normal(0.0, 0.01, (250, 1))
    shared = signal + rng.normal(0.0, 0.002, (250, 8))  # one common factor and a little noise each
    independent = rng.normal(0.0, 0.01, (250, 8))
    assert effective_trials(shared) == pytest.approx(_li_ji(shared), abs=1e-9) and effective_trials(shared) < 2.5
    assert effective_trials(independent) == pytest.approx(_li_ji(independent), abs=1e-9)
    assert effective_trials(independent) == pytest.approx(8.0, abs=1e-9)  # every eigenvalue below 2: exactly N
    assert effective_trials(np.repeat(signal, 8, axis=1)) == pytest.approx(1.0)
    assert effective_trials(np.column_stack([independent[:, :3], np.zeros(250)])) == pytest.approx(4.0)


def test_expected_max_sharpe_takes_a_fractional_count_floored_at_zero():
    assert expected_max_sharpe(1.0, 1.0) == 0.0 and expected_max_sharpe(1.2, 1.0) == 0.0
    g = 0.5772156649015329
    for n in (1.5, 2.0, 4.3):
        z = (1 - g) * sps.norm.ppf(1 - 1 / n) + g * sps.norm.ppf(1 - 1 / (n * math.e))
        assert expected_max_sharpe(n, 0.25) == pytest.approx(0.5 * max(z, 0.0), rel=1e-12)
    assert 0 < expected_max_sharpe(1.5, 1.0) < expected_max_sharpe(2.0, 1.0) < expected_max_sharpe(4.3, 1.0)


def _psr_by_hand(r: np.ndarray) -> float:
    """Bailey & López de Prado (2012), the probabilistic Sharpe ratio against 0, with scipy's moments."""
    sr = r.mean() / r.std(ddof=1)
    g3, g4 = sps.skew(r), sps.kurtosis(r, fisher=False)
    return float(sps.norm.cdf(sr * math.sqrt(len(r) - 1) / math.sqrt(1 - g3 * sr + (g4 - 1) / 4 * sr**2)))


def _stats(**changes) -> SelectionStats:
    base = {"strategies": 8, "trials": 7, "effective_trials": 4.3, "sharpe_variance": 0.01,
            "expected_max_sharpe": 1.5, "pick": "simple", "pick_return": 0.05, "min_trades": 10, "dsr_pick": 0.41,
            "psr_walk_forward": 0.3, "dsr_walk_forward": 0.3, "walk_forward_rules": 1, "pbo": 0.62,
            "cscv_splits": 16, "cscv_combinations": 12870, "cscv_counted": 12870, "spa_pvalue": 0.3,
            "reality_check_pvalue": 0.3, "spa_block_size": 8, "spa_intraday_pvalue": 0.2,
            "spa_intraday_block_size": 8, "spa_cash_pvalue": 0.1, "spa_cash_block_size": 8, "spa_reps": 1000}
    return SelectionStats(**{**base, **changes})


def test_the_sentence_says_what_the_figures_say():
    assert _stats().verdict() == ("the best of 7 eligible strategies (4.3 effective), simple, is not "
                                  "distinguishable from luck (DSR 0.41, PBO 0.62)")
    assert _stats(dsr_pick=0.97, pbo=0.2).verdict() is None and _stats(dsr_pick=0.97, pbo=0.2).as_dict()["verdict"] is None
    loses = _stats(pick_return=-0.0721, dsr_pick=0.0, pbo=0.09).verdict()
    assert loses == ("the best of 7 eligible strategies (4.3 effective), simple, loses money (-7.21%): no edge to "
                     "test (DSR 0.00, PBO 0.09)")
    nobody = _stats(trials=0, effective_trials=None, pick=None, pick_return=None, dsr_pick=None, pbo=0.62).verdict()
    assert nobody == ("no strategy has the 10 trades the rule needs, so none is picked; PBO 0.62 is above 0.5: the "
                      "in-sample winner is below the out-of-sample median more often than not")
    assert _stats(trials=0, pick=None, pick_return=None, pbo=None).verdict() == (
        "no strategy has the 10 trades the rule needs, so none is picked")
    alone = _stats(trials=1, effective_trials=1.0, pick_return=-0.01, dsr_pick=0.2, pbo=None).verdict()
    assert alone == "the only trial, simple, loses money (-1.00%): no edge to test (DSR 0.20)"
    assert luck_sentence(100, "cells", 0.41, 0.55) == "the best of 100 cells is not distinguishable from luck (DSR 0.41, PBO 0.55)"
    assert luck_sentence(100, "cells", 0.97, 0.2) is None


def test_a_backtest_reports_them_in_every_output():
    """Random-walk bars, the baseline model: figures recomputed here from the result's own series."""
    bars = random_bars(200, seed=3)
    result = run_backtest(bars, load_forecaster("baseline"), BacktestConfig(windows=64, num_samples=32, context=32))
    o = result.overfit
    need = result.config.selection.min_trades
    returns = {n: r.returns for n, r in result.strategies.items()}
    filled = {n: r.filled for n, r in result.strategies.items()}
    eligible = [n for n in returns if filled[n].sum() >= need]
    chosen = np.column_stack([returns[n] for n in eligible])
    assert 2 <= len(eligible) < 8  # a strategy below min_trades is no trial
    assert (o.strategies, o.trials, o.min_trades) == (8, len(eligible), need)
    assert o.effective_trials == pytest.approx(_li_ji(chosen), abs=1e-9) and o.effective_trials < len(eligible)
    sharpes = [moments(returns[n])[0] for n in eligible]
    sr0 = expected_max_sharpe(o.effective_trials, np.var(sharpes, ddof=1))
    assert o.expected_max_sharpe == pytest.approx(sr0 * math.sqrt(252))
    assert o.pick == result.best_strategy and o.pick in eligible
    assert o.dsr_pick == pytest.approx(series_dsr(returns[o.pick], sr0))
    assert o.pick_return == pytest.approx(np.prod(1 + returns[o.pick]) - 1)
    wf = np.asarray(result.walk_forward["returns"])  # one pre-declared rule: its DSR is its PSR against 0
    assert o.walk_forward_rules == 1
    assert o.dsr_walk_forward == o.psr_walk_forward == pytest.approx(_psr_by_hand(wf), rel=1e-9)
    matrix = np.column_stack(list(returns.values()))
    fills = np.column_stack(list(filled.values()))
    assert o.cscv_splits == 16 and o.pbo == cscv(matrix, 16, fills, need).pbo  # the rule's CSCV (tested above)
    frame = bars.frame  # the three SPA benchmarks: close -> close and intraday buy & hold (bar t+1), cash
    settle = frame.index.get_indexer(result.settle_times)
    c = result.costs.per_side
    intraday = (1 - c) ** 2 * frame["close"].to_numpy()[settle] / frame["open"].to_numpy()[settle] - 1
    assert result.benchmark.intraday == pytest.approx(intraday, rel=1e-12)
    for key, bench in (("spa", result.benchmark.returns), ("spa_intraday", intraday), ("spa_cash", np.zeros(64))):
        test = spa_test(bench, chosen, 1900, 0)  # resamples for the p's own MC error, not --bootstrap-reps
        assert getattr(o, f"{key}_pvalue") == test["spa_pvalue"]
        assert getattr(o, f"{key}_mc_error") == test["spa_mc_error"]
    assert o.reality_check_mc_error == spa_test(result.benchmark.returns, chosen)["reality_check_mc_error"]
    assert o.spa_reps == 1900 and result.config.bootstrap_reps == 1000
    doc = json.loads(json.dumps(symbol_json(result)))
    assert doc["selection"]["trials"] == len(eligible) and doc["selection"]["pbo"] == o.pbo
    assert doc["selection"]["effective_trials_method"] == "eigenvalues, Li & Ji 2005"
    assert doc["selection"]["psr_walk_forward"] == o.psr_walk_forward
    assert doc["selection"]["spa_intraday_pvalue"] == o.spa_intraday_pvalue
    assert doc["selection"]["spa_intraday_mc_error"] == o.spa_intraday_mc_error
    assert doc["selection"]["verdict"] == o.verdict() and doc["config"]["cscv_splits"] is None
    row = selection_rows(result)[0]
    assert row[0] == f"{o.effective_trials:.1f} of {len(eligible)}" and row[5] == "16"
    assert row[2] == row[3] == f"{o.psr_walk_forward:.2f}"
    assert row[6:] == [f"{p:.3f}" for p in (o.spa_pvalue, o.spa_intraday_pvalue, o.spa_cash_pvalue)]
    md = markdown_summary([result])
    assert "### Multiple testing: is the best better than luck?" in md and f"| {row[0]} | " in md
    assert "| WF PSR | WF DSR |" in md and "SPA o→c" in md
    errors = (f"1,900 stationary-bootstrap resamples, blocks of 8/8/8; p ± its Monte Carlo error: c→c "
              f"{o.spa_pvalue:.3f} ± {o.spa_mc_error:.3f}, o→c {o.spa_intraday_pvalue:.3f} ± "
              f"{o.spa_intraday_mc_error:.3f}, cash {o.spa_cash_pvalue:.3f} ± {o.spa_cash_mc_error:.3f})")
    assert errors in selection_note(result) and errors in md
    assert (selection_verdict(result) is None) == (o.verdict() is None)
    small = run_backtest(bars, load_forecaster("baseline"),
                         BacktestConfig(windows=9, num_samples=32, context=32, spa=False,
                                        selection=SelectionRule(min_trades=3)))
    assert small.overfit.cscv_splits == 8 and small.overfit.spa_pvalue is None  # 16 blocks need 16 windows
    assert small.overfit.spa_intraday_pvalue is None and small.overfit.spa_cash_pvalue is None
