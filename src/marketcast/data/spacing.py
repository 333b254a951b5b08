"""Bar spacing: the bar interval of a series of timestamps, and how it was found.

:func:`infer_interval` is part of the calendar API (:mod:`marketcast.data.calendar` re-exports it); it needs
no calendar, only the gaps between bars. Timestamps may carry any time zone; naive ones are UTC.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from marketcast.errors import DataError

DAY = 86_400 * 10**9  # nanoseconds
# (kind, typical gap in days, range of the median gap in days) for bars of a day or longer
_LONG_KINDS = (("daily", 1.0, 20 / 24, 1.5), ("weekly", 7.0, 4.5, 10.0), ("monthly", 30.44, 25.0, 36.0),
               ("quarterly", 91.3, 80.0, 100.0), ("yearly", 365.25, 350.0, 380.0))
_LABELS = {"daily": "1d", "weekly": "1w", "monthly": "1mo", "quarterly": "1q", "yearly": "1y"}
MIXED_ERROR_SHARE = 0.01  # more off-grid gaps than this is an error, fewer a warning


def ns(ts) -> int:
    """A timestamp as UTC nanoseconds (naive = UTC)."""
    t = pd.Timestamp(ts)
    return (t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")).as_unit("ns").value


def ns_array(stamps) -> np.ndarray:
    """Timestamps as UTC nanoseconds; naive ``datetime64`` arrays (UTC) take a fast path."""
    if isinstance(stamps, np.ndarray) and stamps.dtype.kind == "M":
        return stamps.astype("datetime64[ns]").view(np.int64)
    idx = pd.DatetimeIndex(stamps)
    idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
    return idx.as_unit("ns").asi8


def utc(value) -> pd.Timestamp:
    """UTC nanoseconds as a timestamp."""
    return pd.Timestamp(int(value), tz="UTC")


def span_text(gap: int) -> str:
    """``1 minute``, ``15 minutes``, ``1 hour``, ``2 days``: a gap of nanoseconds in words."""
    for unit, size in (("day", DAY), ("hour", 3_600 * 10**9), ("minute", 60 * 10**9), ("second", 10**9)):
        if gap >= size and gap % size == 0:
            return f"{gap // size} {unit}{'s' if gap // size != 1 else ''}"
    return str(pd.Timedelta(int(gap)))


@dataclass(frozen=True)
class BarInterval:
    """The bar size of a series and how it was found. ``step`` is the bar length for intraday bars and the
    typical gap otherwise; ``problem`` says why the spacing cannot be annualised (see :meth:`require`)."""

    kind: str
    step: pd.Timedelta
    how: str
    warnings: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "intraday":
            minutes = self.step // pd.Timedelta(minutes=1)
            return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}min"
        return _LABELS.get(self.kind, "irregular")

    def require(self, where: str) -> "BarInterval":
        if self.problem is not None:
            raise DataError(f"{where}: {self.problem}")
        return self


def infer_interval(stamps) -> BarInterval:
    """The bar interval of strictly increasing ``stamps`` from their gaps.

    Intraday when the most common gap is under 20 hours: that gap is the bar, and every gap shorter than a
    day must be a whole multiple of it (longer ones are closed hours). Otherwise the median gap decides
    (daily 20 hours to 1.5 days, weekly 4.5-10 days, monthly 25-36, quarterly 80-100, yearly 350-380) and gaps
    shorter than the kind allows mean finer bars are mixed in. More than 1 % of such gaps is a ``problem``; fewer are
    warnings.
    """
    t = ns_array(stamps)
    gaps = np.diff(t)
    if len(gaps) == 0:
        return BarInterval("irregular", pd.Timedelta(days=1), "a single bar has no spacing",
                           problem="a single bar has no spacing to infer the bar interval from; load more bars")
    if (gaps <= 0).any():
        return BarInterval("irregular", pd.Timedelta(days=1), "timestamps are not increasing",
                           problem="timestamps are not strictly increasing; sort the bars and drop duplicates")
    values, counts = np.unique(gaps, return_counts=True)
    mode = int(values[np.argmax(counts)])
    if mode < 20 * 3_600 * 10**9:
        off = (gaps % mode != 0) & (gaps < DAY)
        bar = span_text(mode).replace(" ", "-").removesuffix("s")  # "15-minute"
        how = f"{bar} bars: the most common gap, {counts.max() / len(gaps):.0%} of {len(gaps):,} gaps"
        return _judged("intraday", pd.Timedelta(mode), how, off, gaps, t,
                       f"not whole multiples of the bar ({span_text(mode)})")
    cum = np.cumsum(counts)  # the median from the sorted distinct gaps (np.median would sort again)
    middle = values[np.searchsorted(cum, [(len(gaps) - 1) // 2, len(gaps) // 2], side="right")]
    median_days = float(middle.mean()) / DAY
    for kind, typical, low, high in _LONG_KINDS:
        if low <= median_days <= high:
            how = (f"{kind} bars: the median gap of {len(gaps):,} gaps is {median_days:g} "
                   f"day{'s' if median_days != 1 else ''}")
            interval = _judged(kind, pd.Timedelta(days=typical), how, gaps < low * DAY, gaps, t,
                               f"shorter than {kind} bars allow ({low:g} days)")
            if kind != "daily" and (gaps > high * DAY).any():
                i = int(np.argmax(gaps))
                more = (f"{int((gaps > high * DAY).sum())} gaps are longer than {high:g} days, the largest "
                        f"{gaps[i] / DAY:g} days before {utc(t[i + 1]):%Y-%m-%d}: bars are missing")
                interval = BarInterval(kind, interval.step, how, (*interval.warnings, more), interval.problem)
            return interval
    return BarInterval("irregular", pd.Timedelta(int(middle.mean())), f"median gap {median_days:g} days",
                       problem=f"bars are a median {median_days:g} days apart, which is no bar size marketcast "
                               "annualises (intraday, daily, weekly, monthly, quarterly, yearly); resample them")


_SPAN_CELLS = 4_000_000  # (bars x distinct gaps) counted at once by infer_intervals


def infer_intervals(stamps, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``kind`` and ``step`` (ns) that :func:`infer_interval` gives for each window ``stamps[start:end + 1]``,
    for all windows at once: each window's gaps are counted per distinct gap value as a difference of running
    counts, and the mode and median are read off those counts as :func:`infer_interval` reads them."""
    t = ns_array(stamps)
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    values, codes = np.unique(np.diff(t), return_inverse=True)
    kinds = np.full(len(ends), "irregular", dtype=object)
    steps = np.full(len(ends), DAY, dtype=np.int64)  # no gaps or unsorted stamps: irregular, a day
    if len(values) == 0:
        return kinds, steps
    per_chunk = max(1, _SPAN_CELLS // max(len(values), 1) - int((ends - starts).max(initial=0)))
    for a in range(0, len(ends), per_chunk):
        s, e = starts[a:a + per_chunk], ends[a:a + per_chunk]
        lo, hi = int(s.min()), int(e.max())
        onehot = np.zeros((hi - lo + 1, len(values)), dtype=np.int64)
        onehot[np.arange(1, hi - lo + 1), codes[lo:hi]] = 1  # row i + 1 - lo counts gap i (stamps i to i + 1)
        running = np.cumsum(onehot, axis=0)
        counts = running[e - lo] - running[s - lo]  # [windows, distinct gaps]
        kinds[a:a + per_chunk], steps[a:a + per_chunk] = _kinds_from_counts(values, counts)
    return kinds, steps


def _kinds_from_counts(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = counts.sum(axis=1)
    valid = (n > 0) & (counts[:, values <= 0].sum(axis=1) == 0)
    mode = values[np.argmax(counts, axis=1)]  # the smallest of the most common gaps, as np.unique + argmax
    running = np.cumsum(counts, axis=1)
    middle = [values[np.minimum((running <= k[:, None]).sum(axis=1), len(values) - 1)].astype(np.float64)
              for k in ((n - 1) // 2, n // 2)]
    median = (middle[0] + middle[1]) / 2
    median_days = median / DAY
    kinds = np.full(len(n), "irregular", dtype=object)
    steps = np.where(valid, median.astype(np.int64), DAY)
    undecided = valid & (mode >= 20 * 3_600 * 10**9)
    for kind, typical, low, high in _LONG_KINDS:
        hit = undecided & (low <= median_days) & (median_days <= high)
        kinds[hit], steps[hit] = kind, pd.Timedelta(days=typical).value
        undecided &= ~hit
    intraday = valid & (mode < 20 * 3_600 * 10**9)
    kinds[intraday], steps[intraday] = "intraday", mode[intraday]
    return kinds, steps


def _judged(kind: str, step: pd.Timedelta, how: str, off: np.ndarray, gaps: np.ndarray, t: np.ndarray,
            what: str) -> BarInterval:
    if not off.any():
        return BarInterval(kind, step, how)
    i = int(np.argmax(off))
    text = (f"{int(off.sum()):,} of {len(gaps):,} gaps ({off.mean():.1%}) are {what}, the first "
            f"{span_text(int(gaps[i]))} before {utc(t[i + 1])}")
    if off.mean() > MIXED_ERROR_SHARE:
        return BarInterval(kind, step, how, problem=f"mixed bar spacing: {text}; resample the bars to one size")
    return BarInterval(kind, step, how, warnings=(text,))
