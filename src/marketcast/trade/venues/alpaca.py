"""Alpaca adapter over alpaca-py (the optional ``alpaca`` extra, imported only when used).

What alpaca-py does by itself, and what this adapter changes:

* ``url_override`` wins over ``paper`` -> the adapter always passes the host the flags chose
  (:mod:`marketcast.trade.venues.endpoints`) and names it in ``endpoint``;
* no request timeout at all -> the client's ``requests`` session gets a default timeout;
* 429 and 504 are retried 3 times with a fixed 3 s sleep, for POSTs too (``alpaca/common/constants.py:11-13``
  ``DEFAULT_RETRY_*``, used by ``alpaca/common/rest.py`` ``_request``) -> turned off (``_retry = 0``); the adapter retries 429 after the later of
  ``Retry-After`` and ``X-RateLimit-Reset`` (epoch seconds; Alpaca sends ``X-Ratelimit-Limit/Remaining/
  Reset`` on every response, 200 requests a minute: https://forum.alpaca.markets/t/executing-orders/12029),
  capped; 5xx and timeouts are retried for reads only. A submit that times out or gets a 5xx has an unknown
  outcome: it raises :class:`BrokerUnavailable` and the loop's reconcile asks ``orders:by_client_order_id``;
* 401 -> :class:`~marketcast.errors.AuthError` (exit 4); an order status Alpaca does not document ->
  :class:`BrokerError` (never guessed);
* every error reaches the loop with the keys scrubbed out (:mod:`marketcast.trade.ops.redact`), as every log
  record does.

Crypto has no multi-leg orders, so the take-profit is not attached (:meth:`AlpacaBroker.attaches_take_profit`
is False) and the loop sends it as its own limit order once it sees the entry fill. Assets (increments, sizes,
shortable) come from ``GET /v2/assets/{symbol}`` and are cached for ``asset_ttl_s``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Mapping

from marketcast.errors import AuthError, ConfigError
from marketcast.trade.venues.alpaca_data import AlpacaMarketData, crypto_symbol
from marketcast.trade.interface import Broker, BrokerError, BrokerUnavailable, DuplicateOrder, OrderRejected, Snapshot
from marketcast.trade.venues.endpoints import Endpoint, data_url, trading_endpoint
from marketcast.trade.ops.redact import redact, register_secrets
from marketcast.trade.risk.rules import CRYPTO_FEE_CAP
from marketcast.trade.types import Asset
from marketcast.trade.types import (LIMIT, Account, Fill, MarketClock, Order, OrderRequest, Position,
                                            status_kind, utc_time)

log = logging.getLogger("marketcast.trade.venues.alpaca")

RECENT = 100  # closed orders looked at per listing: the loop's own live a bar or two
PAGE = 500  # GET /v2/orders: "limit ... Defaults to 50 and max is 500" (alpaca-py GetOrdersRequest)
KEY_VARS = ("APCA_API_KEY_ID", "ALPACA_API_KEY_ID", "ALPACA_API_KEY")
SECRET_VARS = ("APCA_API_SECRET_KEY", "ALPACA_API_SECRET_KEY", "ALPACA_SECRET_KEY")

def _f(value: Any) -> float | None:
    return None if value is None or value == "" else float(value)


class AlpacaBroker(AlpacaMarketData, Broker):
    """:class:`Broker` over alpaca-py's TradingClient and historical data clients (raw JSON mode)."""

    name = "alpaca"

    def __init__(self, api_key: str, secret_key: str, *, endpoint: Endpoint, data_url: str | None = None,
                 timeout_s: float = 10.0, max_retries: int = 3, max_retry_wait_s: float = 60.0,
                 asset_classes: Mapping[str, str] | None = None, asset_ttl_s: float = 3600.0) -> None:
        try:
            import requests
            from alpaca.data.historical import CryptoHistoricalDataClient, StockHistoricalDataClient
            from alpaca.trading.client import TradingClient
        except ImportError:  # pragma: no cover - depends on the environment
            raise ConfigError("the Alpaca broker needs alpaca-py: pip install 'marketcast[alpaca]'") from None
        if not api_key or not secret_key:
            raise ConfigError("Alpaca keys missing: set APCA_API_KEY_ID and APCA_API_SECRET_KEY")
        register_secrets(api_key, secret_key)
        self.mode, self.endpoint = endpoint.mode, str(endpoint)
        self.asset_classes = dict(asset_classes or {})
        self.timeout_s, self.max_retries, self.max_retry_wait_s = timeout_s, max_retries, max_retry_wait_s
        self.asset_ttl_s, self._assets = asset_ttl_s, {}
        self._requests = requests
        self.trading = TradingClient(api_key, secret_key, paper=endpoint.mode == "paper", raw_data=True,
                                     url_override=endpoint.url)
        self.stocks = StockHistoricalDataClient(api_key, secret_key, raw_data=True, url_override=data_url)
        self.crypto = CryptoHistoricalDataClient(api_key, secret_key, raw_data=True, url_override=data_url)
        for client in (self.trading, self.stocks, self.crypto):
            client._retry = 0  # alpaca-py's own retry ignores Retry-After and re-POSTs orders
            client._session = _timeout_session(requests, timeout_s)

    @classmethod
    def from_env(cls, live: bool = False, env: Mapping[str, str] | None = None, **kwargs) -> "AlpacaBroker":
        """Keys from the environment; the host from ``live`` (checked against ``APCA_API_BASE_URL`` before any
        request)."""
        env = os.environ if env is None else env
        endpoint, data = trading_endpoint(live, env), data_url(env)
        key = next((env[v] for v in KEY_VARS if env.get(v)), "")
        secret = next((env[v] for v in SECRET_VARS if env.get(v)), "")
        if not key or not secret:
            raise ConfigError(f"Alpaca keys missing: set {KEY_VARS[0]} and {SECRET_VARS[0]} in the environment")
        return cls(key, secret, endpoint=endpoint, data_url=data, **kwargs)

    def __repr__(self) -> str:
        return f"AlpacaBroker({self.endpoint})"

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
                    wait = self._retry_wait(exc)
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
                if status == 401:
                    raise AuthError(f"{what}: Alpaca refused the keys (HTTP 401): {body}") from None
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

    def _retry_wait(self, exc) -> float:
        """Seconds until a retry may work: the later of ``Retry-After`` (seconds) and ``X-RateLimit-Reset``
        (epoch seconds), 1 s if neither is usable, capped at ``max_retry_wait_s``."""
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        waits = []
        for name, to_wait in (("Retry-After", float), ("X-RateLimit-Reset", lambda v: float(v) - time.time())):
            try:
                waits.append(to_wait(headers[name]))
            except (KeyError, TypeError, ValueError):
                pass
        return max(0.0, min(max(waits) if waits else 1.0, self.max_retry_wait_s))

    def _is_crypto(self, symbol: str) -> bool:
        return self.asset_classes.get(symbol.upper()) == "crypto" or "/" in symbol

    @staticmethod
    def _order(raw: dict, parent: str | None = None, take_profit: float | None = None) -> Order:
        try:
            status_kind(raw["status"])
        except ValueError:
            raise BrokerError(f"order {raw.get('client_order_id')} has status {raw['status']!r}, which Alpaca does "
                              f"not document: not guessing what it means") from None
        tp = next((_f(leg["limit_price"]) for leg in raw.get("legs") or [] if leg.get("limit_price") is not None),
                  take_profit)
        return Order(id=str(raw["id"]), client_order_id=raw["client_order_id"], symbol=raw["symbol"].replace("/", ""),
                     side=raw["side"], qty=float(raw.get("qty") or 0), type=raw.get("type") or raw.get("order_type"),
                     status=raw["status"], limit_price=_f(raw.get("limit_price")), take_profit=tp,
                     filled_qty=float(raw.get("filled_qty") or 0), filled_avg_price=_f(raw.get("filled_avg_price")),
                     submitted_at=raw.get("submitted_at"), time_in_force=raw.get("time_in_force") or "day",
                     parent_client_order_id=parent)

    def _listing(self, status: str, nested: bool, limit: int = 500) -> list[dict]:
        from alpaca.trading.enums import QueryOrderStatus
        from alpaca.trading.requests import GetOrdersRequest

        req = GetOrdersRequest(status=QueryOrderStatus(status), limit=min(limit, 500), nested=nested)
        return self._call(f"get {status} orders", lambda: self.trading.get_orders(req))

    # ------------------------------------------------------------ Broker
    def account(self) -> Account:
        """``GET /v2/account`` (alpaca-py ``TradeAccount``): :func:`account_of`."""
        return account_of(self._call("get account", self.trading.get_account))

    def asset(self, symbol: str) -> Asset:
        """``GET /v2/assets/{symbol}`` (crypto by its legacy name without the slash, which Alpaca accepts),
        cached for ``asset_ttl_s``: :func:`asset_of`."""
        sym = symbol.upper().replace("/", "")
        cached = self._assets.get(sym)
        if cached is not None and time.monotonic() - cached[1] < self.asset_ttl_s:
            return cached[0]
        raw = self._call(f"get asset {sym}", lambda: self.trading.get_asset(sym), not_found=None)
        if raw is None:
            raise ConfigError(f"{symbol}: Alpaca does not list this symbol (GET /v2/assets/{sym}: 404); check its "
                              f"spelling (crypto as BTC/USD or BTCUSD) or drop it from trade.symbols")
        asset = asset_of(raw, sym)
        self._assets[sym] = (asset, time.monotonic())
        return asset

    def positions(self) -> list[Position]:
        return [position_of(p) for p in self._call("get positions", self.trading.get_all_positions)]

    def _views(self) -> tuple[list[dict], list[dict], dict[str, str]]:
        """The last :data:`RECENT` orders nested (legs under their parent), the working ones not nested (a
        leg on its own: once its entry has filled it is the order still working), and leg id -> parent's
        client id."""
        recent = self._listing("all", nested=True, limit=RECENT)
        working = self._listing("open", nested=False)
        return recent, working, {leg["id"]: raw["client_order_id"] for raw in recent for leg in raw.get("legs") or []}

    def open_orders(self) -> list[Order]:
        """Every working order, take-profit legs included, each leg naming its parent's client id. A ``held``
        leg (its entry not filled yet) is not working; it goes with its entry."""
        return self.snapshot().working

    def orders(self, limit: int = RECENT) -> list[Order]:
        return self._flat(self._listing("all", nested=True, limit=limit))

    def order_history(self, since: str | None = None) -> list[Order]:
        """Every order submitted at or after ``since`` (all when None), oldest first, legs after their parent.

        alpaca-py's ``TradingClient.get_orders`` makes one request and ``GetOrdersRequest.limit`` is "not
        pagination" (``alpaca/trading/requests.py``: "Defaults to 50 and max is 500"; ``after``: "only ones
        submitted after this timestamp"; ``direction``: "chronological order ... based on the submission
        time"; https://docs.alpaca.markets/reference/getallorders), so the pages are walked here:
        ``status=all``, ``nested=true``, ``direction=asc``, :data:`PAGE` a page, each page ``after`` the one
        before. ``after`` is exclusive and a page may end partway through the orders of one instant, so the
        next page starts after the page's second-newest ``submitted_at`` (floored to the microsecond a
        ``datetime`` carries; Alpaca's times have nanoseconds) and what was seen is dropped by id. A full page
        that adds nothing (more than a page of orders at two instants) raises :class:`BrokerError`: a partial
        history would hide the loop's orders."""
        import pandas as pd
        from alpaca.common.enums import Sort
        from alpaca.trading.enums import QueryOrderStatus
        from alpaca.trading.requests import GetOrdersRequest

        start = None if since is None else utc_time(since)
        after = None if start is None else start.floor("us") - pd.Timedelta(1, "us")
        rows: dict[str, dict] = {}
        while True:
            req = GetOrdersRequest(status=QueryOrderStatus.ALL, limit=PAGE, direction=Sort.ASC, nested=True,
                                   after=None if after is None else after.to_pydatetime())
            page = self._call("get order history", lambda: self.trading.get_orders(req))
            new = [o for o in page if o["id"] not in rows]
            rows.update((o["id"], o) for o in new)
            if len(page) < PAGE:
                break
            stamps = sorted({utc_time(o["submitted_at"]) for o in page})
            if not new or len(stamps) < 2:
                raise BrokerError(f"order history: a page of {PAGE} orders submitted from {stamps[0].isoformat()} to "
                                  f"{stamps[-1].isoformat()} cannot be paged past (after is on submitted_at)")
            after = stamps[-2].floor("us")
        kept = [o for o in sorted(rows.values(), key=lambda o: utc_time(o["submitted_at"]))  # ties: as listed
                if start is None or utc_time(o["submitted_at"]) >= start]
        return self._flat(kept[::-1])  # _flat takes Alpaca's newest-first order

    def _flat(self, recent: list[dict]) -> list[Order]:
        out = []
        for raw in reversed(recent):  # Alpaca lists newest first
            out.append(self._order(raw))
            out.extend(self._order(leg, raw["client_order_id"]) for leg in raw.get("legs") or [])
        return out

    def snapshot(self, since: str | None = None) -> Snapshot:
        recent, working, parents = self._views()
        return Snapshot(working_of(working, parents), self._flat(recent), self._fills(recent, working, parents, since))

    def order(self, order_id: str) -> Order | None:
        raw = self._call(f"get order {order_id}", lambda: self.trading.get_order_by_id(order_id), not_found=None)
        return None if raw is None else self._order(raw)

    def order_by_client_id(self, client_order_id: str) -> Order | None:
        raw = self._call("get order by client id", lambda: self.trading.get_order_by_client_id(client_order_id),
                         not_found=None)
        return None if raw is None else self._order(raw)

    def submit(self, request: OrderRequest) -> Order:
        """Send ``request`` as given (the loop's rules model has put it on Alpaca's grid); stocks attach the
        take-profit as an OTO leg."""
        order = order_request(request, self._is_crypto(request.symbol), self.attaches_take_profit(request.symbol))
        raw = self._call(f"submit {request.client_order_id}", lambda: self.trading.submit_order(order),
                         idempotent=False)
        return self._order(raw)

    def cancel(self, order_id: str) -> None:
        self._call(f"cancel {order_id}", lambda: self.trading.cancel_order_by_id(order_id), not_found=None)

    def market_clock(self) -> MarketClock:
        """``GET /v2/clock``: Alpaca's time (New York, with its offset) and the stock market's open and close
        (https://docs.alpaca.markets/reference/getclock; entity in alpacahq/alpaca-docs
        ``data/webapi/entities/clock.yaml``). The loop takes its "now" from here, not from the local clock."""
        raw = self._call("clock", self.trading.get_clock)
        return MarketClock(str(raw["timestamp"]), bool(raw["is_open"]), raw.get("next_open"), raw.get("next_close"))

    def fee_for(self, asset_class: str) -> float | None:
        """Crypto: the tier-1 taker fee, 25 bps (https://alpaca.markets/support/crypto-maker-taker-gmt-faq: maker
        0.15 %, taker 0.25 % up to $100,000 of 30-day volume). The loop's closes are market orders and its limit
        entries are often marketable, so it assumes the taker's fee; stocks keep the asset class's default."""
        return CRYPTO_FEE_CAP if asset_class == "crypto" else None

    def attaches_take_profit(self, symbol: str) -> bool:
        """Stocks get an OTO order (entry + take-profit leg); Alpaca has no OTO/bracket orders for crypto."""
        return not self._is_crypto(symbol)

    def fills(self, since: str | None = None) -> list[Fill]:
        """One cumulative snapshot per order and per take-profit leg that has filled anything.

        Alpaca's orders carry only ``filled_qty`` (cumulative) and ``filled_avg_price``, so each snapshot's
        id is ``order id@filled qty``: the journal stores each partial top-up once, as an increment. Orders
        are picked by when they last filled or changed (``filled_at``/``updated_at``), not when they were
        submitted, so an old order that fills later is still seen; working orders are always walked, closed
        ones among the last :data:`RECENT` (a fill missed beyond them shows as the broker holding more than the
        journal, which holds that symbol, or less, which halts). ``since`` is compared as a time. A leg's fill
        is booked under its parent's ``client_order_id`` as ``take_profit``. ``fee`` is 0: Alpaca's order
        objects carry no fee (stocks are commission-free; crypto fees are taken in the asset).
        """
        return self.snapshot(since).fills

    def _fills(self, recent: list[dict], working: list[dict], parents: dict[str, str], since: str | None):
        out, seen = [], set()
        after = None if since is None else utc_time(since)  # a time, not text: "...:00Z" > "...:00.5Z" as text
        rows = [(o, o["client_order_id"], "entry") for o in recent]
        rows += [(leg, o["client_order_id"], "take_profit") for o in recent for leg in o.get("legs") or []]
        rows += [(o, parents.get(o["id"], o["client_order_id"]), "take_profit" if o["id"] in parents else "entry")
                 for o in working]
        for o, owner, kind in rows:
            cum, avg = float(o.get("filled_qty") or 0), _f(o.get("filled_avg_price"))
            ts = o.get("filled_at") or o.get("updated_at") or o.get("submitted_at") or ""
            key = f"{o['id']}@{cum!r}"
            if cum <= 0 or avg is None or key in seen or (after is not None and ts and utc_time(ts) < after):
                continue
            seen.add(key)
            out.append(Fill(key, owner, o["symbol"].replace("/", ""), o["side"], cum, avg, 0.0, ts, kind,
                            order_id=str(o["id"]), cum_qty=cum))
        return out


