"""Bars from Yahoo Finance through ``yfinance`` (the ``yahoo`` extra): no keys, stocks, ETFs, indices (``^GSPC``),
forex (``EURUSD=X``), futures (``ES=F``) and crypto pairs (``BTC-USD``) as Yahoo names them.

Adjustment. Yahoo's chart API returns prices adjusted for splits and, separately, the adjusted close that also
takes out every dividend paid since. ``all`` (the default) scales each bar's open, high, low and close by
``adjclose / close`` (yfinance's ``auto_adjust``): a position held across an ex-dividend day then earns the
dividend instead of a false loss equal to it, so the backtest's returns are total returns, what a holder got.
``split`` keeps Yahoo's split-adjusted prices without dividends (the price returns of an index, levels close to
the traded ones). Unadjusted prices Yahoo does not serve. Both rewrite history: a new split or dividend scales
every earlier bar, which an incremental fetch finds as an overlap that disagrees (fetch the file anew).

Paging. Yahoo serves a daily or hourly range in one reply; 1-minute bars come at most 8 days a request
(:data:`MAX_SPAN`), so a longer range is fetched in pieces and joined.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterator, Sequence

import pandas as pd

from marketcast.errors import ConfigError, DataError, UnavailableError, first_line

ADJUSTMENTS = ("all", "split")
#: the longest range Yahoo serves in one request, by interval (others: any range in one)
MAX_SPAN = {"1m": pd.Timedelta(days=7)}
INTERVALS = ("1m", "2m", "5m", "15m", "30m", "60m", "90m", "1h", "1d", "5d", "1wk", "1mo", "3mo")
_COLUMNS = {"Open": "open", "High": "high", "Low": "low", "Close": "close", "Volume": "volume"}


def yahoo_interval(count: int, unit: str) -> str:
    """``(1, 'Day')`` -> ``1d``; ``(15, 'Min')`` -> ``15m``; an interval Yahoo does not serve is one line."""
    text = f"{count}{ {'Min': 'm', 'Hour': 'h', 'Day': 'd', 'Week': 'wk', 'Month': 'mo'}[unit]}"
    if text not in INTERVALS:
        raise ConfigError(f"--timeframe {count}{unit}: Yahoo serves {', '.join(INTERVALS)} "
                          "(as 1Min, 15Min, 1Hour, 1Day, 1Week, 1Month)")
    return text


def import_yfinance():
    try:
        import yfinance
    except ImportError:
        raise ConfigError("data fetch --source yahoo needs yfinance: pip install 'marketcast[yahoo]'") from None
    return yfinance


@contextmanager
def _quiet(yf) -> Iterator[None]:
    """yfinance's exceptions raised (not printed) and its log lines held back: each failure becomes one line."""
    logger = logging.getLogger("yfinance")
    level, hide = logger.level, yf.config.debug.hide_exceptions
    logger.setLevel(logging.CRITICAL + 1)
    yf.config.debug.hide_exceptions = False
    try:
        yield
    finally:
        logger.setLevel(level)
        yf.config.debug.hide_exceptions = hide


