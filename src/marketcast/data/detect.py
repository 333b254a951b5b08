"""The asset class of a series of bars, from its timestamps first and its name second.

Rule (cheap: one pass over the UTC timestamps, weekday and hour by integer arithmetic; deterministic):

1. ``--asset-class`` wins, for every symbol or one (``SYMBOL=CLASS``).
2. The bar times. Bars of a day or less (intraday, daily) are read; weekly and longer bars say nothing
   (a monthly bar is stamped on the 1st of the month, a Saturday as often as a Monday), so there the name decides.

   * **Weekend bars mean crypto**: when at least :data:`WEEKEND_SHARE` (10 %) of the bars fall on a weekend,
     the series trades 24/7. For intraday bars the weekend is Saturday UTC and Sunday before 20:00 UTC (spot
     forex opens Sunday 17:00 New York, 21:00/22:00 UTC); for daily bars it is the two days of the week with the
     fewest bars, so a Tokyo stock's bars stamped 00:00 JST (15:00 UTC the day before, Sunday to Thursday) are
     still a five-day week. A 24/7 series has about 2/7 of its bars there; a stray weekend bar in a stock file
     (below the share) decides nothing.
   * **24/5 means forex**: intraday bars without weekend bars that cover at least :data:`FX_HOURS` (20) of
     the 24 UTC hours of the day trade around the clock on weekdays: forex (a future's 23-hour Globex session
     looks the same, so a name that reads as a future keeps ``future``).
   * **NYSE hours mean stock**: intraday bars without weekend bars, all between 08:00 and 01:00 UTC (the
     NYSE's pre-market opens 04:00 New York, its after-hours end 20:00) and fewer than 20 hours covered: a
     stock (or a future traded in its regular hours).
   * Weekday-only daily bars could be a stock, a forex pair or a future: the name decides among them, and a
     name that reads as crypto (which trades on weekends) gives way to ``stock``, with a warning.

3. The name (:func:`marketcast.data.asset.classify`) breaks the tie: it picks among the classes the bar times
   allow, and decides alone where they allow any (weekly, monthly, too few bars).

When the bar times overrule the name, one ``warning:`` line says so and how to choose otherwise.
"""

from __future__ import annotations

import warnings

import numpy as np

from marketcast.data.asset import ASSET_CLASSES, NO_PATTERN, check_asset_class, classify
from marketcast.data.spacing import DAY, infer_interval, ns_array
from marketcast.errors import DataWarning

HOUR = 3_600 * 10**9
WEEKEND_SHARE = 0.10  # share of bars on a weekend that makes a series 24/7
FX_HOURS = 20  # UTC hours of the day with bars that make a weekday series 24/5
FX_OPENS_UTC = 20  # Sunday bars from this UTC hour on may be forex (Sunday 17:00 New York is 21:00 or 22:00 UTC)
STOCK_HOURS = frozenset(range(8, 24)) | {0}  # NYSE pre-market 04:00 to after-hours 20:00 New York, in UTC
MIN_BARS = 5  # fewer bars than this tell nothing

#: the classes each pattern of bar times allows, the first the one chosen when the name is none of them
PATTERNS = {
    "24/7": ("crypto",),
    "24/5": ("forex", "future"),
    "exchange hours": ("stock", "future"),
    "weekdays": ("stock", "forex", "future"),
}


