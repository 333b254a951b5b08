"""Position sizing from forecast samples: fixed, Kelly and CVaR sizes, by hand for normal forecasts."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from marketcast.backtest.sizing import expected_shortfall, kelly_fraction, position_sizes
from marketcast.errors import ConfigError

S = 20000
Z = norm.ppf((np.arange(S) + 0.5) / S)
Z = (Z - Z.mean()) / Z.std()  # a normal ensemble with mean 0 and variance 1 exactly


def _normal(mu, sigma):
    return mu + sigma * Z


def test_narrow_and_wide_forecasters_with_the_same_mean():
    returns = np.stack([_normal(0.002, 0.1), _normal(0.002, 0.2)])  # [2 windows, S]
    long_ = np.array([1, 1])
    # Kelly mu / sigma^2: 0.002 / 0.01 = 0.2 and 0.002 / 0.04 = 0.05 (a quarter: twice the spread)
    assert position_sizes(returns, long_, "kelly", kelly_cap=1.0) == pytest.approx([0.2, 0.05], rel=1e-9)
    # ES_95 of N(mu, s^2) as a loss: -mu + s * phi(z_0.95) / 0.05 = -0.002 + 2.06271 s -> 0.204271, 0.410543
    es = -0.002 + np.array([0.1, 0.2]) * norm.pdf(norm.ppf(0.95)) / 0.05
    assert expected_shortfall(returns) == pytest.approx(es, rel=1e-5)
    assert position_sizes(returns, long_, "cvar") == pytest.approx(0.01 / es, rel=1e-5)  # 0.048955, 0.024358
    assert position_sizes(returns, long_, "fixed").tolist() == [1.0, 1.0]
    # default quarter-Kelly cap: 0.2 stays, a 0.5 Kelly fraction is cut to 0.25
    capped = position_sizes(np.stack([_normal(0.002, 0.1), _normal(0.005, 0.1)]), long_, "kelly")
    assert capped == pytest.approx([0.2, 0.25], rel=1e-9)


def test_shorts_use_the_short_return():
    up, down = _normal(0.002, 0.1), _normal(-0.002, 0.1)
    sizes = position_sizes(np.stack([up, down, down]), np.array([1, -1, 1]), "kelly", kelly_cap=1.0)
    assert sizes == pytest.approx([0.2, 0.2, 0.0], rel=1e-9)  # a long on a falling forecast gets nothing
    cvar = position_sizes(np.stack([up, down]), np.array([1, -1]), "cvar")
    assert cvar[0] == pytest.approx(cvar[1], rel=1e-12)


def test_flat_windows_get_zero():
    returns = np.stack([_normal(0.002, 0.1)] * 3)
    for policy in ("fixed", "kelly", "cvar"):
        assert position_sizes(returns, np.array([0, 1, 0]), policy)[[0, 2]].tolist() == [0.0, 0.0]


def test_expected_shortfall_by_hand():
    r = np.array([[-0.1, -0.05] + [0.01] * 18])  # 20 samples
    assert expected_shortfall(r, 0.95) == pytest.approx([0.1])  # the worst 1 of 20
    assert expected_shortfall(r, 0.9) == pytest.approx([0.075])  # mean of the worst 2
    # a tail of 1.5 samples: (0.1 + 0.5 * 0.05) / 1.5, the Rockafellar-Uryasev form counts the fraction
    assert expected_shortfall(r, 0.925) == pytest.approx([0.125 / 1.5])
    # risk 1 % against a 10 % shortfall -> size 0.1; a tail that gains -> full size
    assert position_sizes(r, np.array([1]), "cvar") == pytest.approx([0.1])
    assert position_sizes(np.full((1, 20), 0.01), np.array([1]), "cvar").tolist() == [1.0]


def test_kelly_edge_cases():
    assert kelly_fraction(np.array([[0.01, 0.01], [-0.01, -0.01], [0.0, 0.0]])).tolist() == [0.25, 0.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 10.0), st.sampled_from(["fixed", "kelly", "cvar"]))
def test_sizes_stay_in_range_and_follow_the_spread(seed, c, policy):
    rng = np.random.default_rng(seed)
    returns = rng.normal(rng.normal(0, 0.01, (30, 1)), 0.02, (30, 64))
    direction = rng.integers(-1, 2, 30)
    sizes = position_sizes(returns, direction, policy, kelly_cap=0.5)
    cap = 0.5 if policy == "kelly" else 1.0
    assert ((sizes >= 0) & (sizes <= cap)).all()
    # scaling every return by c scales Kelly by 1 / c and the CVaR size by 1 / c (before the caps)
    if policy == "kelly":
        raw = kelly_fraction(direction[:, None] * returns, cap=np.inf)
        assert kelly_fraction(c * direction[:, None] * returns, cap=np.inf) == pytest.approx(raw / c, rel=1e-9)
    if policy == "cvar":
        es = expected_shortfall(direction[:, None] * returns)
        assert expected_shortfall(c * direction[:, None] * returns) == pytest.approx(c * es, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("kwargs", [
    dict(policy="martingale"),
    dict(policy="kelly", kelly_cap=0.0),
    dict(policy="kelly", kelly_cap=1.5),
    dict(policy="kelly", kelly_cap="a quarter"),
    dict(policy="cvar", risk_per_trade=0.0),
    dict(policy="cvar", risk_per_trade=1.5),
    dict(policy="cvar", es_level=1.0),
])
def test_bad_settings_are_one_line(kwargs):
    with pytest.raises(ConfigError) as err:
        position_sizes(np.zeros((2, 5)), np.array([1, -1]), **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("returns", "direction"), [
    (np.zeros((2, 5)), np.array([1, 1, 1])),
    (np.zeros(5), np.array([1])),
    (np.zeros((2, 5)), np.array([1, 2])),
    (np.full((2, 5), np.nan), np.array([1, 1])),
])
def test_bad_arrays_are_one_line(returns, direction):
    with pytest.raises(ConfigError) as err:
        position_sizes(returns, direction, "kelly")
    assert "\n" not in str(err.value)
