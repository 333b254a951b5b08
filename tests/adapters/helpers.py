"""Checks every adapter must pass, called from each adapter's tests with its own fixtures."""

from __future__ import annotations

import numpy as np

from marketcast.forecast.base import ContextBatch, make_batch


def assert_mask_unread(forecaster, frame) -> None:
    """Garbage under the left padding's mask changes no quantile: the package never sees padded bars."""
    batch = make_batch(frame, [5, 40], 32)  # window 0: 26 padded bars
    values = np.array(batch.values)
    values[0, :26] = [1e6, 1e6, -1e6, 0.0, 0.0]
    moved = ContextBatch(values, np.array(batch.mask), np.array(batch.timestamps))
    np.testing.assert_array_equal(forecaster.raw_quantiles(moved, 4), forecaster.raw_quantiles(batch, 4))
