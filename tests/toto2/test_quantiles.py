"""Sample paths from quantiles: linear between the knots, exponential tails fitted to the outer gaps.
Hand-computed values, monotonicity in u, and sample quantiles that converge to the knots."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster
from marketcast.forecast.toto2.model import random_model
from marketcast.forecast.base import Forecast
from marketcast.forecast.quantiles import NINE, quantile_function, tail_quantile
from marketcast.forecast.warmup import synthetic_batch

KNOTS = torch.tensor([1.0, 2.0, 4.0, 5.0, 6.0, 7.0, 9.0, 10.0, 13.0], dtype=torch.float64)


def at(u: list[float]) -> list[float]:
    return quantile_function(KNOTS[:, None], torch.tensor(u, dtype=torch.float64)[:, None])[:, 0].tolist()


def test_hand_computed_values():
    # knots are hit (0.5 is the fifth knot, 6); 0.25 is half way from 2 to 4; 0.65 half way from 7 to 9
    assert np.allclose(at([0.1, 0.2, 0.5, 0.9, 0.25, 0.65]), [1, 2, 6, 13, 3, 8])
    # upper tail: 13 + (13 - 10) * ln(0.1 / 0.01) at u = 0.99; lower: 1 - (2 - 1) * ln(0.1 / 0.05) at u = 0.05
    assert np.allclose(at([0.99, 0.05]), [13 + 3 * math.log(10), 1 - math.log(2)])
    assert math.isclose(tail_quantile(1.0, 2.0, 0.05), 1 - math.log(2))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-6, 1 - 1e-6), min_size=2, max_size=20),
       st.lists(st.floats(-50, 50), min_size=9, max_size=9))
def test_monotone_in_u(us, raw):
    knots = torch.tensor(sorted(raw), dtype=torch.float64)[:, None]
    u = torch.tensor(sorted(us), dtype=torch.float64)[:, None]
    values = quantile_function(knots, u)[:, 0]
    assert bool((values[1:] >= values[:-1] - 1e-9).all())


def test_forecaster_paths_reproduce_their_quantiles():
    fc = Toto2Forecaster(random_model(Toto2Config.size("4m"), seed=4), compile="eager")
    batch = synthetic_batch(2, 64, 3)
    out = fc.forecast(batch, 3, 4000, seed=1)
    assert out.quantiles.shape == (2, 3, 9, 3) and out.quantile_levels[4] == 0.5
    sampled = np.quantile(out.samples, [0.1, 0.5, 0.9], axis=2)  # [3 levels, B, fields, H]
    knots = out.quantiles[:, :, [0, 4, 8]].transpose(2, 0, 1, 3)
    spread = out.quantiles[:, :, 8] - out.quantiles[:, :, 0]
    assert np.abs(sampled - knots).max() < 0.1 * spread.max()
    again = fc.forecast(batch.__class__.concat([batch]), 3, 4000, seed=1)
    np.testing.assert_array_equal(again.samples, out.samples)  # keyed on the windows: reproducible
    assert out.take([1]).quantiles.shape == (1, 3, 9, 3)


def test_uneven_levels_hand_computed():
    # Chronos-2-like levels: 0.05 | 0.1 .. | 0.95; knots 0, 1, 3, 10
    levels = (0.05, 0.1, 0.5, 0.95)
    knots = torch.tensor([0.0, 1.0, 3.0, 10.0], dtype=torch.float64)[:, None]
    u = torch.tensor([0.05, 0.075, 0.3, 0.5, 0.725, 0.95, 0.01, 0.99], dtype=torch.float64)[:, None]
    got = quantile_function(knots, u, levels)[:, 0].tolist()
    b_lo = 0.05 * (1 - 0) / (0.1 - 0.05)  # = 1: density continuous at the lowest knot
    b_hi = 0.05 * (10 - 3) / (0.95 - 0.5)
    want = [0, 0.5, 2, 3, 6.5, 10, -b_lo * math.log(0.05 / 0.01), 10 + b_hi * math.log(0.05 / 0.01)]
    assert np.allclose(got, want)
    # the nine-level default is the same function with l_0 = 0.1: b is the outer gap
    assert np.allclose(quantile_function(KNOTS[:, None], torch.tensor([[0.05]], dtype=torch.float64), NINE)[0, 0],
                       tail_quantile(1.0, 2.0, 0.05))
def test_forecast_quantile_reads_the_knots_of_a_quantile_model():
    knots = np.array([[[[1.0], [2.0], [4.0]]]])  # [B=1, F=1, K=3, H=1]
    samples = np.full((1, 1, 5, 1), 100.0)  # deliberately far from the knots
    fc = Forecast(samples, ("close",), {}, knots, (0.1, 0.5, 0.9))
    assert fc.quantile(0.5)[0, 0] == 2.0 and fc.quantile(0.7)[0, 0] == 3.0  # a knot, and linear between knots
    assert fc.quantile(1.0)[0, 0] == 100.0  # the ends stay on the samples
    assert Forecast(samples, ("close",)).quantile(0.5)[0, 0] == 100.0
