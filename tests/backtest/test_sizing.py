"""Position sizing from forecast samples: fixed, Kelly and CVaR sizes, by hand for normal forecasts; the trade's
distribution conditional on its limit entry filling."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from marketcast.backtest.sizing import (
    expected_shortfall, kelly_size, order_sizes, position_sizes, trade_fills, trade_return_samples,
)
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
    # (risk_per_trade 1: an ES budget of all the equity, which a 20 % sd trade's ES never reaches, so Kelly alone)
    assert position_sizes(returns, long_, "kelly", kelly_fraction=1.0, risk_per_trade=1.0) == pytest.approx(
        [0.2, 0.05], rel=1e-9)
    # ES_95 of N(mu, s^2) as a loss: -mu + s * phi(z_0.95) / 0.05 = -0.002 + 2.06271 s -> 0.204271, 0.410543
    es = -0.002 + np.array([0.1, 0.2]) * norm.pdf(norm.ppf(0.95)) / 0.05
    assert expected_shortfall(returns) == pytest.approx(es, rel=1e-5)
    assert position_sizes(returns, long_, "cvar") == pytest.approx(0.01 / es, rel=1e-5)  # 0.048955, 0.024358
    assert position_sizes(returns, long_, "fixed").tolist() == [1.0, 1.0]
    # a quarter of f* (0.05, 0.125), under a cap of 1; --kelly-cap 0.1 cuts the second
    two = np.stack([_normal(0.002, 0.1), _normal(0.005, 0.1)])
    assert position_sizes(two, long_, "kelly", risk_per_trade=1.0) == pytest.approx([0.05, 0.125], rel=1e-9)
    assert position_sizes(two, long_, "kelly", kelly_cap=0.1, risk_per_trade=1.0) == pytest.approx([0.05, 0.1],
                                                                                                   rel=1e-9)
    # the default ES budget of 1 % binds both: ES_95 0.204271 and -0.005 + 0.206271 = 0.201271, so 0.01 / ES
    # (0.048955, 0.049684) is below the quarter Kelly size of each; a budget of 2 % (0.097909, 0.099368) binds the
    # second alone
    es_two = np.array([-0.002, -0.005]) + 0.1 * norm.pdf(norm.ppf(0.95)) / 0.05
    assert position_sizes(two, long_, "kelly") == pytest.approx(0.01 / es_two, rel=1e-5)
    assert position_sizes(two, long_, "kelly", risk_per_trade=0.02) == pytest.approx([0.05, 0.02 / es_two[1]],
                                                                                     rel=1e-5)


@pytest.mark.parametrize("mu, sigma", [(0.002, 0.1), (0.0004, 0.012), (-0.003, 0.05), (0.01, 0.3)])
def test_twice_as_wide_is_a_quarter_of_the_kelly_size(mu, sigma):
    """The module docstring's claim at the default quarter Kelly: same mean, doubled spread, a quarter."""
    side = np.sign(mu) * np.array([1, 1])  # the side the mean favours
    narrow, wide = position_sizes(np.stack([_normal(mu, sigma), _normal(mu, 2 * sigma)]), side, "kelly",
                                  risk_per_trade=1.0).tolist()  # Kelly alone: an ES budget it never reaches
    assert narrow == pytest.approx(0.25 * abs(mu) / sigma**2, rel=1e-9) and 0.0 < narrow < 1.0  # not capped
    assert wide / narrow == pytest.approx(0.25, rel=1e-12)


def test_shorts_use_the_short_return():
    up, down = _normal(0.002, 0.1), _normal(-0.002, 0.1)
    sizes = position_sizes(np.stack([up, down, down]), np.array([1, -1, 1]), "kelly", kelly_fraction=1.0,
                           risk_per_trade=1.0)
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
    flat = np.array([[0.01, 0.01], [-0.01, -0.01], [0.0, 0.0]])
    assert kelly_size(flat).tolist() == [1.0, 0.0, 0.0] and kelly_size(flat, cap=0.25).tolist() == [0.25, 0.0, 0.0]
    # no filled path: 0 whatever the returns; one filled path: no variance, the cap when it gains
    none = np.array([[False, False], [True, False], [False, True]])
    assert kelly_size(np.array([[0.05, 0.05], [0.01, -0.5], [0.01, -0.5]]), filled=none).tolist() == [0.0, 1.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 10.0), st.sampled_from(["fixed", "kelly", "cvar"]))
