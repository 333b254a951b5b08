"""infer_intervals: every window's bar interval at once equals infer_interval of that window alone."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.data.spacing import infer_interval, infer_intervals

HOUR, DAY = 3_600 * 10**9, 86_400 * 10**9
GAPS = [15 * 60 * 10**9, HOUR, 2 * HOUR, 17 * HOUR, DAY, 2 * DAY, 3 * DAY, 7 * DAY, 30 * DAY, 31 * DAY, 91 * DAY,
        365 * DAY, 200 * DAY, 0, -HOUR]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(GAPS), min_size=0, max_size=60), st.integers(1, 12), st.data())
def test_every_window_equals_inferring_it_alone(gaps, context, data):
    stamps = np.cumsum([10**18, *gaps]).astype("datetime64[ns]")  # zero and negative gaps: unsorted stamps
    n = len(stamps)
    ends = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))
    starts = np.maximum(ends - context + 1, 0)
    kinds, steps = infer_intervals(stamps, starts, ends)
    for kind, step, a, b in zip(kinds, steps, starts, ends):
        alone = infer_interval(stamps[a:b + 1])
        assert (kind, pd.Timedelta(int(step))) == (alone.kind, alone.step), (a, b)


def test_windows_of_a_long_series_are_counted_in_chunks(monkeypatch):
    import marketcast.data.spacing as spacing

    rng = np.random.default_rng(1)  # hourly bars, then daily ones: windows across the change are mixed
    gaps = np.concatenate([rng.choice([HOUR, 17 * HOUR], 1500, p=[0.85, 0.15]), rng.choice([DAY, 3 * DAY], 1500)])
    stamps = np.cumsum(gaps).astype("datetime64[ns]")
    ends = np.arange(100, 3000)
    whole = infer_intervals(stamps, ends - 99, ends)
    monkeypatch.setattr(spacing, "_SPAN_CELLS", 500)  # chunks of a few windows
    chunked = infer_intervals(stamps, ends - 99, ends)
    np.testing.assert_array_equal(whole[0], chunked[0])
    np.testing.assert_array_equal(whole[1], chunked[1])
    assert set(whole[0]) == {"intraday", "daily", "irregular"}
