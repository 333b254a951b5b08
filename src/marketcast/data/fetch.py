"""Bars from Alpaca's market-data API (alpaca-py), for ``data fetch --source alpaca``
(:mod:`marketcast.data.sources` checks and writes them).

alpaca-py's historical clients follow ``next_page_token`` themselves (10,000 bars a page) and merge the
pages per symbol; symbols go out in requests of :data:`SYMBOLS_PER_REQUEST`. Stocks and crypto use their
own clients (crypto as ``BASE/QUOTE``).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Mapping, Sequence

import pandas as pd

from marketcast.data.asset import infer_asset_class
from marketcast.data.validate import check_bars
from marketcast.errors import AuthError, ConfigError, DataError, UnavailableError, first_line

KEY_VARS = ("APCA_API_KEY_ID", "ALPACA_API_KEY_ID", "ALPACA_API_KEY")
SECRET_VARS = ("APCA_API_SECRET_KEY", "ALPACA_API_SECRET_KEY", "ALPACA_SECRET_KEY")
DATA_URL_VAR = "APCA_API_DATA_URL"
SYMBOLS_PER_REQUEST = 100
_FIELDS = {"o": "open", "h": "high", "l": "low", "c": "close", "v": "volume"}


def alpaca_keys() -> tuple[str, str]:
    """The key pair from the environment (the variable names alpaca-py and Alpaca's docs use)."""
    key = next((os.environ[v] for v in KEY_VARS if os.environ.get(v)), "")
    secret = next((os.environ[v] for v in SECRET_VARS if os.environ.get(v)), "")
    if not key or not secret:
        raise ConfigError(f"Alpaca keys missing: set {KEY_VARS[0]} and {SECRET_VARS[0]} in the environment")
    return key, secret


def parse_timeframe(text: str):
    """``1Day``, ``1Hour``, ``15Min``, ``1Week``, ``3Month`` as an alpaca-py ``TimeFrame``."""
    from alpaca.data.timeframe import TimeFrame, TimeFrameUnit

    from marketcast.data.sources import timeframe_parts

    count, name = timeframe_parts(text)
    unit = next(u for u in TimeFrameUnit if u.value == name)
    try:
        return TimeFrame(count, unit)
    except ValueError as exc:
        raise ConfigError(f"--timeframe {text!r}: {exc}") from None


def alpaca_symbol(symbol: str, asset_class: str) -> str:
    """``BTCUSD``/``BTC-USD`` -> ``BTC/USD`` for crypto; stocks upper-cased."""
    if asset_class != "crypto":
        return symbol.upper()
    s = symbol.upper().replace("-", "/")
    quote = next((q for q in ("USDT", "USDC", "USD") if s.endswith(q) and len(s) > len(q)), None)
    return f"{s[:-len(quote)]}/{quote}" if "/" not in s and quote else s


def bars_frame(raw: list[dict], source: str) -> pd.DataFrame:
    """Alpaca's bar objects (``t, o, h, l, c, v``) as a validated frame with a UTC ``timestamp`` index."""
    frame = pd.DataFrame(raw).rename(columns=_FIELDS)
    index = pd.DatetimeIndex(pd.to_datetime(frame["t"], utc=True), name="timestamp")
    out = frame[[c for c in _FIELDS.values() if c in frame.columns]].astype("float64").set_index(index)
    check_bars(out, source)
    return out


def alpaca_error(exc: Exception, what: str) -> Exception:
    """An alpaca-py failure as the error class (and exit code) it deserves."""
    status = getattr(exc, "status_code", None)
    text = first_line(exc)
    if status in (401, 403):
        return AuthError(f"{what}: Alpaca refused the keys (HTTP {status}); check {KEY_VARS[0]} and {SECRET_VARS[0]}")
    if status is not None and status < 500 and status != 429:
        return DataError(f"{what}: Alpaca rejected the request (HTTP {status}): {text}")
    return UnavailableError(f"{what}: Alpaca is unavailable ({f'HTTP {status}' if status else type(exc).__name__}): "
                            f"{text}; try again later")


def refused_fields(exc: ValueError) -> str:
    """A pydantic ``ValidationError`` as one line: each refused field (named as the option that feeds it) with
    the value given and the model's reason."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return first_line(exc)
    return "; ".join(f"--{'.'.join(map(str, e.get('loc', ())))} {e.get('input')!r} refused: {e.get('msg')}"
                     for e in errors())


def fetch_alpaca(symbols: Sequence[str], start: datetime, end: datetime | None, timeframe: str, *,
                 asset_classes: Mapping[str, str | None] | None = None, adjustment: str = "all",
                 feed: str | None = None, url: str | None = None) -> dict[str, pd.DataFrame]:
    """Symbol (as given, upper-cased) -> its bars from ``start`` to ``end``; keys from the environment.
    ``asset_classes`` overrides the class inferred from a symbol (upper-cased keys; None: inferred)."""
    try:
        from alpaca.common.exceptions import APIError
        from alpaca.data.historical import CryptoHistoricalDataClient, StockHistoricalDataClient
        from alpaca.data.requests import CryptoBarsRequest, StockBarsRequest
    except ImportError:
        raise ConfigError("data fetch --source alpaca needs alpaca-py: pip install 'marketcast[alpaca]'") from None
    from requests.exceptions import RequestException

    key, secret = alpaca_keys()
    url = url or os.environ.get(DATA_URL_VAR) or None
    frame_of = parse_timeframe(timeframe)
    wanted = {s.upper(): infer_asset_class(s, (asset_classes or {}).get(s.upper())) for s in symbols}
    clients = {"stock": StockHistoricalDataClient(key, secret, raw_data=True, url_override=url),
               "crypto": CryptoHistoricalDataClient(key, secret, raw_data=True, url_override=url)}
    out: dict[str, pd.DataFrame] = {}
    for kind in ("stock", "crypto"):
        names = {alpaca_symbol(s, kind): s for s, k in wanted.items() if k == kind}
        batch = list(names)
        for i in range(0, len(batch), SYMBOLS_PER_REQUEST):
            chunk = batch[i:i + SYMBOLS_PER_REQUEST]
            what = f"alpaca {kind} bars for {', '.join(chunk[:3])}{' ...' if len(chunk) > 3 else ''}"
            common = dict(symbol_or_symbols=chunk, timeframe=frame_of, start=start, end=end)
            try:
                request = StockBarsRequest(**common, adjustment=adjustment, feed=feed) if kind == "stock" else \
                    CryptoBarsRequest(**common)
            except ValueError as exc:  # pydantic's ValidationError: one line naming the field, not a traceback
                raise ConfigError(f"{what}: {refused_fields(exc)}") from None
            try:
                raw = clients[kind].get_stock_bars(request) if kind == "stock" else \
                    clients[kind].get_crypto_bars(request)
            except (APIError, RequestException) as exc:
                raise alpaca_error(exc, what) from None
            for sym, bars in (raw or {}).items():
                if sym in names and bars:
                    out[names[sym]] = bars_frame(bars, f"alpaca:{sym}")
    missing = [s for s in wanted if s not in out]
    if missing:
        raise DataError(f"alpaca returned no {timeframe} bars for {', '.join(missing)} between {start:%Y-%m-%d} and "
                        f"{'now' if end is None else f'{end:%Y-%m-%d}'}; check the symbols and dates")
    return out

