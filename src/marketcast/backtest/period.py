"""Which windows a run scores, for ``backtest``, ``forecast --calibration`` and ``sweep`` alike: the last N
(``--windows N``), every one the history allows (``--windows all``), or those whose decision bar falls in a
period (``--start/--end``, ISO dates, both inclusive).

A period never moves a window: the windows are still "the last ``windows`` bars with a t+1"
(:func:`marketcast.backtest.engine.decision_ends`) of the bars cut just after the period's last window, at
its settlement bar. The bars after that are not even read, so the future beyond the period cannot leak in,
and a period that ends at the data's last settled bar gives exactly the ``--windows N`` run of the same
windows. The cut keeps the whole file's annualisation (:meth:`marketcast.data.bars.Bars.head`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from marketcast.data.bars import Bars
from marketcast.errors import ConfigError, DataError

ALL = "all"
WINDOWS_METAVAR = "INTEGER|all"


def parse_windows(value, flag: str = "--windows") -> int | str | None:
    """``--windows``: a whole number >= 1 or ``all`` (None passes: not given)."""
    if value is None or isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    text = str(value).strip().lower()
    if text == ALL:
        return ALL
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{flag} {value}: give a whole number >= 1, or 'all' for every window the history "
                          "allows")
    return n


def parse_day(value: str | date | None, flag: str) -> date | None:
    """An ISO date ``YYYY-MM-DD`` (None passes)."""
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: give a date as YYYY-MM-DD, e.g. 2023-01-31") from None


@dataclass(frozen=True)
class Period:
    """What the user asked for: ``windows`` (N, ``all`` or None) or a date range (either end may be open)."""

    windows: int | str | None = None
    start: date | None = None
    end: date | None = None

    @classmethod
    def of(cls, windows=None, start=None, end=None, default: int | None = None) -> "Period":
        """Checked: ``--windows`` and ``--start/--end`` exclude each other, and the end is not before the start;
        ``default`` is the window count when neither is given."""
        windows = parse_windows(windows)
        start, end = parse_day(start, "--start"), parse_day(end, "--end")
        if windows is not None and (start or end):
            raise ConfigError(f"give --windows or --start/--end, not both (--windows {windows} with "
                              f"{'--start' if start else '--end'}); drop one")
        if start and end and end < start:
            raise ConfigError(f"--end {end} is before --start {start}; swap them")
        return cls(default if windows is None and not (start or end) else windows, start, end)

    @classmethod
    def last(cls, windows: int, end=None) -> "Period":
        """The last ``windows`` windows of the bars through ``end`` (a sweep cell: its count and [data] end)."""
        return cls(windows, None, parse_day(end, "end"))

    @property
    def dated(self) -> bool:
        return self.start is not None or self.end is not None

    @property
    def fixed(self) -> int | None:
        """The window count when it does not depend on the data (``--windows N``), else None."""
        return self.windows if isinstance(self.windows, int) else None

    def describe(self) -> str:
        if self.dated:
            return f"{self.start or 'the start'} to {self.end or 'the end'}"
        return "every window" if self.windows == ALL else f"the last {self.windows} windows"


def windows_of(bars: Bars, period: Period, min_context: int = 2) -> tuple[Bars, int]:
    """The bars to run on and how many windows: ``period`` made concrete for ``bars``.

    Decision bars t run from the first whose window holds ``min_context`` real bars (at least 2) to the last
    with a bar t+1. A dated period keeps those with a date in [start, end] and cuts the bars after the last
    one's settlement bar; ``--windows N`` and ``all`` keep the bars whole (N with an ``end``, as a sweep cell
    gives it, cuts at that end's last settlement bar first). A period that holds no window is one
    :class:`DataError` line saying which dates can be decided on and why."""
    n, need = len(bars), max(min_context, 2)
    where = f"{bars.symbol} ({bars.source or 'bars'})"
    if period.fixed is not None:  # the last N windows, of the bars through ``end`` when one is set (a sweep cell)
        return (bars if period.end is None else windows_of(bars, Period(end=period.end), min_context)[0]), period.fixed
    first = need - 1  # the first decision bar: need bars of history, then a bar to settle on
    if n - 1 - first < 1:
        raise DataError(f"{where}: {n:,} bars hold no window; the first needs {need} bars of history and the bar "
                        "after it; use a longer history")
    if not period.dated:
        return bars, n - 1 - first
    days = np.asarray(bars.frame.index[first:n - 1].date)
    keep = np.ones(len(days), dtype=bool)
    if period.start is not None:
        keep &= days >= period.start
    if period.end is not None:
        keep &= days <= period.end
    if not keep.any():
        lo, hi = days[0], days[-1]
        raise DataError(f"{where}: no window has its decision bar in {period.describe()}; with {need} bars of "
                        f"history for the first window, decision bars run {lo} to {hi}; pick dates in that range")
    chosen = np.flatnonzero(keep) + first
    last = int(chosen[-1])
    return bars.head(last + 2), len(chosen)  # through the last window's settlement bar


def cut_at(bars: Bars, end: date | None, min_rows: int = 2) -> Bars:
    """The bars up to and including ``end``'s last bar (a single forecast from ``--end``); all without it."""
    if end is None:
        return bars
    n = int(np.searchsorted(np.asarray(bars.frame.index.date), end, side="right"))
    if n < min_rows:
        index = bars.frame.index
        raise DataError(f"{bars.symbol} ({bars.source or 'bars'}): --end {end} leaves {n} bars, fewer than the "
                        f"{min_rows} a forecast needs; the bars run {index[0]:%Y-%m-%d} to {index[-1]:%Y-%m-%d}")
    return bars.head(n)
