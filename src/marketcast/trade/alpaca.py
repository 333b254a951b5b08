"""Alpaca adapter over alpaca-py (the optional ``alpaca`` extra, imported only when used).

What alpaca-py does by itself, and what this adapter changes:

* no request timeout at all -> the adapter gives the client's ``requests`` session a default timeout;
* 429 and 504 are retried 3 times with a fixed 3 s sleep, ignoring ``Retry-After``, for POSTs too ->
  turned off (``_retry = 0``); the adapter retries 429 honouring ``Retry-After`` (capped), retries 5xx and
  timeouts for reads only. A submit that times out or gets a 5xx has an unknown outcome: it raises
  :class:`BrokerUnavailable` and the loop's reconcile asks ``orders:by_client_order_id`` before any retry;
* every error reaches the loop as a :class:`BrokerError` whose text has the keys scrubbed out
  (:func:`redact`); :class:`RedactingFilter` does the same for log records.

Paper endpoint by default; live only when the caller passes ``paper=False`` (the CLI requires ``--live``
and ``--i-understand-live-trading``). Crypto: time-in-force gtc/ioc only, never short, and no multi-leg
orders, so the take-profit is not attached (:meth:`AlpacaBroker.attaches_take_profit` is False) and the loop
sends it as its own limit order once it sees the entry fill.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Mapping

from marketcast.errors import ConfigError
from marketcast.trade.broker import Broker, BrokerError, BrokerUnavailable, DuplicateOrder, OrderRejected
from marketcast.trade.types import BUY, LIMIT, Account, BarRow, Fill, Order, OrderRequest, Position, Quote

log = logging.getLogger("marketcast.trade.alpaca")

KEY_VARS = ("APCA_API_KEY_ID", "ALPACA_API_KEY_ID", "ALPACA_API_KEY")
SECRET_VARS = ("APCA_API_SECRET_KEY", "ALPACA_API_SECRET_KEY", "ALPACA_SECRET_KEY")
_SECRETS: set[str] = set()


def redact(text: object) -> str:
    """``text`` with every registered key replaced by ``***``."""
    out = str(text)
    for s in _SECRETS:
        out = out.replace(s, "***")
    return out


class RedactingFilter(logging.Filter):
    """Scrubs registered keys from a log record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _SECRETS:
            record.msg = redact(record.getMessage())
            record.args = None
        return True


def _crypto_symbol(symbol: str) -> str:
    s = symbol.upper().replace("-", "/")
    if "/" not in s:
        for quote in ("USDT", "USDC", "USD"):
            if s.endswith(quote):
                return f"{s[: -len(quote)]}/{quote}"
    return s


def _f(value: Any) -> float | None:
    return None if value is None or value == "" else float(value)