def test_sizes_stay_in_range_and_follow_the_spread(seed, c, policy):
    rng = np.random.default_rng(seed)
    returns = rng.normal(rng.normal(0, 0.01, (30, 1)), 0.02, (30, 64))
    direction = rng.integers(-1, 2, 30)
    sizes = position_sizes(returns, direction, policy, kelly_cap=0.5, kelly_fraction=0.7)
    cap = 0.5 if policy == "kelly" else 1.0
    assert ((sizes >= 0) & (sizes <= cap)).all()
    # scaling every return by c scales Kelly by 1 / c and the CVaR size by 1 / c (before the caps)
    if policy == "kelly":
        raw = kelly_size(direction[:, None] * returns, 1.0, cap=np.inf)
        assert kelly_size(c * direction[:, None] * returns, 1.0, cap=np.inf) == pytest.approx(raw / c, rel=1e-9)
        # the fraction scales f* before the cap, and the ES budget (the cvar size) bounds it
        bound = position_sizes(returns, direction, "cvar")
        assert sizes == pytest.approx(np.where(direction != 0, np.minimum(np.minimum(0.7 * raw, 0.5), bound), 0.0),
                                      rel=1e-12)
    if policy == "cvar":
        es = expected_shortfall(direction[:, None] * returns)
        assert expected_shortfall(c * direction[:, None] * returns) == pytest.approx(c * es, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("kwargs", [
    dict(policy="martingale"),
    dict(policy="kelly", kelly_cap=0.0),
    dict(policy="kelly", kelly_cap=1.5),
    dict(policy="kelly", kelly_cap="a quarter"),
    dict(policy="kelly", kelly_fraction=0.0),
    dict(policy="kelly", kelly_fraction=1.5),
    dict(policy="kelly", kelly_fraction=-0.25),
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


def test_a_limit_entry_is_sized_on_the_paths_that_fill_it():
    """A long limit at 99 (close_t 100) on four paths with lows -2 %, -0.5 %, -1.5 %, +0.2 % and closes -1 %,
    +1 %, +0.5 %, +2 %: paths 0 and 2 reach 99 and hold 99 -> 99 and 99 -> 100.5; the other two, rising, never
    buy. Their trade: 0 and 100.5 / 99 - 1 = 1/66, mean 1/132 and variance (1/132)^2: Kelly 132, capped. Counted
    as if every path had bought at 99, the mean would be 0.0303 / 4 higher (adverse selection the fill never
    grants). A short limit at 101 on the same paths fills where the high reaches 101."""
    close = np.array([[-0.01, 0.01, 0.005, 0.02]])
    high, low = np.array([[0.0, 0.012, 0.011, 0.021]]), np.array([[-0.02, -0.005, -0.015, 0.002]])
    long_ = trade_fills([1], [99.0], [100.0], high, low)
    assert long_.tolist() == [[True, False, True, False]]
    returns = trade_return_samples([1], [99.0], [np.nan], [100.0], close, high, low)
    assert returns[0] == pytest.approx([0.0, 101 / 99 - 1, 100.5 / 99 - 1, 102 / 99 - 1], rel=1e-12)
    assert kelly_size(returns, 1.0, np.inf, long_) == pytest.approx([132.0], rel=1e-9)
    samples = {"close": close, "high": high, "low": low}
    assert order_sizes([1], [99.0], [np.nan], [100.0], samples, "kelly").tolist() == [1.0]  # 0.25 x 132, capped
    assert order_sizes([1], [99.0], [np.nan], [100.0], samples, "kelly", kelly_fraction=0.005).tolist() == \
        pytest.approx([0.66], rel=1e-9)
    # the filled paths' ES at 50 %: losses 0 and -1/66, the inverted-cdf quantile -1/66 -> -1/66 + (1/132) / 0.5
    assert expected_shortfall(returns, 0.5, long_) == pytest.approx([0.0], abs=1e-15)
    assert trade_fills([-1], [101.0], [100.0], high, low).tolist() == [[False, True, True, True]]
    assert trade_fills([1, -1], [np.nan, np.nan], [100.0, 100.0], np.zeros((2, 4)), np.zeros((2, 4))).all()
    # a limit no path reaches: no trade
    assert order_sizes([1], [97.0], [np.nan], [100.0], samples, "kelly").tolist() == [0.0]
    assert order_sizes([1], [97.0], [np.nan], [100.0], samples, "cvar").tolist() == [0.0]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.5, 0.8, 0.9, 0.925, 0.95, 0.99]))
def test_expected_shortfall_of_the_filled_paths_is_that_of_their_subset(seed, level):
    rng = np.random.default_rng(seed)
    returns = np.round(rng.normal(0.0, 0.01, (6, int(rng.integers(1, 40)))), 4)  # rounded: ties
    filled = rng.random(returns.shape) < rng.uniform(0.2, 1.0)
    es = expected_shortfall(returns, level, filled)
    for row, keep, got in zip(returns, filled, es):
        if not keep.any():
            assert np.isnan(got)
            continue
        loss = -row[keep]
        var = np.quantile(loss, level, method="inverted_cdf")
        assert got == pytest.approx(var + np.maximum(loss - var, 0.0).mean() / (1.0 - level), rel=1e-12, abs=1e-15)
    # all paths filled: the unmasked form exactly
    assert np.array_equal(expected_shortfall(returns, level, np.ones(returns.shape, bool)),
                          expected_shortfall(returns, level))
