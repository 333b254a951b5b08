"""Alpaca's market data for the loop: the latest quote and the last daily bars of a stock or a coin, through
alpaca-py's data clients, with the adapter's error handling (:meth:`AlpacaBroker._call`). Kept apart from the
trading calls in :mod:`marketcast.trade.venues.alpaca`, whose broker mixes it in."""

from __future__ import annotations

from marketcast.trade.types import BarRow, Quote


def crypto_symbol(symbol: str) -> str:
    """Alpaca's name of a coin: BTCUSD, BTC-USD -> BTC/USD."""
    s = symbol.upper().replace("-", "/")
    if "/" not in s:
        for quote in ("USDT", "USDC", "USD"):
            if s.endswith(quote):
                return f"{s[: -len(quote)]}/{quote}"
    return s


class AlpacaMarketData:
    """Quotes and bars; the class mixing it in provides ``_call``, ``_is_crypto``, ``market_clock``, and the
    ``stocks``/``crypto`` data clients."""

    def latest_quote(self, symbol: str) -> Quote | None:
        if self._is_crypto(symbol):
            from alpaca.data.requests import CryptoLatestQuoteRequest

            sym = crypto_symbol(symbol)
            raw = self._call("latest quote", lambda: self.crypto.get_crypto_latest_quote(
                CryptoLatestQuoteRequest(symbol_or_symbols=sym)))
        else:
            from alpaca.data.requests import StockLatestQuoteRequest

            sym = symbol.upper()
            raw = self._call("latest quote", lambda: self.stocks.get_stock_latest_quote(
                StockLatestQuoteRequest(symbol_or_symbols=sym)))
        q = (raw or {}).get(sym)
        if not q or not q.get("bp") or not q.get("ap"):
            return None
        return Quote(symbol.upper(), float(q["bp"]), float(q["ap"]), q.get("t"), "real")

    def latest_bars(self, symbol: str, limit: int) -> list[BarRow]:
        """The last ``limit`` daily bars, counted back from the broker's clock (``GET /v2/clock``, not the local
        one); alpaca-py follows ``next_page_token`` until the range is complete (``alpaca/common/rest.py:368-409``
        ``_get_marketdata``)."""
        from datetime import timedelta

        import pandas as pd
        from alpaca.data.timeframe import TimeFrame

        now = pd.Timestamp(self.market_clock().now).to_pydatetime(warn=False)
        start = now - timedelta(days=int(limit * 1.6) + 10)
        if self._is_crypto(symbol):
            from alpaca.data.requests import CryptoBarsRequest

            sym = crypto_symbol(symbol)
            req = CryptoBarsRequest(symbol_or_symbols=sym, timeframe=TimeFrame.Day, start=start)
            raw = self._call("bars", lambda: self.crypto.get_crypto_bars(req))
        else:
            from alpaca.data.requests import StockBarsRequest

            sym = symbol.upper()
            req = StockBarsRequest(symbol_or_symbols=sym, timeframe=TimeFrame.Day, start=start)
            raw = self._call("bars", lambda: self.stocks.get_stock_bars(req))
        rows = (raw or {}).get(sym, [])[-limit:]
        return [BarRow(r["t"], float(r["o"]), float(r["h"]), float(r["l"]), float(r["c"]), float(r.get("v", 0)))
                for r in rows]
