"""Issue 54's check of the Monte Carlo error against re-runs, on the embedded SP500 and NASDAQ (default
settings, the default exit rule next-open, seeds 0-9; benchmarks/mc_seed_check.py writes the same figures, with an
earlier period and a heavy-tailed synthetic series, to benchmarks/results/mc_seed_check.json for docs/backtest.md).

* pooled over the figures (each strategy and the walk-forward record) and the 90 ordered seed pairs, the share
  of other seeds' returns inside a seed's band is 90-98 %;
* no figure's band (median over the seeds) is narrower than 1.5 times the seed-to-seed sd of its return unless
  the figure is flagged unreliable in most seeds (never too narrow), nor wider than 4 (SP500's entry_takeprofit
  3.60, its widest unflagged figure). Before the band read the exponent combined with 1/4
  (:func:`marketcast.backtest.montecarlo.rate`) and flagged maxdiff for the samples its offsets carry,
  entry_takeprofit ran 4.59, maxdiff 5.30 (flagged in 3 of 10) and the walk-forward record 4.04; before each
  figure's line ran through its finest spread, entry_takeprofit 4.09 (docs/backtest.md);
* windows a seed calls close (its side on a batch of 64 samples differs from the run's) have their side differ
  in another seed at least twice as often as the other windows.

Before the exponent was fitted to bias-corrected log sds the default rule pooled 88.0 % (SP500) and 84.9 %
(NASDAQ), NASDAQ's highlow and walk-forward bands 1.4 seed sds. Under ``--exit close`` the bands now run wide
(pooled 97.3 % and 99.0 %, unflagged bands 3.97-5.54 seed sds): that rule keeps the one-sided bounds, never too
narrow.
"""

import pytest

from marketcast.data.embedded import load_embedded

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.execution import DEFAULT_EXIT
from marketcast.backtest.seed_check import RATIO, check, seed_runs

SYMBOLS = ("SP500", "NASDAQ")


@pytest.fixture(scope="module")
def checks() -> dict:
    return {symbol: check(seed_runs(load_embedded(symbol), config=BacktestConfig(spa=False))) for symbol in SYMBOLS}


@pytest.fixture(scope="module")
def close_checks() -> dict:
    config = BacktestConfig(spa=False, exit="close")
    return {symbol: check(seed_runs(load_embedded(symbol), config=config)) for symbol in SYMBOLS}


def test_the_check_runs_the_default_exit_rule():
    assert BacktestConfig().exit == DEFAULT_EXIT == "next-open"


@pytest.mark.parametrize("symbol", ["SP500", "NASDAQ"])
def test_pooled_coverage_of_other_seeds_is_90_to_98_percent(checks, symbol):
    assert 0.90 <= checks[symbol]["coverage"] <= 0.98


@pytest.mark.parametrize("symbol", ["SP500", "NASDAQ"])
def test_the_bands_not_flagged_cover_at_least_95_percent(checks, symbol):
    """The bands the strip shows without a flag hold what they say (95 %) or more: 99.1 % (SP500), 97.6 %
    (NASDAQ); 97.8 % on the earlier period and 96.4 % on the Student-t series (docs/backtest.md)."""
    assert checks[symbol]["coverage_unflagged"] >= 0.95


@pytest.mark.parametrize("symbol", ["SP500", "NASDAQ"])
def test_close_calls_flip_at_least_twice_as_often_as_the_other_windows(checks, symbol):
    c = checks[symbol]
    assert 0.0 < c["close_share"] < 1.0  # both kinds of window occur
    assert c["flip_rate_close"] >= 2.0 * c["flip_rate_other"]


def misses(figures: dict, bounds: tuple[float, float] = RATIO) -> list[str]:
    """The figures whose median band lies outside ``bounds`` times the seed sd and that are not flagged in most
    seeds (a figure that never moved across the seeds passes with a band of 0)."""
    out = []
    for name, f in figures.items():
        flagged = 2 * f["flagged"] > f["seeds"]
        still = f["seed_sd"] < 1e-12  # never moved (buy & hold: the same fills whatever the samples)
        inside = f["band_median"] < 1e-12 if still else bounds[0] <= f["ratio"] <= bounds[1]
        if not (inside or flagged):
            out.append(name)
    return out


def test_every_band_lies_within_1_5_to_4_seed_sds_unless_flagged(checks):
    """Issue 54's "1.5-4 seed sds or flagged", with coverage 90-98 % (the test above); maxdiff is flagged in
    every seed. Before each figure's line ran through its finest spread (:func:`scaled`) instead of the centre
    of all three, SP500's entry_takeprofit ran 4.09 seed sds, flagged in 5 of 10 seeds (docs/backtest.md). A
    change that narrows or widens them must say so in the docs."""
    for symbol, c in checks.items():
        assert misses(c["figures"]) == [], symbol
        assert 0.90 <= c["coverage"] <= 0.98
        assert c["figures"]["maxdiff"]["flagged"] == c["figures"]["maxdiff"]["seeds"]


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_under_exit_close_no_band_is_too_narrow(close_checks, symbol):
    """``--exit close``: coverage at least 90 % and no unflagged band under 1.5 seed sds (they run wide there:
    the module docstring)."""
    assert close_checks[symbol]["coverage"] >= 0.90
    assert misses(close_checks[symbol]["figures"], (RATIO[0], float("inf"))) == []
