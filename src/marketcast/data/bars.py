"""The one bar schema every part of marketcast reads."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import pandas as pd

from marketcast.data.asset import RULES
from marketcast.data.calendar import Annualisation, MarketCalendar, annualise, calendar_for, infer_interval
from marketcast.errors import DataError

PRICE_COLUMNS = ("open", "high", "low", "close")


@dataclass(frozen=True)
class Bars:
    """OHLCV bars of one symbol.

    ``frame`` has a UTC ``DatetimeIndex`` named ``timestamp`` (strictly increasing) and float64 columns
    ``open, high, low, close`` plus ``volume`` when the source had it. ``asset_class`` is one of
    :data:`marketcast.data.asset.ASSET_CLASSES`; it sets the calendar, the fee default and shorting
    (``asset_reason`` says how it was found, :mod:`marketcast.data.detect`). ``periods`` (``--periods-per-year``)
    replaces the calendar's periods per year for annualising.
    """

    symbol: str
    frame: pd.DataFrame
    asset_class: str = "stock"
    source: str = ""
    asset_reason: str = ""
    periods: float | None = None

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def calendar(self) -> MarketCalendar:
        return calendar_for(self.asset_class)

    @cached_property
    def annualisation(self) -> Annualisation:
        """Periods per year from the bar spacing and the calendar, with how they were found (raises a
        ``DataError`` on mixed spacing)."""
        where = f"{self.symbol} ({self.source or 'bars'})"
        if self.periods is None:
            return annualise(self.frame.index, self.calendar, where=where)
        try:
            found = annualise(self.frame.index, self.calendar, where=where)
            calendar_says, warnings = f"; the calendar gives {found.periods_per_year:,g}", found.warnings
            interval = found.interval
        except DataError:
            calendar_says, warnings, interval = "", (), infer_interval(self.frame.index)
        periods = int(self.periods) if float(self.periods).is_integer() else float(self.periods)
        return Annualisation(periods, interval, self.calendar.name,
                             f"{periods:,g} a year, set by --periods-per-year{calendar_says}", warnings)

    @property
    def periods_per_year(self) -> float:
        return self.annualisation.periods_per_year

    @property
    def allow_short(self) -> bool:
        return RULES[self.asset_class].allow_short

    @property
    def is_crypto(self) -> bool:
        return self.asset_class == "crypto"

    def _part(self, frame: pd.DataFrame) -> "Bars":
        """Some of these bars, annualised as the whole: a cut early in a file (one or two bars) has no spacing
        to infer a frequency from, and the market's periods per year do not change at a cut."""
        part = replace(self, frame=frame)
        try:
            part.__dict__["annualisation"] = self.annualisation  # the cached_property's own slot
        except DataError:
            pass  # the whole cannot be annualised either; the part says why when asked
        return part

    def head(self, n: int) -> "Bars":
        """The first ``n`` bars (used to cut history at a decision bar)."""
        return self._part(self.frame.iloc[:n])

    def rows(self, start: int, end: int) -> "Bars":
        """Bars at positions [start, end) (a live feed's history up to its clock)."""
        return self._part(self.frame.iloc[start:end])

    def slice(self, start, end) -> "Bars":
        """Bars with timestamps in [start, end] (inclusive, label based)."""
        return self._part(self.frame.loc[start:end])
