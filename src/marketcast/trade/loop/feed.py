"""Where the loop's bars come from: a history cut at the paper clock, or the broker's latest bars."""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

from marketcast.data.bars import Bars
from marketcast.errors import DataError
from marketcast.trade.interface import Broker
from marketcast.trade.loop.planner import BROKER_HISTORY


def history_feed(bars: Mapping[str, Bars], clock: Callable[[], str | None], history: int | None = None):
    """Bars of each symbol up to and including the clock's bar: all of them, or the last ``history``."""

    def feed(symbol: str) -> Bars:
        b = bars[symbol]
        now = clock()
        end = len(b.frame) if now is None else int(b.frame.index.searchsorted(pd.Timestamp(now), side="right"))
        if end == 0:
            raise DataError(f"{symbol}: no bars at or before {now}")
        start = 0 if history is None else max(0, end - history)
        return b.rows(start, end)

    return feed


def broker_feed(broker: Broker, asset_classes: Mapping[str, str], history: int = BROKER_HISTORY,
                periods_per_year: float | None = None):
    """The broker's most recent bars (live/paper Alpaca)."""

    def feed(symbol: str) -> Bars:
        rows = broker.latest_bars(symbol, history)
        if not rows:
            raise DataError(f"{symbol}: the broker returned no bars")
        frame = pd.DataFrame(
            {"open": [r.open for r in rows], "high": [r.high for r in rows], "low": [r.low for r in rows],
             "close": [r.close for r in rows], "volume": [r.volume for r in rows]},
            index=pd.DatetimeIndex(pd.to_datetime([r.timestamp for r in rows], utc=True), name="timestamp"),
        ).astype("float64")
        return Bars(symbol, frame, asset_classes.get(symbol, "stock"), f"broker:{broker.name}",
                    periods=periods_per_year)

    return feed
