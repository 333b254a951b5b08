"""Issue 54's check of the Monte Carlo error against re-runs, on the embedded SP500 and NASDAQ (default
settings, the default exit rule next-open, seeds 0-9; benchmarks/mc_seed_check.py writes the same figures, with an
earlier period and a heavy-tailed synthetic series, to benchmarks/results/mc_seed_check.json for docs/backtest.md).

* pooled over the figures (each strategy and the walk-forward record) and the 90 ordered seed pairs, the share
  of other seeds' returns inside a seed's band is 90-98 %;
* no figure's band (median over the seeds) is narrower than 1.5 times the seed-to-seed sd of its return unless
  the figure is flagged unreliable in most seeds: never too narrow. The issue's upper bound (4 seed sds) does not
  hold: SP500's entry_takeprofit (4.59 seed sds, flagged in 5 of 10 seeds) and maxdiff (5.30, 3 of 10) are too
  wide and unflagged, and stay so against 40 seeds' sd (4.29 and 6.15), so it is not the 10-seed sd's own noise
  (its 90 % interval, sigma / s in 0.73-1.65 with 9 dof); so is the walk-forward record, as the loop trades the
  picks (4.04, 5 of 10; 3.30 against 40 seeds' sd). The cause (docs/backtest.md): the error does not fall
  as a power of the samples: full runs' seed sd is flat from 32 to 128 samples and drops 1.2-1.7 times to 256,
  which no line through batches of 32-128 samples can see, nor the delete-half jackknife over 7 balanced
  half-sample pairs (``halves`` in the results file: maxdiff 4.98 seed sds);
* windows a seed calls close (its side on a batch of 64 samples differs from the run's) have their side differ
  in another seed at least twice as often as the other windows.

Before the exponent was fitted to bias-corrected log sds the default rule pooled 88.0 % (SP500) and 84.9 %
(NASDAQ), NASDAQ's highlow and walk-forward bands 1.4 seed sds. Under ``--exit close`` the bands now run wide
(pooled 98.0-98.3 %, unflagged bands 3.9-5.1 seed sds): that rule keeps the one-sided bounds, never too narrow.
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


def test_no_band_is_narrower_than_1_5_seed_sds_unless_flagged(checks):
    """What holds of issue 54's "1.5-4 seed sds or flagged": the lower bound (with coverage 90-98 %, the test
    above). The upper bound does not: the figures that run wider than 4 seed sds unflagged are measured here,
    SP500's entry_takeprofit (4.59, flagged in 5 of 10 seeds), maxdiff (5.30, 3 of 10) and the walk-forward record
    (4.04, 5 of 10; 3.30 against 40 seeds' sd); NASDAQ's none (module docstring, docs/backtest.md). A change that
    narrows or widens them must say so in the docs."""
    for symbol, c in checks.items():
        assert misses(c["figures"], (RATIO[0], float("inf"))) == [], symbol
        assert 0.90 <= c["coverage"] <= 0.98
    too_wide = [(symbol, name) for symbol, c in checks.items() for name in misses(c["figures"], (0.0, RATIO[1]))]
    assert too_wide == [("SP500", "entry_takeprofit"), ("SP500", "maxdiff"), ("SP500", "walk-forward")]


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_under_exit_close_no_band_is_too_narrow(close_checks, symbol):
    """``--exit close``: coverage at least 90 % and no unflagged band under 1.5 seed sds (they run wide there:
    the module docstring)."""
    assert close_checks[symbol]["coverage"] >= 0.90
    assert misses(close_checks[symbol]["figures"], (RATIO[0], float("inf"))) == []
