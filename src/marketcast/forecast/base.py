"""The forecaster contract: batched context windows in, sample paths out.

Every model (baseline, Toto, Kronos) takes a :class:`ContextBatch` of ``B`` windows and returns a
:class:`Forecast` whose ``samples`` are ``[B, fields, num_samples, horizon]`` absolute prices. Batched by
design: a backtest forecasts all of its windows in one call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import pandas as pd

from marketcast.data.calendar import BarInterval, MarketCalendar, calendar_for, infer_interval
from marketcast.data.spacing import infer_intervals
from marketcast.errors import ConfigError
from marketcast.forecast.aggregate import aggregate, quantile

INPUT_FIELDS = ("open", "high", "low", "close", "volume")
OUTPUT_FIELDS = ("close", "high", "low", "open")


class ContextBatch:
    """``B`` context windows of equal length ``T`` (shorter windows are left-padded and masked).

    values:     float64 ``[B, T, 5]`` in :data:`INPUT_FIELDS` order (volume 0 when unknown); from
                :func:`make_batch` a read-only view of the bars (as are ``timestamps``), never written to.
    mask:       bool ``[B, T]``; False marks left padding. Padded values repeat the first real bar.
    timestamps: ``datetime64[ns]`` ``[B, T]`` (UTC, naive) or None.
    future_timestamps: ``datetime64[ns]`` ``[B, horizon]`` or None; may be given as a function, called the first
                time a model reads them (only models with a calendar input do; the baseline never pays for them).
    """

    def __init__(self, values: np.ndarray, mask: np.ndarray, timestamps: np.ndarray | None = None,
                 future_timestamps: np.ndarray | Callable[[], np.ndarray] | None = None) -> None:
        self.values, self.mask, self.timestamps = values, mask, timestamps
        self._future = future_timestamps

    @property
    def future_timestamps(self) -> np.ndarray | None:
        if callable(self._future):
            self._future = self._future()
        return self._future

    @classmethod
    def concat(cls, batches: Sequence["ContextBatch"]) -> "ContextBatch":
        """One batch of every window of ``batches``, in order (future timestamps still computed on first read)."""
        def cat(attr):
            parts = [getattr(b, attr) for b in batches]
            return None if any(p is None for p in parts) else np.concatenate(parts)

        future = None
        if all(b._future is not None for b in batches):
            future = lambda: np.concatenate([b.future_timestamps for b in batches])  # noqa: E731
        return cls(cat("values"), cat("mask"), cat("timestamps"), future)

    @property
    def batch_size(self) -> int:
        return self.values.shape[0]

    @property
    def length(self) -> int:
        return self.values.shape[1]

    def field(self, name: str) -> np.ndarray:
        """``[B, T]`` values of one input field."""
        return self.values[:, :, INPUT_FIELDS.index(name)]

    def last_close(self) -> np.ndarray:
        """``[B]`` close of the last bar of each window (the decision bar)."""
        return self.values[:, -1, INPUT_FIELDS.index("close")]

    def window_keys(self) -> np.ndarray:
        """uint64 ``[B]``: each window's last timestamp (ns), or its position without timestamps.

        Models key their random streams on it, so a window's paths do not depend on which windows share
        the batch: the live loop's forecast for day t equals the backtest's.
        """
        if self.timestamps is None:
            return np.arange(self.batch_size, dtype=np.uint64)
        return self.timestamps[:, -1].astype("int64").astype(np.uint64)


@dataclass
class Forecast:
    """Sample paths ``[B, len(fields), num_samples, horizon]`` of absolute prices, plus run metadata.

    ``meta`` records what actually ran: ``model``, ``num_samples_used``, ``samples_per_batch_used``,
    ``compile_mode``, ``compiled`` (bool), ``fallback_reason`` and model-specific entries.
    ``quantiles`` ``[B, len(fields), len(quantile_levels), horizon]``: the model's own quantiles where it predicts
    them (Toto 2.0), else None; the samples are then drawn from them.
    """

    samples: np.ndarray
    fields: tuple[str, ...] = OUTPUT_FIELDS[:3]
    meta: dict = field(default_factory=dict)
    quantiles: np.ndarray | None = None
    quantile_levels: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.samples.ndim != 4 or self.samples.shape[1] != len(self.fields):
            raise ValueError(
                f"samples must be [B, {len(self.fields)} fields, S, H], got shape {self.samples.shape}"
            )

    @property
    def batch_size(self) -> int:
        return self.samples.shape[0]

    @property
    def num_samples(self) -> int:
        return self.samples.shape[2]

    @property
    def horizon(self) -> int:
        return self.samples.shape[3]

    def field(self, name: str) -> np.ndarray:
        """``[B, S, H]`` sample paths of one field."""
        if name not in self.fields:
            raise KeyError(f"forecast has fields {self.fields}, not {name!r}")
        return self.samples[:, self.fields.index(name)]

    def quantile(self, q: float, name: str = "close") -> np.ndarray:
        """``[B, H]`` quantile ``q`` in [0, 1]: from the model's own quantiles where it predicts them (the knot
        itself at a knot level, :func:`marketcast.forecast.quantiles.value_at` between), else over the samples."""
        if self.quantiles is not None and 0.0 < q < 1.0:
            from marketcast.forecast.quantiles import value_at  # torch: only quantile models pay for it

            return value_at(self.quantiles[:, self.fields.index(name)], self.quantile_levels, q)
        return quantile(self.field(name), q)

    def aggregate(self, spec: str, name: str = "close") -> np.ndarray:
        """``[B, H]`` point forecast by an aggregation spec (``median``, ``trimmed_mean_10``, ...)."""
        return aggregate(self.field(name), spec)

    def take(self, index) -> "Forecast":
        """A forecast for a subset of the batch (same metadata)."""
        quantiles = None if self.quantiles is None else self.quantiles[index]
        return Forecast(self.samples[index], self.fields, dict(self.meta), quantiles, self.quantile_levels)


@runtime_checkable
class Forecaster(Protocol):
    """Anything that turns a batch of context windows into sample paths."""

    name: str
    fields: tuple[str, ...]

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast: ...


def masked_prices(batch: ContextBatch, fields: Sequence[str], model: str) -> tuple[np.ndarray, np.ndarray]:
    """``[B, F, T]`` float64 values of ``fields`` (zeros where masked, like toto-ts's ``pad_array``) and their bool
    mask, refused in one line when a value inside the context is NaN or infinite (``model`` names the model)."""
    cols = [INPUT_FIELDS.index(f) for f in fields]
    values = np.asarray(batch.values, dtype=np.float64)[:, :, cols].transpose(0, 2, 1)
    mask = np.broadcast_to(np.asarray(batch.mask, dtype=bool)[:, None, :], values.shape)
    values = np.where(mask, values, 0.0)
    if not np.isfinite(values).all():
        raise ConfigError(f"{model} input has NaN or infinite {'/'.join(fields)} values inside the context; "
                          "clean the bars")
    return values, np.ascontiguousarray(mask)


def make_batch(
    frame: pd.DataFrame,
    ends: Sequence[int],
    context: int,
    horizon: int | None = None,
    calendar: MarketCalendar | None = None,
) -> ContextBatch:
    """Windows of ``frame`` ending at (and including) row positions ``ends``, each ``context`` bars long.

    A window that starts before row 0 is left-padded with its first real bar and masked. Nothing after
    ``end`` is read, so a decision made from window ``end`` cannot see the future. Windows are strided views
    of the bars (no copy when ``ends`` are consecutive). ``future_timestamps`` are the next ``horizon`` bar
    times on ``calendar`` (default: stocks, XNYS) for the bar spacing of each window (never read from the
    frame), computed when first read.
    """
    ends = np.asarray(ends, dtype=np.int64)
    if len(ends) == 0:
        raise ValueError("make_batch needs at least one window end")
    if context < 1:
        raise ValueError(f"context must be >= 1, got {context}")
    n = len(frame)
    if ends.min() < 0 or ends.max() >= n:
        raise ValueError(f"window ends must lie in [0, {n - 1}], got {ends.min()}..{ends.max()}")
    cols = [c for c in INPUT_FIELDS if c in frame.columns]
    data = frame[cols].to_numpy(dtype=np.float64)
    if "volume" not in frame.columns:
        data = np.concatenate([data, np.zeros((n, 1))], axis=1)
    index = pd.DatetimeIndex(frame.index)
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    stamps = index.to_numpy("datetime64[ns]")

    pad = context - 1  # row r of a padded array is bar r - pad; the window ending at bar t is rows t .. t + pad
    def windows(x: np.ndarray, first) -> np.ndarray:
        padded = np.concatenate([np.repeat(first, pad, axis=0), x])
        view = np.lib.stride_tricks.sliding_window_view(padded, context, axis=0)  # [n, ..., context]
        picked = view[ends[0]:ends[-1] + 1] if (np.diff(ends) == 1).all() else view[ends]
        picked.flags.writeable = False  # a copy when ends skip: read-only all the same
        return np.moveaxis(picked, -1, 1)

    values = windows(data, data[:1])
    mask = np.arange(context)[None, :] >= (pad - ends)[:, None]  # bar t - pad + j exists
    timestamps = windows(stamps, stamps[:1])
    future = None
    if horizon is not None:
        first = np.maximum(ends - pad, 0)
        future = lambda: _future_times(stamps, first, ends, horizon, calendar or calendar_for("stock"))  # noqa: E731
    return ContextBatch(values=values, mask=mask, timestamps=timestamps, future_timestamps=future)


def _future_times(stamps: np.ndarray, first: np.ndarray, ends: np.ndarray, horizon: int,
                  calendar: MarketCalendar) -> np.ndarray:
    """``[B, horizon]``: the next bar times after each window's last bar, for the bar interval of the window's
    own stamps (windows of one interval extrapolate together)."""
    kinds, steps = infer_intervals(stamps, first, ends)
    future = np.empty((len(ends), horizon), dtype="datetime64[ns]")
    groups = pd.DataFrame({"kind": kinds, "step": steps}).groupby(["kind", "step"], sort=False).indices
    for (kind, step), rows in groups.items():
        interval = BarInterval(kind, pd.Timedelta(int(step)), "")
        future[rows] = calendar.next_bar_times_many(stamps[ends[rows]], interval, horizon)
    return future


def _extrapolate(span: np.ndarray, last: np.datetime64, horizon: int,
                 calendar: MarketCalendar | None = None) -> np.ndarray:
    """Next ``horizon`` bar times after ``last`` (naive UTC) on ``calendar`` (default XNYS), for the bar
    interval of ``span`` (the window's own timestamps); what ``make_batch`` does for each window."""
    interval = infer_interval(np.asarray(span, dtype="datetime64[ns]"))
    lasts = np.asarray([last], dtype="datetime64[ns]")
    return (calendar or calendar_for("stock")).next_bar_times_many(lasts, interval, horizon)[0]