class AlpacaBroker(Broker):
    """:class:`Broker` over alpaca-py's TradingClient and historical data clients (raw JSON mode)."""

    name = "alpaca"

    def __init__(self, api_key: str, secret_key: str, *, paper: bool = True, url_override: str | None = None,
                 data_url_override: str | None = None, timeout_s: float = 10.0, max_retries: int = 3,
                 max_retry_wait_s: float = 5.0, asset_classes: Mapping[str, str] | None = None) -> None:
        try:
            import requests
            from alpaca.data.historical import CryptoHistoricalDataClient, StockHistoricalDataClient
            from alpaca.trading.client import TradingClient
        except ImportError:  # pragma: no cover - depends on the environment
            raise ConfigError("the Alpaca broker needs alpaca-py: pip install 'marketcast[alpaca]'") from None
        if not api_key or not secret_key:
            raise ConfigError("Alpaca keys missing: set APCA_API_KEY_ID and APCA_API_SECRET_KEY")
        _SECRETS.update({api_key, secret_key})
        self.paper = paper
        self.asset_classes = dict(asset_classes or {})
        self.timeout_s, self.max_retries, self.max_retry_wait_s = timeout_s, max_retries, max_retry_wait_s
        self._requests = requests
        self.trading = TradingClient(api_key, secret_key, paper=paper, raw_data=True, url_override=url_override)
        self.stocks = StockHistoricalDataClient(api_key, secret_key, raw_data=True, url_override=data_url_override)
        self.crypto = CryptoHistoricalDataClient(api_key, secret_key, raw_data=True, url_override=data_url_override)
        for client in (self.trading, self.stocks, self.crypto):
            client._retry = 0  # alpaca-py's own retry ignores Retry-After and re-POSTs orders
            client._session = _timeout_session(requests, timeout_s)

    @classmethod
    def from_env(cls, paper: bool = True, **kwargs) -> "AlpacaBroker":
        key = next((os.environ[v] for v in KEY_VARS if os.environ.get(v)), "")
        secret = next((os.environ[v] for v in SECRET_VARS if os.environ.get(v)), "")
        if not key or not secret:
            raise ConfigError(f"Alpaca keys missing: set {KEY_VARS[0]} and {SECRET_VARS[0]} in the environment")
        kwargs.setdefault("url_override", os.environ.get("APCA_API_BASE_URL") or None)
        kwargs.setdefault("data_url_override", os.environ.get("APCA_API_DATA_URL") or None)
        return cls(key, secret, paper=paper, **kwargs)

    def __repr__(self) -> str:
        return f"AlpacaBroker(paper={self.paper})"

    # ------------------------------------------------------------ plumbing
    def _call(self, what: str, fn: Callable[[], Any], *, idempotent: bool = True, not_found: Any = ...):
        """Run one alpaca-py call, mapping its failures to BrokerError subclasses (keys scrubbed)."""
        from alpaca.common.exceptions import APIError

        attempt = 0
        while True:
            try:
                return fn()
            except APIError as exc:
                status = exc.status_code
                body = redact(str(exc))[:300]
                if status == 404 and not_found is not ...:
                    return not_found
                if status == 429 and attempt < self.max_retries:
                    wait = self._retry_after(exc)
                    log.warning("%s: rate limited (429), retry %d/%d in %.1fs", what, attempt + 1,
                                self.max_retries, wait)
                    time.sleep(wait)
                    attempt += 1
                    continue
                if status is not None and status >= 500 and idempotent and attempt < self.max_retries:
                    log.warning("%s: HTTP %s, retry %d/%d", what, status, attempt + 1, self.max_retries)
                    time.sleep(min(0.2 * 2**attempt, self.max_retry_wait_s))
                    attempt += 1
                    continue
                if status in (403, 422) and "client_order_id" in body and "unique" in body:
                    raise DuplicateOrder(f"{what}: {body}") from None
                if status in (400, 403, 422):
                    raise OrderRejected(f"{what}: rejected (HTTP {status}): {body}") from None
                if status == 429 or (status is not None and status >= 500):
                    raise BrokerUnavailable(f"{what}: HTTP {status} after {attempt} retries: {body}") from None
                raise BrokerError(f"{what}: HTTP {status}: {body}") from None
            except self._requests.exceptions.RequestException as exc:
                kind = "timed out" if isinstance(exc, self._requests.exceptions.Timeout) else "connection failed"
                if idempotent and attempt < self.max_retries:
                    log.warning("%s: %s, retry %d/%d", what, kind, attempt + 1, self.max_retries)
                    attempt += 1
                    continue
                raise BrokerUnavailable(f"{what}: {kind} ({type(exc).__name__}); outcome unknown") from None

    def _retry_after(self, exc) -> float:
        try:
            value = float(exc.response.headers.get("Retry-After", "1"))
        except (AttributeError, TypeError, ValueError):
            value = 1.0
        return max(0.0, min(value, self.max_retry_wait_s))

    def _is_crypto(self, symbol: str) -> bool:
        return self.asset_classes.get(symbol.upper()) == "crypto" or "/" in symbol

    @staticmethod
    def _order(raw: dict) -> Order:
        tp = None
        for leg in raw.get("legs") or []:
            if leg.get("limit_price") is not None:
                tp = _f(leg["limit_price"])
        return Order(id=str(raw["id"]), client_order_id=raw["client_order_id"], symbol=raw["symbol"].replace("/", ""),
                     side=raw["side"], qty=float(raw.get("qty") or 0), type=raw.get("type") or raw.get("order_type"),
                     status=raw["status"], limit_price=_f(raw.get("limit_price")), take_profit=tp,
                     filled_qty=float(raw.get("filled_qty") or 0), filled_avg_price=_f(raw.get("filled_avg_price")),
                     submitted_at=raw.get("submitted_at"))

    # ------------------------------------------------------------ Broker
    def account(self) -> Account:
        raw = self._call("get account", self.trading.get_account)
        return Account(float(raw["equity"]), float(raw["cash"]), float(raw["buying_power"]))

    def positions(self) -> list[Position]:
        raw = self._call("get positions", self.trading.get_all_positions)
        # Alpaca's qty is already signed (negative for shorts)
        return [Position(p["symbol"].replace("/", ""), float(p["qty"]), float(p["avg_entry_price"])) for p in raw]

    def _raw_orders(self, status: str, limit: int, nested: bool = True) -> list[dict]:
        from alpaca.trading.enums import QueryOrderStatus
        from alpaca.trading.requests import GetOrdersRequest

        req = GetOrdersRequest(status=QueryOrderStatus(status), limit=min(limit, 500), nested=nested)
        return self._call(f"get {status} orders", lambda: self.trading.get_orders(req))

    def _orders(self, status: str, limit: int) -> list[Order]:
        return [self._order(o) for o in self._raw_orders(status, limit)]

    def open_orders(self) -> list[Order]:
        """Every working order on its own, take-profit legs included (not nested): once an entry has filled
        its leg is the order still working, and closing the position must cancel it first. A ``held`` leg
        (its entry not filled yet) is not working; it goes when its entry is cancelled."""
        return [self._order(o) for o in self._raw_orders("open", 500, nested=False) if o["status"] != "held"]

    def orders(self, limit: int = 500) -> list[Order]:
        return self._orders("all", limit)

    def order_by_client_id(self, client_order_id: str) -> Order | None:
        raw = self._call("get order by client id", lambda: self.trading.get_order_by_client_id(client_order_id),
                         not_found=None)
        return None if raw is None else self._order(raw)

    def submit(self, request: OrderRequest) -> Order:
        from alpaca.trading.enums import OrderClass, OrderSide, TimeInForce
        from alpaca.trading.requests import LimitOrderRequest, MarketOrderRequest, TakeProfitRequest

        crypto = self._is_crypto(request.symbol)
        tif = request.time_in_force
        if crypto:
            if request.side != BUY and not any(p.symbol == request.symbol.upper() and p.qty > 0
                                               for p in self.positions()):
                raise OrderRejected(f"{request.symbol}: crypto cannot be sold short")
            tif = tif if tif in ("gtc", "ioc") else "gtc"
        common = dict(symbol=_crypto_symbol(request.symbol) if crypto else request.symbol.upper(), qty=request.qty,
                      side=OrderSide(request.side), time_in_force=TimeInForce(tif),
                      client_order_id=request.client_order_id)
        if request.take_profit is not None and self.attaches_take_profit(request.symbol):
            common.update(order_class=OrderClass.OTO, take_profit=TakeProfitRequest(limit_price=request.take_profit))
        order = (LimitOrderRequest(limit_price=request.limit_price, **common) if request.type == LIMIT
                 else MarketOrderRequest(**common))
        raw = self._call(f"submit {request.client_order_id}", lambda: self.trading.submit_order(order),
                         idempotent=False)
        return self._order(raw)

    def cancel(self, order_id: str) -> None:
        self._call(f"cancel {order_id}", lambda: self.trading.cancel_order_by_id(order_id), not_found=None)

    def attaches_take_profit(self, symbol: str) -> bool:
        """Stocks get an OTO order (entry + take-profit leg); Alpaca has no OTO/bracket orders for crypto."""
        return not self._is_crypto(symbol)

    def fills(self, since: str | None = None) -> list[Fill]:
        """One cumulative snapshot per order and per take-profit leg that has filled anything.

        Alpaca's orders carry only ``filled_qty`` (cumulative) and ``filled_avg_price``, so each snapshot's
        id is ``order id@filled qty``: the journal stores each partial top-up once, as an increment. Orders
        are picked by when they last filled or changed (``filled_at``/``updated_at``), not when they were
        submitted, so an old order that fills later is still seen; open orders are always walked. A leg's
        fill is booked under its parent's ``client_order_id`` as ``take_profit``. ``fee`` is 0: Alpaca's
        order objects carry no fee (stock trades are commission-free; crypto fees are taken in the asset).
        """
        out, seen = [], set()
        for raw in self._raw_orders("open", 500) + self._raw_orders("all", 500):
            parent = raw["client_order_id"]
            for o, kind in [(raw, "entry"), *((leg, "take_profit") for leg in raw.get("legs") or [])]:
                cum, avg = float(o.get("filled_qty") or 0), _f(o.get("filled_avg_price"))
                ts = o.get("filled_at") or o.get("updated_at") or o.get("submitted_at") or ""
                key = f"{o['id']}@{cum!r}"
                if cum <= 0 or avg is None or key in seen or (since is not None and ts < since):
                    continue
                seen.add(key)
                out.append(Fill(key, parent, o["symbol"].replace("/", ""), o["side"], cum, avg, 0.0, ts, kind,
                                order_id=str(o["id"]), cum_qty=cum))
        return out

    def latest_quote(self, symbol: str) -> Quote | None:
        if self._is_crypto(symbol):
            from alpaca.data.requests import CryptoLatestQuoteRequest

            sym = _crypto_symbol(symbol)
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
        from datetime import datetime, timedelta, timezone

        from alpaca.data.timeframe import TimeFrame

        start = datetime.now(timezone.utc) - timedelta(days=int(limit * 1.6) + 10)
        if self._is_crypto(symbol):
            from alpaca.data.requests import CryptoBarsRequest

            sym = _crypto_symbol(symbol)
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


def _timeout_session(requests, timeout_s: float):
    """A requests Session that applies ``timeout_s`` to every request alpaca-py makes."""

    class TimeoutSession(requests.Session):
        def request(self, *args, **kwargs):
            kwargs.setdefault("timeout", timeout_s)
            return super().request(*args, **kwargs)

    return TimeoutSession()
