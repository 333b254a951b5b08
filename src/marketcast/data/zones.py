"""The time zone of naive timestamps: UTC unless ``--timezone`` names another, and a warning when the bars
themselves say they are exchange-local.

A file of New York-local 5-minute bars written without an offset used to be read as UTC without a word: every
bar moved 4-5 hours and still passed as a stock. :func:`localise` reads naive times in the zone given;
:func:`warn_local_session` says so in one warning line when intraday stock bars read as UTC mostly fall outside
the exchange's session but read in its zone fall inside it.
"""

from __future__ import annotations

import re
import warnings
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from marketcast.data.calendar import calendar_for
from marketcast.data.spacing import DAY
from marketcast.errors import ConfigError, DataError, DataWarning

#: The zone of each asset class's exchange calendar, where it has one (stocks: XNYS).
EXCHANGE_ZONES = {"stock": "America/New_York"}
_OFFSET = re.compile(r"(z|utc|gmt|[+-]\d{2}(:?\d{2})?)\s*$", re.IGNORECASE)
OUTSIDE, INSIDE = 0.5, 0.9  # read as UTC at most half the bars in session, in the exchange's zone at least 90 %


def check_timezone(name: str | None) -> str | None:
    """``name`` when it is an IANA time zone (or None); else one ConfigError line."""
    if name is None:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"--timezone {name!r} is not an IANA time zone; use a name such as America/New_York, "
                          "Europe/London or UTC") from None
    return name


def naive(values: pd.Series) -> bool:
    """Whether a date column's times carry no zone: datetimes without a tz, or text without an offset (epoch
    numbers are UTC by definition)."""
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return False
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        return True
    if pd.api.types.is_numeric_dtype(values.dtype):
        return False
    text = values.dropna().astype(str)
    return bool(len(text)) and not _OFFSET.search(text.iloc[0]) and not text.iloc[0].strip().isdigit()


def localise(stamps: pd.DatetimeIndex, zone: str, where: str) -> pd.DatetimeIndex:
    """Naive times (parsed as UTC) read as wall-clock times in ``zone``, back in UTC; a wall time the zone skips
    or repeats (a DST change) is one DataError line naming it."""
    local = stamps.tz_convert(None).tz_localize(zone, ambiguous="NaT", nonexistent="NaT")
    if (bad := np.flatnonzero(local.isna())).size:
        raise DataError(f"{where}: {stamps[bad[0]]:%Y-%m-%d %H:%M} does not exist or repeats in {zone} (a daylight "
                        "saving change); write the times with their UTC offset")
    return local.tz_convert("UTC").rename(stamps.name)


def _in_session(stamps: pd.DatetimeIndex, asset_class: str) -> float:
    """The share of ``stamps`` inside a session of the asset class's calendar (open <= t < close)."""
    cal = calendar_for(asset_class)
    t = stamps.asi8
    k = np.searchsorted(cal.opens, t, side="right") - 1
    return float(np.mean((k >= 0) & (t < cal.closes[np.maximum(k, 0)])))


def warn_local_session(stamps: pd.DatetimeIndex, asset_class: str, where: str) -> None:
    """One warning when intraday bars of an exchange-traded class, their naive times read as UTC, mostly fall
    outside its sessions while read in the exchange's zone they fall inside them."""
    zone = EXCHANGE_ZONES.get(asset_class)
    if zone is None or len(stamps) < 2 or np.median(np.diff(stamps.asi8)) >= DAY:
        return
    as_utc = _in_session(stamps, asset_class)
    as_local = _in_session(stamps.tz_convert(None).tz_localize(zone, ambiguous="NaT", nonexistent="NaT")
                           .dropna().tz_convert("UTC"), asset_class)
    if as_utc <= OUTSIDE and as_local >= INSIDE:
        warnings.warn(DataWarning(
            f"{where}: its times have no zone and were read as UTC, which puts {1 - as_utc:.0%} of the bars "
            f"outside the {asset_class} session; read as {zone} time {as_local:.0%} fall inside it: pass "
            f"--timezone {zone} if they are local times"), stacklevel=3)
