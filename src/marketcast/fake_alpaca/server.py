"""A faithful local stand-in for the Alpaca REST endpoints the adapter uses (tests only; 127.0.0.1, random port).

The account and its rules live in :class:`marketcast.fake_alpaca.exchange.Exchange` (each rule cited
there); this module is the HTTP face, with Alpaca's shapes and semantics:

* ``APCA-API-KEY-ID``/``APCA-API-SECRET-KEY`` headers, else 401 ``{"code": 40110000, ...}``;
* ``GET /v2/orders`` filters (alpacahq/alpaca-docs ``data/webapi/endpoints/orders.yaml``; alpaca-py
  ``alpaca/trading/requests.py`` ``GetOrdersRequest``): ``status``
  open | closed | all (default open), ``limit`` (default 50, at most 500), ``after``/``until`` (exclusive, on
  ``submitted_at``), ``direction`` (default desc), ``nested`` (legs under their parent instead of listed on
  their own), ``symbols``, ``side``;
* ``GET /v2/orders:by_client_order_id`` and ``GET /v2/orders/{id}`` (404 ``{"code": 40410000}`` when unknown),
  ``DELETE /v2/orders/{id}`` (204, then ``pending_cancel``);
* ``GET /v2/assets/{symbol}`` (crypto also by its legacy name without the slash), ``GET /v2/positions``,
  ``GET /v2/account``, ``GET /v2/clock`` (the fake's clock, what "now" is for a replayed year, in New York time
  with the NYSE session's state: :func:`marketcast.fake_alpaca.market.market_clock`);
* bars: ``limit`` (default 1000, at most 10,000) and ``next_page_token`` pagination, ``start``/``end``, never a bar
  after the clock (``/v2/stocks/bars``, ``/v1beta3/crypto/us/bars``: the ``GET /v2/stocks/{symbol}/bars``
  reference in alpacahq/alpaca-docs ``data/webapi/endpoints/bars-v2.yaml``; alpaca-py follows the token in
  ``alpaca/common/rest.py:368-409``). ``page_size`` caps a page lower than Alpaca does, so a test sees it;
* a 429 carries ``Retry-After`` and/or ``X-RateLimit-Reset`` (epoch seconds, as Alpaca sends it:
  https://forum.alpaca.markets/t/executing-orders/12029) as the test asks.

Tests steer it: :meth:`FakeAlpaca.fail` makes the next matching requests fail (a status with a body, a sleep
past the client's timeout, or processing a POST and then stalling so its reply is lost);
``kill_on_post`` SIGKILLs ``victim_pid`` right after the n-th order POST is booked, before it is answered (a
crash between the broker call and the journal), ``kill_on_delete`` right after the n-th cancel is taken (a
crash between a cancel and the close that waits for its confirmation; ``order_calls`` and ``kills`` say when each
landed); :meth:`FakeAlpaca.session` plays a day's
bars, whole or in its open and close phases (also as ``POST /_test/session`` with ``{"day", "phase"}`` for a loop
running in another process).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

import pandas as pd

from marketcast.fake_alpaca.exchange import D, TERMINAL, Exchange, Position, Refused
from marketcast.fake_alpaca.market import bars_of  # noqa: F401 - for the tests
from marketcast.fake_alpaca.market import STAMP, daily_bars, market_clock, nyse_calendar, utc

STOCK = {"class": "us_equity", "tradable": True, "fractionable": True, "shortable": True, "easy_to_borrow": True,
         "min_order_size": None, "min_trade_increment": None, "price_increment": None}
CRYPTO = {"class": "crypto", "tradable": True, "fractionable": True, "shortable": False, "easy_to_borrow": False,
          "min_order_size": "0.0001", "min_trade_increment": "0.0001", "price_increment": "1"}
PUBLIC = ("id", "client_order_id", "symbol", "side", "qty", "type", "order_type", "time_in_force", "status",
          "limit_price", "filled_qty", "filled_avg_price", "submitted_at", "updated_at", "filled_at", "order_class")


_stamps: dict[str, pd.Timestamp] = {}


def submitted(o: dict) -> pd.Timestamp:
    """An order's ``submitted_at`` as a time (parsed once: every listing sorts by it)."""
    text = o["submitted_at"]
    if text not in _stamps:
        _stamps[text] = utc(text)
    return _stamps[text]


def public(o: dict, nested: bool = True) -> dict:
    """An order (or leg) as Alpaca's order entity shows it; ``nested``: its legs under it."""
    out = {k: o.get(k) for k in PUBLIC}
    out["legs"] = [public(leg) for leg in o.get("legs") or []] if nested and o.get("legs") else None
    return out


