"""The promotion test may be asked after every cycle: under the null its false-promotion rate stays at most
alpha however often it is checked (simulated, 2,000 runs), a planted edge promotes within the days
docs/trading.md quotes, and its e-value is the scale-invariant Bayes factor computed by numerical integration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import nct, norm
from scipy.stats import t as student

from marketcast.trade.journal import sequential
from marketcast.trade.journal.shadow import Verdict

RUNS, DAYS, ALPHA = 2000, 500, 0.05


def first_promotion(daily: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """The day (1-based) each run is first promoted when the test is asked after every day; inf: never. Calls
    the rule ``trade promote`` decides by (:func:`sequential.crossed`, the same :func:`sequential.decide`)."""
    n = np.arange(1, daily.shape[1] + 1)
    hit = sequential.crossed(n, daily.cumsum(axis=1), (daily**2).cumsum(axis=1), alpha)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.inf)


@pytest.mark.parametrize("scale", [1.0, 0.004])  # the test is scale-free: raw P&L in fractions or in units
def test_checking_after_every_day_keeps_false_promotions_at_alpha(scale):
    """Two equal models: the daily difference has mean 0; a fixed-alpha t-test peeked at daily would promote
    far more often (shown beside it), the sequential test at most alpha + 0.01."""
    rng = np.random.default_rng(44)
    daily = scale * rng.standard_normal((RUNS, DAYS))
    false = np.isfinite(first_promotion(daily)).mean()
    assert false <= ALPHA + 0.01
    n = np.arange(2, DAYS + 1)
    mean, sd = daily.cumsum(1)[:, 1:] / n, np.array([daily[:, :k].std(axis=1, ddof=1) for k in n]).T
    peeking = (mean / (sd / np.sqrt(n)) > student.ppf(1 - ALPHA, n - 1)).any(axis=1).mean()
    assert peeking > 3 * ALPHA  # what the test replaced: optional stopping with a t-test at each day


def test_a_planted_edge_promotes_within_the_documented_days():
    """docs/trading.md: at alpha 0.05, a daily edge of 0.3 standard deviations of the daily difference promotes
    in a median of about 85 days, 90% of runs within 190; 0.5 sd: a median of about 40 days, 90% within 75."""
    rng = np.random.default_rng(7)
    for edge, median_days, p90_days in ((0.3, 90, 190), (0.5, 40, 75)):
        days = first_promotion(rng.normal(edge, 1.0, (RUNS, DAYS)))
        assert np.median(days) <= median_days and np.percentile(days, 90) <= p90_days
        assert np.median(days) >= median_days / 2  # the edge is found, not a promotion on day 2


@pytest.mark.parametrize("n,t2", [(2, 4.0), (10, 1.5), (30, 9.0), (60, 0.3)])
def test_the_e_value_is_the_mixture_bayes_factor_by_integration(n, t2):
    """E_n = integral over delta ~ N(0, g) of the noncentral t density at t with noncentrality delta sqrt(n),
    over the central t density (the t statistic's likelihood ratio; Rouder et al. 2009)."""
    g, nu, t = sequential.PRIOR_G, n - 1, np.sqrt(t2)
    num, _ = integrate.quad(lambda d: nct.pdf(t, nu, d * np.sqrt(n)) * norm.pdf(d, 0, np.sqrt(g)),
                            -10 * np.sqrt(g), 10 * np.sqrt(g), points=[0.0], limit=200)
    x = np.full(n, 1.0)
    x[0] += 1.0  # any sample: rescale it to the t wanted
    mean, s = x.mean(), x.std(ddof=1)
    shift = t * s / np.sqrt(n) - mean  # adds to the mean, keeps s: t = (mean + shift) / (s / sqrt(n))
    y = x + shift
    assert sequential.e_value(n, y.sum(), (y**2).sum()) == pytest.approx(num / student.pdf(t, nu), rel=1e-6)


def test_the_interval_ends_are_where_the_e_value_reaches_the_threshold():
    """Lai's confidence sequence: every mu inside has E_n(x - mu) < 1 / alpha, the ends exactly 1 / alpha."""
    x = np.random.default_rng(3).normal(0.2, 1.0, 40)
    result = sequential.evaluate(x, ALPHA)
    for end in (result.low, result.high):
        y = x - end
        assert sequential.e_value(len(y), y.sum(), (y**2).sum()) == pytest.approx(1 / ALPHA, rel=1e-9)
    y = x - result.mean
    assert sequential.e_value(len(y), y.sum(), (y**2).sum()) < 1 / ALPHA
    assert result.low < result.mean < result.high


def test_no_evidence_without_two_days_or_spread_and_the_verdict_reads_the_same_rule():
    assert sequential.evaluate([0.01], ALPHA).e_value == 1.0 and not sequential.evaluate([0.01], ALPHA).passes
    assert sequential.evaluate([0.0, 0.0, 0.0], ALPHA).e_value == 1.0
    assert np.isinf(sequential.evaluate([0.01], ALPHA).high)
    strong = sequential.evaluate(np.linspace(0.9, 1.1, 30), ALPHA)
    assert strong.passes and Verdict("pnl", 60, strong).p == pytest.approx(1 / strong.e_value)
    worse = sequential.evaluate(-np.linspace(0.9, 1.1, 30), ALPHA)
    assert worse.e_value == pytest.approx(strong.e_value) and not worse.passes and Verdict("pnl", 60, worse).p == 1
    doc = strong.as_json()
    assert doc["days"] == 30 and doc["threshold"] == 1 / ALPHA and doc["interval"] == [strong.low, strong.high]
