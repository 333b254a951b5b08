"""Bars from a crypto exchange's public OHLCV through ``ccxt`` (the ``crypto`` extra): no keys, any exchange ccxt
lists (``ccxt:binance``, ``ccxt:coinbase``, ``ccxt:kraken``), pairs as ccxt names them (``BTC/USDT``).

Paging. An exchange returns at most a fixed number of candles a call (Binance 1,000, Coinbase 300, Kraken 720:
``exchange.features[...]['fetchOHLCV']['limit']``, else :data:`DEFAULT_LIMIT`); the next call starts one bar
after the last candle received, until the range is covered or a call brings nothing new. ccxt spaces the calls
by the exchange's own rate limit (``enableRateLimit``); a 429 reply is retried by the caller's ``retry``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Sequence

import pandas as pd

from marketcast.errors import ConfigError, DataError, UnavailableError, first_line

DEFAULT_LIMIT = 500
_UNITS = {"Min": "m", "Hour": "h", "Day": "d", "Week": "w", "Month": "M"}


def import_ccxt():
    try:
        import ccxt
    except ImportError:
        raise ConfigError("data fetch --source ccxt:EXCHANGE needs ccxt: pip install 'marketcast[crypto]'") from None
    return ccxt


def open_exchange(name: str, api_url: str | None = None):
    """The ccxt exchange ``name`` (public endpoints only); ``api_url`` sends every endpoint to that host instead
    (a mirror, or a test's local server), the paths kept."""
    ccxt = import_ccxt()
    if name not in ccxt.exchanges:
        near = ", ".join([e for e in ccxt.exchanges if e.startswith(name[:3])][:5])
        raise ConfigError(f"--source ccxt:{name}: ccxt has no exchange {name!r}"
                          f"{f' (did you mean {near}?)' if near else ''}; see python -c "
                          "'import ccxt; print(ccxt.exchanges)'")
    exchange = getattr(ccxt, name)({"enableRateLimit": True, "timeout": 30_000})
    if api_url:
        exchange.urls["api"] = _pointed(exchange.urls["api"], api_url.rstrip("/"))
    return exchange


def _pointed(tree, base: str):
    from urllib.parse import urlsplit

    if isinstance(tree, dict):
        return {k: _pointed(v, base) for k, v in tree.items()}
    return base + urlsplit(tree).path if isinstance(tree, str) else tree


def ccxt_timeframe(exchange, count: int, unit: str) -> str:
    text = f"{count}{_UNITS[unit]}"
    if text not in (exchange.timeframes or {}):
        raise ConfigError(f"--timeframe {count}{unit}: {exchange.id} serves {', '.join(exchange.timeframes or {})} "
                          "(as 1Min, 1Hour, 1Day, 1Week, 1Month)")
    return text


def per_call_limit(exchange) -> int:
    features = getattr(exchange, "features", None) or {}
    limit = ((features.get("spot") or {}).get("fetchOHLCV") or {}).get("limit")
    return int(limit) if limit else DEFAULT_LIMIT


def exchange_error(exc: Exception, what: str) -> Exception:
    """A ccxt failure as the error class (and exit code) it deserves."""
    import ccxt

    text = first_line(exc)
    if isinstance(exc, (ccxt.RateLimitExceeded, ccxt.DDoSProtection)):
        return UnavailableError(f"{what}: the exchange rate-limited the requests (HTTP 429) after every retry; "
                                "try again later")
    if isinstance(exc, ccxt.BadSymbol):
        return DataError(f"{what}: the exchange does not list this pair ({text}); check the pair's name "
                         "(BASE/QUOTE, e.g. BTC/USDT) on the exchange")
    if isinstance(exc, (ccxt.NetworkError, ccxt.ExchangeNotAvailable)):
        return UnavailableError(f"{what}: the exchange cannot be reached ({type(exc).__name__}: {text}); check "
                                "the network and try again later")
    if isinstance(exc, (ccxt.BaseError, ValueError, TypeError, IndexError, KeyError)):
        return DataError(f"{what}: the exchange's reply cannot be read ({type(exc).__name__}: {text})")
    return exc


def fetch_ccxt(exchange, symbols: Sequence[str], start: datetime, end: datetime | None, timeframe: str, *,
               retry: Callable) -> dict[str, pd.DataFrame]:
    """Pair -> its candles from ``start`` to ``end`` (exclusive; None: now), paged by :func:`per_call_limit`."""
    import ccxt

    step = exchange.parse_timeframe(timeframe) * 1000
    limit = per_call_limit(exchange)
    stop = int(pd.Timestamp(end).value // 10**6) if end is not None else None
    out: dict[str, pd.DataFrame] = {}
    for symbol in symbols:
        what = f"ccxt:{exchange.id} {symbol}"
        try:
            retry(exchange.load_markets, (ccxt.RateLimitExceeded, ccxt.DDoSProtection))
            if symbol not in exchange.markets:
                raise DataError(f"{what}: {exchange.id} does not list {symbol}; check the pair's name "
                                "(BASE/QUOTE, e.g. BTC/USDT)")
            rows: list[list] = []
            since = int(pd.Timestamp(start).value // 10**6)
            while stop is None or since < stop:
                page = retry(lambda: exchange.fetch_ohlcv(symbol, timeframe, since=since, limit=limit),
                             (ccxt.RateLimitExceeded, ccxt.DDoSProtection))
                fresh = [r for r in page or [] if r[0] >= since and (stop is None or r[0] < stop)]
                rows += fresh
                if not fresh:
                    break
                since = int(fresh[-1][0]) + step
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to one line by class, the rest re-raised
            raise exchange_error(exc, what) from None
        out[symbol] = _frame(rows, what)
    return out


def _frame(rows: list[list], what: str) -> pd.DataFrame:
    """ccxt's ``[ms, open, high, low, close, volume]`` rows as a UTC-indexed float frame."""
    if any(not isinstance(r, (list, tuple)) or len(r) < 5 for r in rows):
        raise DataError(f"{what}: the exchange's reply cannot be read (a candle is not [time, open, high, low, "
                        "close, volume])")
    frame = pd.DataFrame([list(r[:6]) + [None] * (6 - len(r[:6])) for r in rows],
                         columns=["t", "open", "high", "low", "close", "volume"])
    index = pd.DatetimeIndex(pd.to_datetime(frame.pop("t"), unit="ms", utc=True), name="timestamp")
    try:
        return frame.astype("float64").set_index(index)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{what}: the exchange's reply cannot be read ({first_line(exc)})") from None