def bar_pattern(stamps) -> tuple[str | None, str]:
    """``(pattern, evidence)``: one of :data:`PATTERNS`' keys or None (the bar times say nothing), and the
    sentence that says why."""
    t = ns_array(stamps)
    if len(t) < MIN_BARS:
        return None, f"{len(t)} bars are too few to read a trading calendar from"
    interval = infer_interval(t)
    if interval.kind not in ("intraday", "daily"):
        return None, f"{interval.label} bars carry no weekday or hour information"
    day = t // DAY
    weekday = (day + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    hour = (t - day * DAY) // HOUR
    if interval.kind == "daily":  # the two quietest days of the week: a weekend in any time zone (00:00 Tokyo
        counts = np.sort(np.bincount(weekday, minlength=7))  # is 15:00 UTC the day before)
        share = float(counts[:2].sum() / len(t))
        where = "a weekend (the week's two quietest days, whatever the time zone)"
    else:
        share = float(((weekday == 5) | ((weekday == 6) & (hour < FX_OPENS_UTC))).mean())
        where = "a weekend (Saturday, or Sunday before 20:00 UTC)"
    if share >= WEEKEND_SHARE:
        return "24/7", f"{share:.0%} of the {len(t):,} bars fall on {where}: the market trades 24/7"
    if interval.kind == "daily":
        return "weekdays", "daily bars on weekdays only (a stock, a forex pair or a future)"
    hours = np.unique(hour)
    if len(hours) >= FX_HOURS:
        return "24/5", (f"{interval.label} bars in {len(hours)} of 24 hours of the day (UTC) and not on weekends: "
                        "the market trades 24/5")
    if set(hours.tolist()) <= STOCK_HOURS:
        return "exchange hours", (f"{interval.label} bars only in exchange hours ({len(hours)} hours of the day "
                                  "between 08:00 and 01:00 UTC) on weekdays")
    return None, f"{interval.label} bars in {len(hours)} hours of the day (UTC) match no calendar marketcast knows"


def resolve_asset_class(symbol: str, stamps, override: str | None = None, where: str | None = None
                        ) -> tuple[str, str]:
    """``(asset class, why)`` of ``symbol``'s bars at ``stamps`` (see the module docstring for the rule); warns
    (:class:`DataWarning`, one ``warning:`` line) when the bar times overrule the name."""
    name_class, name_why = classify(symbol)
    pattern, evidence = bar_pattern(stamps)
    if override is not None:
        cls = check_asset_class(override)
        if pattern is not None and cls not in PATTERNS[pattern]:
            _warn(f"{where or symbol}: the bar times say {PATTERNS[pattern][0]}, not {cls}: {evidence}; kept as "
                  f"{cls} because --asset-class says so")
        else:
            _warn_weekend_bars(stamps, cls, where or symbol)
        if cls == name_class:
            return cls, f"{name_why} (and --asset-class {cls})"
        return cls, f"{symbol}: set to {cls} by --asset-class (the symbol alone reads as {name_class})"
    if pattern is None:
        if name_why.endswith(NO_PATTERN) and len(ns_array(stamps)) >= MIN_BARS:  # weekly or monthly bars of a
            # name that matches no rule: the default decided, and says so (a monthly XBTM read as a stock silently)
            _warn(f"{where or symbol}: {evidence} and the name matches no asset-class rule, so stock is assumed; set "
                  "--asset-class to choose")
        return name_class, f"{name_why}; {evidence}"
    allowed = PATTERNS[pattern]
    if name_class in allowed:
        _warn_weekend_bars(stamps, name_class, where or symbol)
        return name_class, f"{name_why}; the bar times {'allow it' if len(allowed) > 1 else 'agree'}: {evidence}"
    chosen = allowed[0]
    _warn(f"{where or symbol}: the bar times say {chosen}, not {name_class} as the name reads: {evidence}; using "
          f"{chosen} (set --asset-class to choose)")
    return chosen, f"{symbol}: {evidence}, so {chosen} (the name alone reads as {name_class})"


def _warn(message: str) -> None:
    warnings.warn(DataWarning(message), stacklevel=3)


def _warn_weekend_bars(stamps, cls: str, where: str) -> None:
    """A stock's daily bars that fall on a weekend (below the 24/7 share, or kept by ``--asset-class stock``)
    are bars the exchange never traded: one warning counting them, with the first date."""
    if cls != "stock":
        return
    t = ns_array(stamps)
    if len(t) < MIN_BARS or infer_interval(t).kind != "daily":
        return
    weekday = (t // DAY + 3) % 7
    counts = np.bincount(weekday, minlength=7)
    quiet = np.argsort(counts, kind="stable")[:2]  # the week's two quietest days: a weekend in any time zone
    on_weekend = np.isin(weekday, quiet)
    if on_weekend.any():
        first = np.datetime64(int(t[on_weekend][0]), "ns").astype("datetime64[D]")
        n = int(on_weekend.sum())
        _warn(f"{where}: {n:,} of the {len(t):,} daily bars {'falls' if n == 1 else 'fall'} on a weekend (the first on "
              f"{first}), a day a stock exchange does not trade; check the file or set --asset-class")


__all__ = ["ASSET_CLASSES", "PATTERNS", "bar_pattern", "resolve_asset_class"]
