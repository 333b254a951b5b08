"""The in-graph sampler: upstream's filtering rules exactly, and inverse-CDF draws with the filtered softmax's
frequencies (never a filtered token; top_k=1 is greedy), one uniform per draw."""

from __future__ import annotations

import pytest
import torch

from marketcast.forecast.kronos.sampling import SamplingParams, filter_logits, sample


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 0.9), (0.7, 0, 0.5), (1.3, 5, 0.9), (1.0, 1, 1.0),
                                                     (1.0, 0, 1.0), (2.0, 40, 0.3), (1.0, 64, 0.99)])
def test_filter_matches_upstream(temperature, top_k, top_p):
    from kronos_finance._vendor.kronos_model.kronos import top_k_top_p_filtering

    logits = torch.randn(6, 64, generator=torch.Generator().manual_seed(top_k))
    ours = filter_logits(logits, SamplingParams(temperature, top_k, top_p).knobs())
    ref = logits / temperature
    if top_k > 0 or top_p < 1.0:
        ref = top_k_top_p_filtering(ref.clone(), top_k=top_k, top_p=top_p)
    assert torch.equal(torch.isinf(ours), torch.isinf(ref))
    torch.testing.assert_close(ours[~torch.isinf(ours)], ref[~torch.isinf(ref)], rtol=0, atol=1e-6)


def test_draw_frequencies_follow_the_filtered_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0, 1.5, 0.2]])
    knobs = SamplingParams(0.8, 0, 0.85).knobs()
    n = 200_000
    u = torch.rand(1, n, generator=torch.Generator().manual_seed(0))
    draws = sample(logits, knobs, u)[0]  # n draws sharing one row of logits (one sort)
    want = filter_logits(logits, knobs).softmax(-1)[0]
    got = torch.bincount(draws, minlength=8).double() / n
    assert (got[want == 0] == 0).all()  # filtered tokens never drawn
    torch.testing.assert_close(got, want.double(), rtol=0, atol=4e-3)  # ~4 sigma for p(1-p)/n at p=0.5


def test_top_k_one_is_greedy_for_any_uniforms():
    logits = torch.randn(50, 32, generator=torch.Generator().manual_seed(1))
    u = torch.rand(50, 3, generator=torch.Generator().manual_seed(2))
    u[0] = 0.0  # the extremes of the interval still land on a kept token
    u[1] = 1.0
    assert torch.equal(sample(logits, SamplingParams(1.5, 1, 0.9).knobs(), u), logits.argmax(-1, keepdim=True).expand(50, 3))


def test_inverse_cdf_by_hand():
    """Probabilities (after top-p 0.9) 0.5, 0.3, 0.2 in sorted order: a uniform u picks the first token whose
    cumulative probability reaches u."""
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3, 1e-9]]))  # the last token falls outside top-p
    u = torch.tensor([[0.0, 0.49, 0.51, 0.79, 0.81, 0.999, 1.0]])
    assert sample(logits, SamplingParams(1.0, 0, 0.9).knobs(), u).tolist() == [[1, 1, 2, 2, 0, 0, 0]]


def test_bad_parameters():
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(0.0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(1.0, 0, 1.5)
