"""What the loop may trade and on which bars, decided in one place for ``trade run`` and ``trade replay``.

* The market check: the loop's rules model knows Alpaca's ``us_equity`` and ``crypto`` asset classes only, so a
  forex or futures symbol (``EURUSD``, ``ES=F``) is refused in one line, exit 2, before any file is made.
* The calendar filter: a daily stock row on a day that is no session of its calendar (a holiday or weekend row
  in a CSV, e.g. 2012-07-04) is dropped, so no stock decision is made on it and no paper order fills on it. The
  live loop never sees such a bar (Alpaca serves session bars only), so on that day it plans on the previous
  session's bar; the replay now does the same. Crypto's calendar is every day, so nothing of it is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from marketcast.data.bars import Bars
from marketcast.data.calendar import infer_interval
from marketcast.errors import ConfigError

log = logging.getLogger("marketcast.trade")

TRADED = ("stock", "crypto")  # what the rules model knows (Alpaca: us_equity and crypto asset classes)


def refuse_untraded(asset_classes: Mapping[str, str | None]) -> None:
    """One line, exit 2, naming each symbol whose asset class the loop cannot trade (forex, futures)."""
    odd = {s: c for s, c in asset_classes.items() if c not in TRADED}
    if odd:
        listed = ", ".join(f"{s} ({c})" for s, c in sorted(odd.items()))
        raise ConfigError(f"trade.symbols: {listed}: the loop trades {' and '.join(TRADED)} only; drop "
                          f"{'them' if len(odd) > 1 else 'it'} from the symbols (or pass --asset-class where the "
                          f"name misleads)")


def off_sessions(bars: Bars) -> np.ndarray:
    """Which rows of daily ``bars`` fall on a UTC date that is no session of their calendar (inside the span the
    calendar covers); all False for intraday bars and 24/7 markets."""
    index = pd.DatetimeIndex(bars.frame.index)
    if len(index) < 2 or infer_interval(index).kind != "daily":
        return np.zeros(len(index), dtype=bool)
    labels = bars.calendar.labels
    days = index.tz_convert("UTC").tz_localize(None).normalize().asi8
    covered = (days >= labels[0]) & (days <= labels[-1])
    return covered & ~np.isin(days, labels)


def tradable(bars: Mapping[str, Bars]) -> dict[str, Bars]:
    """``bars`` after the market check, each without its rows off its calendar's sessions (one WARNING line per
    symbol that had some). ``trade run``'s paper venue and ``trade replay`` both load their bars through here."""
    refuse_untraded({s: b.asset_class for s, b in bars.items()})
    out = {}
    for s, b in bars.items():
        off = off_sessions(b)
        if off.any():
            first = pd.Timestamp(b.frame.index[off][0])
            log.warning("%s: %d row(s) on days that are no %s session (first %s) are not traded on; the loop "
                        "plans on the session before, as it does live", s, int(off.sum()), b.calendar.name,
                        f"{first:%Y-%m-%d}")
            b = replace(b, frame=b.frame[~off])
        out[s] = b
    return out


def without_bars(bars: Mapping[str, Bars], lo: pd.Timestamp, hi: pd.Timestamp) -> list[str]:
    """The symbols with no bar in [lo, hi] (one WARNING line each): a replay skips them."""
    empty = [s for s, b in bars.items() if not ((b.frame.index >= lo) & (b.frame.index <= hi)).any()]
    for s in empty:
        b = bars[s].frame.index
        log.warning("%s: no bars between %s and %s (its bars run %s .. %s); it is not traded in this replay", s,
                    f"{lo:%Y-%m-%d}", f"{hi:%Y-%m-%d}", f"{b[0]:%Y-%m-%d}", f"{b[-1]:%Y-%m-%d}")
    return empty