def account_of(raw: dict) -> Account:
    """The account as ``GET /v2/account`` reports it (alpaca-py ``TradeAccount``'s names): crypto draws on
    ``non_marginable_buying_power`` (crypto-trading, "Margin and Short Selling"); ``last_equity``,
    ``daytrade_count`` and ``pattern_day_trader`` feed the pattern-day-trader protection (absent since Alpaca's
    2026-07-06 removal: then None, and the protection is not evaluated); ``account_blocked``,
    ``trading_blocked``, ``trade_suspended_by_user``, ``shorting_enabled`` and ``crypto_status`` say what the
    account may do at all (a flag the broker leaves out restricts nothing)."""
    count, pdt = raw.get("daytrade_count"), raw.get("pattern_day_trader")
    crypto = raw.get("crypto_status")
    return Account(float(raw["equity"]), float(raw["cash"]), float(raw["buying_power"]), str(raw.get("id", "")),
                   _f(raw.get("non_marginable_buying_power")), _f(raw.get("last_equity")),
                   None if count is None else int(count), None if pdt is None else bool(pdt),
                   bool(raw.get("account_blocked")), bool(raw.get("trading_blocked")),
                   bool(raw.get("trade_suspended_by_user")), raw.get("shorting_enabled") is not False,
                   None if crypto is None else str(getattr(crypto, "value", crypto)))


