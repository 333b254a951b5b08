"""The verdict strip's answer (marketcast.backtest.verdict.answer): one sentence per rule of docs/backtest.md#verdict
on constructed results, the colours a losing record may not earn, and the coverage band in whole windows (70 % and
90 % of the 80 % interval are amber, exactly)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from marketcast.backtest.verdict import AMBER, GREEN, MISSING, RED, build, cells, terminal_lines

# An edge that survives every test: +12 % against buy & hold's +4 %, a higher Sharpe, a narrow band, a forecast
# strategy in every window, DSR 0.97, SPA p 0.01, PBO 0.10.
EDGE = dict(wf_return=0.12, wf_sharpe=2.0, bh_return=0.04, bh_sharpe=1.0, band=0.02, dsr_walk_forward=0.97,
            spa_pvalue=0.01, pbo=0.10, picked=("simple",) * 10, covered=8, n=10, lo=0.49, hi=0.94, unreliable=())


def result(**given):
    """A result as :func:`build` reads one (a SymbolResult or a stored run's decoded one), from :data:`EDGE`
    with ``given`` replacing its figures."""
    f = {**EDGE, **given}
    coverage = {"nominal": 0.8, "rate": f["covered"] / f["n"], "lo": f["lo"], "hi": f["hi"], "n": f["n"],
                "covered": f["covered"], "source": "samples"}
    overfit = SimpleNamespace(pick="simple", trials=6, effective_trials=3.0, dsr_pick=0.5,
                              dsr_walk_forward=f["dsr_walk_forward"], pbo=f["pbo"], spa_pvalue=f["spa_pvalue"])
    return SimpleNamespace(
        walk_forward={"metrics": {"return": f["wf_return"], "sharpe": f["wf_sharpe"]}, "picked": list(f["picked"])},
        benchmark=SimpleNamespace(metrics={"return": f["bh_return"], "sharpe": f["bh_sharpe"]}), overfit=overfit,
        monte_carlo=None if f["band"] is None else SimpleNamespace(walk_forward=SimpleNamespace(band=f["band"]),
                                                                   unreliable=list(f["unreliable"])),
        context_seen=np.full(len(f["picked"]), 512), config=SimpleNamespace(context=512, exit="next-open"),
        calibration_report={"fields": {"close": {"coverage": [coverage]}}})


@pytest.mark.parametrize("given,sentence,status", [
    # 1: nothing to judge
    ({"wf_return": float("nan")}, "no verdict: the walk-forward record or buy & hold has no return", MISSING),
    # 2: the default run's case: lost money while beating a falling buy & hold by 4.61 points
    ({"wf_return": -0.0965, "bh_return": -0.1426, "wf_sharpe": -3.24, "bh_sharpe": -2.34},
     "no edge: the walk-forward record lost 9.65% (buy & hold -14.26%)", RED),
    ({"wf_return": -0.02, "bh_return": -0.10, "wf_sharpe": -0.5, "bh_sharpe": -2.0},  # better on both, still a loss
     "no edge: the walk-forward record lost 2.00% (buy & hold -10.00%)", RED),
    ({"wf_return": 0.0, "bh_return": 0.05}, "no edge: the walk-forward record made nothing (buy & hold +5.00%)", RED),
    # 3: made money, but not more than buy & hold on both return and Sharpe
    ({"wf_return": 0.03, "bh_return": 0.05},
     "no edge over buy & hold: -2.00 pts, Sharpe +1.00 (the walk-forward record made 3.00%)", RED),
    ({"wf_sharpe": 0.5}, "no edge over buy & hold: +8.00 pts, Sharpe -0.50 (the walk-forward record made 12.00%)",
     RED),
    ({"wf_sharpe": 1.0}, "no edge over buy & hold: +8.00 pts, Sharpe +0.00 (the walk-forward record made 12.00%)",
     RED),
    # 4: the record's windows mostly traded a forecast-blind strategy (6 of 10); half is not more than half
    ({"picked": ("buy_hold",) * 6 + ("simple",) * 4},
     "an edge not from the forecast: the walk-forward traded forecast-blind strategies in 60% of windows", AMBER),
    # 5: the band (points) against the smaller margin: 12 % made, 8 points over buy & hold
    ({"band": 0.0801},
     "an edge within Monte Carlo noise: made 12.00%, +8.00 pts over buy & hold, a re-run ±8.0 pts", AMBER),
    ({"unreliable": ["walk-forward"]},  # a narrow band from biased batches clears nothing
     "an edge whose Monte Carlo noise is unmeasured: made 12.00%, +8.00 pts over buy & hold, but the walk-forward "
     "band is unreliable (re-run with --seeds)", AMBER),
    ({"unreliable": ["maxdiff"]},  # another strategy's band: the record's own is trusted, the next rules decide
     "an edge that survives multiple testing: made 12.00%, +8.00 pts over buy & hold, DSR walk-forward 0.97", GREEN),
    ({"wf_return": 0.05, "bh_return": -0.20, "band": 0.06},  # 25 points over buy & hold, but 5 % over nothing
     "an edge within Monte Carlo noise: made 5.00%, +25.00 pts over buy & hold, a re-run ±6.0 pts", AMBER),
    # 6: each selection figure that fails is named with its value; one not computed is said so
    ({"dsr_walk_forward": 0.9499},  # printed to four decimals where two would print the threshold itself
     "an edge that does not survive multiple testing: DSR walk-forward 0.9499 < 0.95", AMBER),
    ({"spa_pvalue": 0.0501}, "an edge that does not survive multiple testing: SPA p 0.0501 > 0.05", AMBER),
    ({"pbo": 0.5001}, "an edge that does not survive multiple testing: PBO 0.5001 > 0.5", AMBER),
    ({"dsr_walk_forward": 0.62, "spa_pvalue": 0.21, "pbo": None},
     "an edge that does not survive multiple testing: DSR walk-forward 0.62 < 0.95, SPA p 0.210 > 0.05, PBO not "
     "computed", AMBER),
    ({"dsr_walk_forward": None}, "an edge that does not survive multiple testing: DSR walk-forward not computed",
     AMBER),
    # 7: every test passed, at the thresholds themselves
    ({}, "an edge that survives multiple testing: made 12.00%, +8.00 pts over buy & hold, DSR walk-forward 0.97",
     GREEN),
    ({"dsr_walk_forward": 0.95, "spa_pvalue": 0.05, "pbo": 0.5, "band": 0.08, "picked": ("buy_hold", "simple") * 5},
     "an edge that survives multiple testing: made 12.00%, +8.00 pts over buy & hold, DSR walk-forward 0.95", GREEN),
    ({"band": None},  # no Monte Carlo error measured: the rule cannot call it noise
     "an edge that survives multiple testing: made 12.00%, +8.00 pts over buy & hold, DSR walk-forward 0.97", GREEN),
])
def test_each_rule_says_its_sentence(given, sentence, status):
    v = build(result(**given))
    assert (v["answer"], v["status"]["answer"]) == (sentence, status)
    assert cells(v)[0].text == sentence and cells(v)[0].status == status  # the first cell on every page
    assert terminal_lines("SP500", v)[0].startswith("[bold]SP500[/bold] verdict ")


@pytest.mark.parametrize("wf,status_vs,status_spa", [(0.12, GREEN, GREEN), (1e-9, GREEN, GREEN), (0.0, AMBER, AMBER),
                                                      (-0.01, AMBER, AMBER)])
def test_a_relative_figure_is_never_green_on_a_record_that_made_no_money(wf, status_vs, status_spa):
    """Beating buy & hold on return and Sharpe with SPA p 0.01: green only where the record made money."""
    v = build(result(wf_return=wf, bh_return=-0.2, wf_sharpe=1.5 if wf > 0 else -0.5, bh_sharpe=-3.0))
    assert v["excess_return_points"] > 0 and v["sharpe_difference"] > 0
    assert (v["status"]["vs_buy_hold"], v["status"]["spa_p"]) == (status_vs, status_spa)


@pytest.mark.parametrize("covered,n,status", [
    (49, 70, AMBER), (63, 70, AMBER),  # exactly 70 % and 90 % (0.7 - 0.8 is -0.10000000000000009 in floats)
    (7, 10, AMBER), (9, 10, AMBER), (7000, 10000, AMBER), (9000, 10000, AMBER),
    (6999, 10000, RED), (9001, 10000, RED), (69, 100, RED), (91, 100, RED), (48, 70, RED), (64, 70, RED),
])
def test_coverage_is_amber_within_10_points_of_80_percent_counted_in_whole_windows(covered, n, status):
    """The Wilson interval (lo, hi) is made to miss 80 % so that only the 10-point band decides."""
    lo, hi = (0.60, 0.79) if covered / n < 0.8 else (0.81, 0.95)
    assert build(result(covered=covered, n=n, lo=lo, hi=hi))["status"]["coverage80"] == status


@pytest.mark.parametrize("lo,hi,status", [(0.70, 0.80, GREEN), (0.80, 0.90, GREEN), (0.70, 0.7999, AMBER)])
def test_coverage_is_green_where_its_wilson_interval_holds_80_percent(lo, hi, status):
    assert build(result(covered=49, n=70, lo=lo, hi=hi))["status"]["coverage80"] == status
