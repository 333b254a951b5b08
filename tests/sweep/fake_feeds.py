"""A local HTTP server (127.0.0.1, a thread) that answers as Yahoo's chart API and Binance's public REST API do,
from frames the test hands it: what ``data fetch --source yahoo|ccxt:binance`` is tested against, never the
network. ``MARKETCAST_FETCH_URL`` sends yfinance's and ccxt's requests here, the paths kept (yfinance through a
real curl_cffi session, ccxt through its own requests session).

Replies follow the shapes the services document: Yahoo's ``/v8/finance/chart/{symbol}`` (``chart.result[0]``
with ``meta``, ``timestamp``, ``indicators.quote`` and ``indicators.adjclose``; an unknown symbol is HTTP 404 with
``chart.error``), Binance's ``/api/v3/exchangeInfo`` and ``/api/v3/klines`` (arrays ``[open time, o, h, l, c, v,
close time, ...]``, at most ``limit`` from ``startTime``; an unknown symbol is HTTP 400 code -1121).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pandas as pd


class FakeFeeds:
    """``yahoo``: symbol -> frame (UTC index; open, high, low, close, volume, adjclose; NaN rows allowed);
    ``binance``: pair (``BTC/USDT``) -> frame; ``fail``: path prefix -> list of (status, body) served first,
    one per request; ``requests``: (path, query) in order."""

    def __init__(self) -> None:
        self.yahoo: dict[str, pd.DataFrame] = {}
        self.yahoo_zone = {"BTC-USD": "UTC"}
        self.binance: dict[str, pd.DataFrame] = {}
        self.fail: dict[str, list[tuple[int, object]]] = {}
        self.requests: list[tuple[str, dict]] = []

    def calls(self, prefix: str) -> int:
        return sum(1 for path, _ in self.requests if path.startswith(prefix))

    def __enter__(self) -> "FakeFeeds":
        feeds = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                feeds.requests.append((url.path, query))
                status, body = feeds.reply(url.path, query)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply(self, path: str, query: dict) -> tuple[int, object]:
        for prefix, queue in self.fail.items():
            if path.startswith(prefix) and queue:
                return queue.pop(0)
        if path.startswith("/v8/finance/chart/"):
            return self.chart(path.rsplit("/", 1)[1], query)
        if path.startswith("/v10/finance/quoteSummary/"):  # yfinance asks after a symbol without a time zone
            return 404, {"quoteSummary": {"result": None, "error": {
                "code": "Not Found", "description": f"Quote not found for symbol: {path.rsplit('/', 1)[1]}"}}}
        if path.endswith("/exchangeInfo"):
            return self.exchange_info(path)
        if path == "/api/v3/klines":
            return self.klines(query)
        if path.endswith("/getcrumb"):
            return 200, b"fake-crumb"
        return 200, b"<html>cookie</html>"  # fc.yahoo.com and the consent pages

    def chart(self, symbol: str, query: dict) -> tuple[int, object]:
        frame = self.yahoo.get(symbol)
        if frame is None:
            return 404, {"chart": {"result": None, "error": {
                "code": "Not Found", "description": "No data found, symbol may be delisted"}}}
        if "range" in query:  # yfinance's time-zone probe: the last bar
            rows = frame.iloc[-1:]
        else:
            t = frame.index.asi8 // 10**9
            rows = frame[(t >= int(query["period1"])) & (t < int(query["period2"]))]
        zone = self.yahoo_zone.get(symbol, "America/New_York")

        def values(col):
            return [None if pd.isna(v) else float(v) for v in rows[col]]

        result = {"meta": {"currency": "USD", "symbol": symbol, "exchangeTimezoneName": zone,
                           "timezone": "UTC" if zone == "UTC" else "EST", "gmtoffset": 0 if zone == "UTC" else -18000,
                           "instrumentType": "CRYPTOCURRENCY" if zone == "UTC" else "EQUITY",
                           "dataGranularity": query.get("interval", "1d"), "priceHint": 2,
                           "tradingPeriods": [[{"timezone": "UTC", "start": int(day), "end": int(day) + 86_400,
                                                "gmtoffset": 0}] for day in sorted(set(rows.index.normalize().asi8
                                                                                      // 10**9))]},
                  "timestamp": [int(t) for t in rows.index.asi8 // 10**9],
                  "indicators": {"quote": [{c: values(c) for c in ("open", "high", "low", "close", "volume")}],
                                 "adjclose": [{"adjclose": values("adjclose")}]}}
        return 200, {"chart": {"result": [result], "error": None}}

    def exchange_info(self, path: str) -> tuple[int, object]:
        if not path.startswith("/api/v3/"):  # futures markets: none
            return 200, {"timezone": "UTC", "serverTime": 0, "rateLimits": [], "symbols": []}
        symbols = [{"symbol": pair.replace("/", ""), "status": "TRADING", "baseAsset": pair.split("/")[0],
                    "quoteAsset": pair.split("/")[1], "baseAssetPrecision": 8, "quotePrecision": 8,
                    "quoteAssetPrecision": 8, "orderTypes": ["LIMIT", "MARKET"], "isSpotTradingAllowed": True,
                    "isMarginTradingAllowed": False, "permissions": ["SPOT"], "permissionSets": [["SPOT"]],
                    "filters": []} for pair in [*self.binance, "NOPE/USDT"]]  # NOPE/USDT: listed, never traded
        return 200, {"timezone": "UTC", "serverTime": 0, "rateLimits": [], "symbols": symbols}

    def klines(self, query: dict) -> tuple[int, object]:
        frame = next((f for p, f in self.binance.items() if p.replace("/", "") == query["symbol"]), None)
        if frame is None:
            return 200, []
        t = frame.index.asi8 // 10**6
        rows = frame[t >= int(query.get("startTime", 0))].iloc[:int(query.get("limit", 500))]
        step = int(pd.Timedelta(query["interval"].replace("m", "min")).value // 10**6)
        return 200, [[int(ms), *(f"{v:.8f}" for v in row[:4]), f"{row[4]:.8f}", int(ms) + step - 1, "0", 1, "0",
                      "0", "0"] for ms, row in zip(rows.index.asi8 // 10**6,
                                                   rows[["open", "high", "low", "close", "volume"]].to_numpy())]


def ohlc(close: pd.Series, volume: float = 1000.0) -> pd.DataFrame:
    """Bars around a close series: open the previous close, high and low 1 % beyond, a constant volume."""
    opens = close.shift(1).fillna(close.iloc[0])
    return pd.DataFrame({"open": opens, "high": pd.concat([opens, close], axis=1).max(axis=1) * 1.01,
                         "low": pd.concat([opens, close], axis=1).min(axis=1) * 0.99, "close": close,
                         "volume": volume}, index=close.index)
