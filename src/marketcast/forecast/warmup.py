"""Warm-up before the first real forecast: compile (and on CUDA record the graphs) for the loop's shapes.

A compiled model builds one graph per shape bucket on first use; a trading loop or a backtest that warms up
on a synthetic batch of its own shapes pays that before the clock matters and then never compiles again.
Under ``reduce-overhead`` torch's CUDA-graph trees run a graph's first call as a warm-up and record it on a
later one, so CUDA warms up with :data:`CUDA_GRAPH_RUNS` calls.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from marketcast.errors import ConfigError
from marketcast.forecast.base import INPUT_FIELDS, ContextBatch

CUDA_GRAPH_RUNS = 3  # compile + warm-up, record, first replay


def synthetic_batch(batch_size: int, context: int, horizon: int, seed: int = 0) -> ContextBatch:
    """``batch_size`` random-walk daily windows of ``context`` bars (consistent OHLC, business-day stamps)."""
    if batch_size < 1 or context < 2 or horizon < 1:
        raise ConfigError(f"warm-up needs batch_size >= 1, context >= 2 and horizon >= 1, got {batch_size}, "
                          f"{context}, {horizon}; pass the shapes the loop will forecast")
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, (batch_size, context)), axis=1))
    open_ = close * np.exp(rng.normal(0, 0.003, close.shape))
    high = np.maximum(open_, close) * (1 + rng.uniform(0, 0.01, close.shape))
    low = np.minimum(open_, close) * (1 - rng.uniform(0, 0.01, close.shape))
    volume = rng.uniform(1e6, 2e6, close.shape)
    columns = {"open": open_, "high": high, "low": low, "close": close, "volume": volume}
    values = np.stack([columns[f] for f in INPUT_FIELDS], axis=-1)
    days = np.busday_offset(np.datetime64("2020-01-02", "D"), np.arange(context + horizon), roll="forward")
    stamps = np.broadcast_to(days.astype("datetime64[ns]"), (batch_size, context + horizon))
    return ContextBatch(values=values, mask=np.ones((batch_size, context), bool),
                        timestamps=np.ascontiguousarray(stamps[:, :context]),
                        future_timestamps=np.ascontiguousarray(stamps[:, context:]))


def timed_warmup(forecast: Callable[..., object], batch: ContextBatch, horizon: int, num_samples: int,
                 runs: int, synchronize: Callable[[], None] | None = None) -> float:
    """Seconds ``runs`` calls of ``forecast`` take on ``batch`` (device work included)."""
    started = time.perf_counter()
    for _ in range(runs):
        forecast(batch, horizon, num_samples, seed=0)
    if synchronize is not None:
        synchronize()
    return time.perf_counter() - started