def position_of(raw: dict) -> Position:
    """One ``GET /v2/positions`` row (Alpaca's ``qty`` is already signed: negative for shorts)."""
    return Position(raw["symbol"].replace("/", ""), float(raw["qty"]), float(raw["avg_entry_price"]),
                    _f(raw.get("qty_available")))


def working_of(working: list[dict], parents: dict[str, str]) -> list[Order]:
    """The working orders of an ``open``, not nested listing (``parents``: leg id -> its entry's client id). A
    ``held`` leg goes with its entry, as the entry's take-profit, so a wash check sees the order it will be."""
    held = {parents[o["id"]]: _f(o.get("limit_price")) for o in working if o["status"] == "held" and o["id"] in parents}
    return [AlpacaBroker._order(o, parents.get(o["id"]), held.get(o["client_order_id"])) for o in working
            if o["status"] != "held"]


def asset_of(raw: dict, symbol: str) -> Asset:
    """The asset as ``GET /v2/assets/{symbol}`` reports it. A crypto asset's fee is taken from the asset bought,
    at most :data:`~marketcast.trade.risk.rules.CRYPTO_FEE_CAP`."""
    crypto = raw.get("class") == "crypto"
    return Asset(symbol, "crypto" if crypto else "stock", bool(raw.get("tradable")), bool(raw.get("fractionable")),
                 bool(raw.get("shortable")), bool(raw.get("easy_to_borrow")), _f(raw.get("min_order_size")),
                 _f(raw.get("min_trade_increment")), _f(raw.get("price_increment")),
                 CRYPTO_FEE_CAP if crypto else 0.0)


