"""Counter-based uniforms and the vectorised Student-T mixture sampler, against hand-computed cases and
scipy's distributions."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

from marketcast.forecast.toto.model import MixtureParams
from marketcast.forecast.toto.sampling import sample_mixture
from marketcast.runtime.rng import mix32, step_streams, uniforms, window_streams


def test_mix32_is_a_bijection_on_a_block_and_stays_in_32_bits():
    x = torch.arange(1 << 16, dtype=torch.int64) * 65_537 + 12_345  # 65,536 distinct 32-bit inputs
    h = mix32(x)
    assert h.min() >= 0 and h.max() < 1 << 32 and torch.unique(h).numel() == x.numel()


def test_uniforms_are_uniform_and_independent():
    streams = window_streams(7, np.array([1_600_000_000_000_000_000, 1_600_086_400_000_000_000], dtype=np.uint64))
    u = uniforms(step_streams(streams, 3)[:, None], torch.arange(200_000)[None])  # [2, 200k]
    assert 0.0 < u.min() and u.max() < 1.0
    for row in u.numpy():
        assert stats.kstest(row, "uniform").pvalue > 1e-3
    lag = [np.corrcoef(u[0, :-k], u[0, k:])[0, 1] for k in (1, 2, 3)]
    assert max(abs(c) for c in lag) < 0.01  # 4.5 sigma at n = 200k
    assert abs(np.corrcoef(u[0], u[1])[0, 1]) < 0.01  # two windows (consecutive days)
    other_step = uniforms(step_streams(streams, 4)[:, None], torch.arange(200_000)[None])
    assert abs(np.corrcoef(u[0], other_step[0])[0, 1]) < 0.01


def test_streams_depend_on_seed_and_key_only():
    keys = np.array([5, 9, 5], dtype=np.uint64)
    s = window_streams(1, keys)
    assert s[0] == s[2] and s[0] != s[1]
    assert torch.equal(window_streams(1, keys[::-1].copy()), s.flip(0))
    assert (window_streams(2, keys) != s).all()


def _mixture(weights, df, loc, scale) -> MixtureParams:
    t = lambda v: torch.tensor([v], dtype=torch.float32)  # noqa: E731  one row, K components
    return MixtureParams(torch.log(t(weights)), t(df), t(loc), t(scale))


def test_component_choice_and_t_value_by_hand():
    """Weights (0.25, 0.75): u0 <= 0.25 picks component 0. With U1 = 0 and U2 = exp(-0.5) the polar form gives
    T = sqrt(df * (e ** (1 / df) - 1)) (about 1.0651 for df 4; the normal's 1 as df grows)."""
    params = _mixture([0.25, 0.75], [4.0, 4.0], [10.0, -10.0], [2.0, 3.0])
    u2 = math.exp(-0.5)
    u = torch.tensor([[[0.2, 0.3]], [[0.0, 0.0]], [[u2, u2]]])  # [3 uniforms, 1 row, 2 draws]
    draws = sample_mixture(params, u)[0]
    t = math.sqrt(4.0 * (math.exp(0.25) - 1))
    np.testing.assert_allclose(draws.numpy(), [10.0 + 2.0 * t, -10.0 + 3.0 * t], rtol=1e-5)


def test_draws_follow_the_mixture_distribution():
    """200k counter-based draws from 0.3 * t3(0, 1) + 0.7 * t8(5, 2) against the mixture's CDF."""
    params = _mixture([0.3, 0.7], [3.0, 8.0], [0.0, 5.0], [1.0, 2.0])
    n = 200_000
    stream = window_streams(0, np.array([42], dtype=np.uint64))
    counters = torch.arange(3 * n).view(3, 1, n)
    draws = sample_mixture(params, uniforms(stream, counters)).numpy()[0]

    def cdf(x):
        return 0.3 * stats.t.cdf(x, 3) + 0.7 * stats.t.cdf((x - 5.0) / 2.0, 8)

    assert stats.kstest(draws, cdf).pvalue > 1e-3
