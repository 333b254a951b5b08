"""M4 keeps what a chart shows: the first and last point and every bucket's extremes."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from marketcast.report.downsample import m4_indices


def test_a_short_series_is_kept_whole():
    assert m4_indices(np.arange(5.0), max_points=8).tolist() == [0, 1, 2, 3, 4]


def test_hand_computed_buckets():
    y = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0])
    # 12 points into 8 // 4 = 2 buckets of 6: [3, 1, 4, 1.5, 5, 9] and [2, 6, 5, 3, 5, 8]
    # bucket 1: first 0, last 5, min 1 (1.0), max 5 (9.0); bucket 2: first 6, last 11, min 6 (2.0), max 11 (8.0)
    assert m4_indices(y, max_points=8).tolist() == [0, 1, 5, 6, 11]


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 400), elements=st.floats(-1e6, 1e6)), st.integers(4, 64))
def test_extremes_first_and_last_survive(y, max_points):
    keep = m4_indices(y, max_points)
    assert len(keep) <= max(len(y) if len(y) <= max_points else 4 * (max_points // 4), 1)
    assert (np.diff(keep) > 0).all()
    assert keep[0] == 0 and keep[-1] == len(y) - 1
    assert y[keep].min() == y.min() and y[keep].max() == y.max()
    if len(y) > max_points:  # each bucket's own extremes stay, so every local peak and trough is drawn
        edges = np.linspace(0, len(y), max_points // 4 + 1).round().astype(int)
        for a, b in zip(edges[:-1], edges[1:]):
            inside = keep[(keep >= a) & (keep < b)]
            assert y[inside].min() == y[a:b].min() and y[inside].max() == y[a:b].max()
