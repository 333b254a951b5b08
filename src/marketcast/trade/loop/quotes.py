"""The price a decision starts from: the broker's bid/ask (ADD_LATEST) or the last close."""

from __future__ import annotations

import dataclasses
import logging
import time

from marketcast.data.bars import Bars
from marketcast.trade.interface import Broker, BrokerError
from marketcast.trade.types import Quote

log = logging.getLogger("marketcast.trade")


def quote(broker: Broker, symbol: str, close: float, add_latest: bool, retries: int = 3,
          retry_wait_s: float = 0.5) -> Quote:
    """ADD_LATEST off: synthetic bid = ask = last close. On: the broker's quote, tried ``retries`` times; if
    none is usable the synthetic quote again (logged), so the cycle still decides."""
    synthetic = Quote(symbol, close, close, source="synthetic")
    if not add_latest:
        log.info("%s: synthetic quote bid = ask = last close %.4f (ADD_LATEST off)", symbol, close)
        return synthetic
    for attempt in range(1, retries + 1):
        try:
            q = broker.latest_quote(symbol)
            if q is not None and q.bid > 0 and q.ask >= q.bid:
                return q
            log.warning("%s: no usable quote (attempt %d/%d)", symbol, attempt, retries)
        except BrokerError as exc:
            log.warning("%s: quote failed (attempt %d/%d): %s", symbol, attempt, retries, exc)
        if attempt < retries:
            time.sleep(retry_wait_s)
    log.warning("%s: no quote after %d attempts; synthetic quote bid = ask = last close %.4f", symbol, retries, close)
    return synthetic


def with_last_close(bars: Bars, price: float) -> Bars:
    """``bars`` with the decision bar's close replaced by ``price`` (a real quote's mid: ADD_LATEST), its
    high/low widened to contain it, so the forecast and the decision start from the live price."""
    frame = bars.frame.copy()
    t = frame.index[-1]
    frame.loc[t, ["close", "high", "low"]] = [price, max(frame.at[t, "high"], price), min(frame.at[t, "low"], price)]
    return dataclasses.replace(bars, frame=frame)