def post_order(ex: Exchange, body: dict) -> tuple[int, dict]:
    """``POST /v2/orders`` as Alpaca answers it (alpacahq/alpaca-docs ``data/webapi/endpoints/orders.yaml``): 200
    with the new order entity, or the refusal's 403/422 with ``{"code", "message"}``. The server's route and
    the differential test's judge (which sends JSON text and reads the reply as JSON) both call it."""
    try:
        return 200, public(ex.submit(body))
    except Refused as exc:
        return exc.status, {"code": exc.code, "message": exc.message}


@dataclass
class Failure:
    method: str
    path: str  # prefix of the path
    status: int = 500
    body: dict | str | None = None
    times: int = 1
    retry_after: str | None = None
    rate_limit_reset: str | None = None
    sleep_s: float = 0.0
    after_processing: bool = False  # do the work, then stall (lost reply)
    echo_headers: bool = False  # put the request headers into the error body


class FakeAlpaca:
    def __init__(self, key: str, secret: str, assets: dict[str, dict] | None = None, **account) -> None:
        self.key, self.secret = key, secret
        assets = assets or {"AAPL": dict(STOCK), "BTCUSD": dict(CRYPTO)}
        self.exchange = Exchange({k.replace("/", ""): v for k, v in assets.items()}, **account)
        self.exchange.last.update({"AAPL": Decimal("190"), "BTCUSD": Decimal("60000")})
        self.quotes = {"AAPL": {"ap": 190.10, "bp": 189.90, "as": 1, "bs": 1, "t": "2024-05-01T19:59:59Z"},
                       "BTC/USD": {"ap": 60010.0, "bp": 59990.0, "t": "2024-05-01T19:59:59Z"}}
        self.bars = {"AAPL": daily_bars(120)}
        self.page_size = 10_000
        self._bar_json: dict[str, tuple[list, list]] = {}
        self.failures: list[Failure] = []
        self.requests: list[tuple[str, str, dict]] = []
        self.listings: list[dict] = []  # the query of each GET /v2/orders
        self.rejections: list[tuple[int, int, str, dict]] = []  # (status, code, message, body) of refused POSTs
        self.kill_on_post: set[int] = set()
        self.kill_on_delete: set[int] = set()
        self.order_deletes = 0
        self.victim_pid: int | None = None
        self.order_posts = 0
        self.order_calls: list[tuple[str, str]] = []  # (method, the clock) of each booked POST and taken DELETE
        self.kills: list[int] = []  # the index in order_calls of each SIGKILL
        self.played: set[str] = set()
        self.lock = self.exchange.lock
        nyse_calendar()  # built now, not by the first GET /v2/clock under the lock (the client times out)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeAlpaca":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ steering
    @property
    def orders(self) -> list[dict]:
        return self.exchange.orders

    @property
    def positions(self) -> list[dict]:
        return [self._position(s, p) for s, p in self.exchange.positions.items()]

    def fail(self, method: str, path: str, **kwargs) -> None:
        self.failures.append(Failure(method, path, **kwargs))

    def posts(self, client_order_id: str) -> int:
        return sum(1 for m, p, body in self.requests if m == "POST" and body.get("client_order_id") == client_order_id)

    def order(self, client_order_id: str) -> dict:
        return next(o for o in self.exchange.orders if o["client_order_id"] == client_order_id)

    def hold(self, symbol: str, qty: float, avg: float) -> None:
        """A position the account had before the loop (the user's own)."""
        with self.lock:
            self.exchange.positions[symbol.replace("/", "")] = Position(D(qty), D(avg))

    def fill(self, client_order_id: str, qty: float, price: float, at: str, leg: bool = False) -> dict:
        """Execute ``qty`` more of the order (or of its take-profit leg) at ``price`` at time ``at``."""
        with self.lock:
            parent = self.order(client_order_id)
            o = parent["legs"][0] if leg else parent
            self.exchange.fill(o, D(qty), D(price), at)
            return o

    def session(self, ts, phase: str = "all") -> None:
        """Play the bar stamped ``ts`` of every symbol through the working orders (once: a phase already played
        is not played again; on a day NYSE is closed only crypto trades). ``phase``: "all" (the clock moves to
        the close), or "open" (the clock stops before the ``cls`` cutoff) and later "close"
        (:meth:`marketcast.fake_alpaca.exchange.Exchange.session`)."""
        day = pd.Timestamp(ts).strftime("%Y-%m-%d")
        with self.lock:
            wanted = [p for p in (("open", "close") if phase == "all" else (phase,)) if (day, p) not in self.played]
            if not wanted:
                return
            self.played.update((day, p) for p in wanted)
            bars = {s.replace("/", ""): b for s, rows in self.bars.items() for b in rows if b["t"][:10] == day}
            self.exchange.session(day, bars, stocks_open=bool(nyse_calendar().is_session(day)),
                                  phase="all" if len(wanted) == 2 else wanted[0])

    # ------------------------------------------------------------------ handling
    def _take_failure(self, method: str, path: str) -> Failure | None:
        with self.lock:
            for f in self.failures:
                if f.method == method and path.startswith(f.path) and f.times > 0:
                    f.times -= 1
                    return f
        return None

    def _public(self, o: dict, nested: bool = True) -> dict:
        return public(o, nested)

    def _position(self, sym: str, p: Position) -> dict:
        return self.exchange.position_json(sym)

    def _list_orders(self, q: dict) -> tuple[int, object]:
        """One page, as Alpaca pages: ``limit`` orders at most, sorted by ``submitted_at`` as a time (ties in the
        order they were placed), ``after``/``until`` exclusive; a client walks the pages itself."""
        self.listings.append(dict(q))
        status, limit = q.get("status", "open"), int(q.get("limit", 50))
        if limit > 500 or limit < 1:
            return 422, {"code": 40010001, "message": "limit must be between 1 and 500"}
        nested = q.get("nested", "false").lower() == "true"
        ex = self.exchange
        rows = ex.orders if nested else ex.everything()

        def matches(o: dict) -> bool:
            done = o["status"] in TERMINAL
            return status == "all" or (status == "open") != done

        rows = [o for o in rows if matches(o) or (nested and any(matches(leg) for leg in o.get("legs") or []))]
        if "after" in q:
            rows = [o for o in rows if submitted(o) > utc(q["after"])]
        if "until" in q:
            rows = [o for o in rows if submitted(o) < utc(q["until"])]
        if "symbols" in q:
            wanted = {s.replace("/", "").upper() for s in q["symbols"].split(",")}
            rows = [o for o in rows if ex.key(o["symbol"]) in wanted]
        if "side" in q:
            rows = [o for o in rows if o["side"] == q["side"]]
        rows = sorted(rows, key=submitted, reverse=q.get("direction", "desc") == "desc")
        return 200, [self._public(o, nested) for o in rows[:limit]]

    def _bars(self, q: dict) -> tuple[int, object]:
        limit = int(q.get("limit", 1000))
        if not 1 <= limit <= 10_000:
            return 422, {"code": 42210000, "message": "invalid limit: must be between 1 and 10000"}
        clock = utc(self.exchange.clock)
        start = utc(q["start"]).strftime(STAMP) if "start" in q else ""
        end = min(utc(q["end"]), clock).strftime(STAMP) if "end" in q else clock.strftime(STAMP)
        rows = [(s, b, text) for s in q.get("symbols", "").split(",") for b, text in self._encoded(s)
                if start <= b["t"] <= end]  # bars are stamped in STAMP's format, so text order is time order
        first = int(q.get("page_token") or 0)
        page = rows[first: first + min(limit, self.page_size)]
        out: dict[str, list] = {}
        for s, _, text in page:
            out.setdefault(s, []).append(text)
        token = json.dumps(str(first + len(page)) if first + len(page) < len(rows) else None)
        bars = ", ".join(f"{json.dumps(s)}: [{', '.join(texts)}]" for s, texts in out.items())
        return 200, f'{{"bars": {{{bars}}}, "next_page_token": {token}}}'  # built from each bar's JSON, once

    def _encoded(self, symbol: str) -> list[tuple[dict, str]]:
        rows = self.bars.get(symbol, [])
        cached = self._bar_json.get(symbol)
        if cached is None or cached[0] is not rows or len(cached[1]) != len(rows):
            cached = (rows, [(b, json.dumps(b)) for b in rows])
            self._bar_json[symbol] = cached
        return cached[1]

    def _route(self, method: str, path: str, q: dict, body: dict) -> tuple[int, object]:
        ex = self.exchange
        ex.sweep()  # gtc orders past their lifetime are gone before anything is read or sent
        if path == "/v2/account":
            return 200, ex.account_json()
        if path == "/v2/clock":
            return 200, market_clock(ex.clock)
        if path.startswith("/v2/assets/"):
            sym = unquote(path.rsplit("/assets/", 1)[1])
            asset = ex.asset(sym)
            if asset is None:
                return 404, {"code": 40410000, "message": f"asset not found for {sym}"}
            return 200, {"id": sym, "symbol": sym, "status": "active", "exchange": "FAKE", **asset}
        if path == "/v2/positions":
            return 200, [self._position(s, p) for s, p in sorted(ex.positions.items())]
        if path == "/v2/orders" and method == "GET":
            return self._list_orders(q)
        if path == "/v2/orders" and method == "POST":
            status, payload = post_order(ex, body)
            if status != 200:
                self.rejections.append((status, payload["code"], payload["message"], body))
            return status, payload
        if path == "/v2/orders:by_client_order_id":
            o = next((o for o in ex.orders if o["client_order_id"] == q.get("client_order_id")), None)
            return (200, self._public(o)) if o else (404, {"code": 40410000, "message": "order not found"})
        if path.startswith("/v2/orders/"):
            order_id = path.rsplit("/", 1)[1]
            if method == "DELETE":
                try:
                    ex.cancel(order_id)
                except Refused as exc:
                    return exc.status, {"code": exc.code, "message": exc.message}
                return 204, None
            o = ex.find(order_id)
            if o is None:
                return 404, {"code": 40410000, "message": "order not found"}
            ex.poll(o)
            return 200, self._public(o)
        if path == "/_test/session" and method == "POST":  # a driver in another process plays a day (tests only)
            self.session(body["day"], body.get("phase", "all"))
            return 200, {"clock": ex.clock}
        if path in ("/v2/stocks/quotes/latest", "/v1beta3/crypto/us/latest/quotes"):
            syms = q.get("symbols", "").split(",")
            return 200, {"quotes": {s: self.quotes[s] for s in syms if s in self.quotes}}
        if path in ("/v2/stocks/bars", "/v1beta3/crypto/us/bars"):
            return self._bars(q)
        return 404, {"code": 40410000, "message": f"no route {method} {path}"}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Alpaca's servers (requests reuses the connection)
            disable_nagle_algorithm = True  # headers and body leave at once (no 40 ms delayed-ACK stall)

            def log_message(self, *args):  # keep test output quiet
                pass

            def _do(self, method: str) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                fake.requests.append((method, url.path, body))
                if (self.headers.get("APCA-API-KEY-ID"), self.headers.get("APCA-API-SECRET-KEY")) != (
                        fake.key, fake.secret):
                    return self._send(401, {"code": 40110000, "message": "request is not authorized"})
                failure = fake._take_failure(method, url.path)
                if failure is not None and not failure.after_processing:
                    if failure.sleep_s:
                        time.sleep(failure.sleep_s)
                        return self._send(504, {"message": "late"})
                    body_out = failure.body
                    if failure.echo_headers:
                        body_out = {"code": 50000000, "message": f"debug: {dict(self.headers)}"}
                    return self._send(failure.status, body_out, failure)
                with fake.lock:
                    status, payload = fake._route(method, url.path, {k: v[0] for k, v in parse_qs(url.query).items()},
                                                  body)
                    if method == "POST" and url.path == "/v2/orders":
                        fake.order_posts += 1
                        fake.order_calls.append((method, fake.exchange.clock))
                        if fake.order_posts in fake.kill_on_post and fake.victim_pid:
                            fake.kills.append(len(fake.order_calls) - 1)
                            os.kill(fake.victim_pid, signal.SIGKILL)  # booked, never answered
                            return None
                    if method == "DELETE" and url.path.startswith("/v2/orders/") and status < 300:
                        fake.order_deletes += 1
                        fake.order_calls.append((method, fake.exchange.clock))
                        if fake.order_deletes in fake.kill_on_delete and fake.victim_pid:
                            fake.kills.append(len(fake.order_calls) - 1)
                            os.kill(fake.victim_pid, signal.SIGKILL)  # the cancel is under way, never answered
                            return None
                if failure is not None and failure.after_processing:
                    time.sleep(failure.sleep_s or 2.0)
                    return self._send(504, {"message": "late"})
                self._send(status, payload)

            def _send(self, status: int, payload, failure: Failure | None = None) -> None:
                text = payload if payload is None or isinstance(payload, str) else json.dumps(payload)
                data = b"" if text is None else text.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if failure is not None and failure.retry_after is not None:
                        self.send_header("Retry-After", failure.retry_after)
                    if failure is not None and failure.rate_limit_reset is not None:
                        self.send_header("X-RateLimit-Reset", failure.rate_limit_reset)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_GET(self):
                self._do("GET")

            def do_POST(self):
                self._do("POST")

            def do_DELETE(self):
                self._do("DELETE")

        return Handler