def yahoo_error(exc: Exception, symbol: str) -> Exception:
    """A yfinance or transport failure as the error class (and exit code) it deserves."""
    from curl_cffi.requests.exceptions import HTTPError, RequestException
    from yfinance import exceptions as yfe

    text = first_line(exc)
    status = getattr(getattr(exc, "response", None), "status_code", None) if isinstance(exc, HTTPError) else None
    if status == 404:
        exc = yfe.YFTickerMissingError(symbol, "Yahoo has no quote for it (HTTP 404)")
        text = first_line(exc)
    elif status is not None and status != 429 and status < 500:
        return DataError(f"yahoo {symbol}: Yahoo rejected the request (HTTP {status}): {text}")
    if isinstance(exc, yfe.YFRateLimitError):
        return UnavailableError(f"yahoo {symbol}: Yahoo rate-limited the requests (HTTP 429) after every retry; "
                                "try again later")
    if isinstance(exc, (RequestException, OSError, TimeoutError)):
        text = text.split(". See https://curl.se", 1)[0]  # curl's pointer to its error table
        return UnavailableError(f"yahoo {symbol}: Yahoo Finance cannot be reached ({type(exc).__name__}: {text}); "
                                "check the network and try again later")
    if isinstance(exc, (yfe.YFPricesMissingError, yfe.YFTzMissingError, yfe.YFTickerMissingError)):
        return DataError(f"yahoo {symbol}: no such symbol or no bars in the range (unknown or delisted: {text}); "
                         "check the name on finance.yahoo.com (e.g. BRK-B, ^GSPC, EURUSD=X, BTC-USD)")
    if isinstance(exc, (yfe.YFException, ValueError, KeyError, TypeError)):
        return DataError(f"yahoo {symbol}: Yahoo's reply cannot be read ({type(exc).__name__}: {text}); "
                         "try again later or another --timeframe")
    return exc


def mirror_session(base: str):
    """A curl_cffi session (the kind yfinance requires) that sends every request to ``base``, the path kept."""
    from urllib.parse import urlsplit

    from curl_cffi import requests as curl

    class Mirror(curl.Session):
        def request(self, method, url, *args, **kwargs):
            parts = urlsplit(url)
            return super().request(method, base.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else ""),
                                   *args, **kwargs)

    return Mirror()


def _frame(history: pd.DataFrame) -> pd.DataFrame:
    """yfinance's history (exchange-local index, capitalised columns) as a UTC-indexed float frame."""
    missing = [c for c in ("Open", "High", "Low", "Close") if c not in history.columns]
    if missing:
        raise ValueError(f"the reply has no {', '.join(missing)} column")
    out = history[[c for c in _COLUMNS if c in history.columns]].rename(columns=_COLUMNS).astype("float64")
    index = pd.DatetimeIndex(history.index)
    out.index = (index.tz_convert("UTC") if index.tz is not None else index.tz_localize("UTC")).rename("timestamp")
    return out


def fetch_yahoo(symbols: Sequence[str], start: datetime, end: datetime | None, interval: str, *,
                adjustment: str = "all", mirror: str | None = None,
                retry: Callable[[Callable[[], pd.DataFrame], type[Exception]], pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Symbol -> its bars from ``start`` to ``end`` (exclusive; None: now), in requests of at most
    :data:`MAX_SPAN`. ``mirror``: a host every request goes to instead (None: Yahoo); ``retry`` runs one request,
    again after a rate limit (``retry(call, RateLimitError)``)."""
    yf = import_yfinance()
    from yfinance.exceptions import YFRateLimitError

    if adjustment not in ADJUSTMENTS:
        raise ConfigError(f"--adjustment {adjustment!r}: Yahoo serves {', '.join(ADJUSTMENTS)}")
    stop = pd.Timestamp(end if end is not None else pd.Timestamp.now(tz="UTC").tz_localize(None) + pd.Timedelta("1D"))
    span = MAX_SPAN.get(interval, stop - pd.Timestamp(start) + pd.Timedelta("1D"))
    session = mirror_session(mirror) if mirror else None
    out: dict[str, pd.DataFrame] = {}
    with _quiet(yf):
        for symbol in symbols:
            ticker = yf.Ticker(symbol, session=session)
            pieces, lo = [], pd.Timestamp(start)
            while lo < stop:
                hi = min(lo + span, stop)
                try:
                    history = retry(lambda: ticker.history(start=lo.to_pydatetime(), end=hi.to_pydatetime(),
                                                           interval=interval, auto_adjust=adjustment == "all",
                                                           actions=False, keepna=True), YFRateLimitError)
                    pieces.append(_frame(history))
                except Exception as exc:  # noqa: BLE001 - mapped to one line by class, the rest re-raised
                    raise yahoo_error(exc, symbol) from None
                lo = hi
            out[symbol] = pd.concat(pieces) if pieces else pd.DataFrame()
    return out