def order_request(request: OrderRequest, crypto: bool, attach: bool):
    """``request`` as alpaca-py's request object for ``POST /v2/orders`` (its ``to_request_fields()`` is the
    JSON body): crypto as ``BASE/USD``; a take-profit attached as an OTO leg where ``attach``."""
    from alpaca.trading.enums import OrderClass, OrderSide, TimeInForce
    from alpaca.trading.requests import LimitOrderRequest, MarketOrderRequest, TakeProfitRequest

    common = dict(symbol=crypto_symbol(request.symbol) if crypto else request.symbol.upper(), qty=request.qty,
                  side=OrderSide(request.side), time_in_force=TimeInForce(request.time_in_force),
                  client_order_id=request.client_order_id)
    if request.take_profit is not None and attach:
        common.update(order_class=OrderClass.OTO, take_profit=TakeProfitRequest(limit_price=request.take_profit))
    return (LimitOrderRequest(limit_price=request.limit_price, **common) if request.type == LIMIT
            else MarketOrderRequest(**common))


def _timeout_session(requests, timeout_s: float):
    """A requests Session that applies ``timeout_s`` to every request alpaca-py makes."""

    class TimeoutSession(requests.Session):
        def request(self, *args, **kwargs):
            kwargs.setdefault("timeout", timeout_s)
            return super().request(*args, **kwargs)

    return TimeoutSession()
