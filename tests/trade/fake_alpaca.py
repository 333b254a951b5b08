"""A local stand-in for the handful of Alpaca REST endpoints the adapter uses (127.0.0.1, random port).

It checks the key headers, keeps orders in memory, refuses duplicate client_order_ids like Alpaca
(422), and can be told to fail the next matching requests: a status with a body (403/422 rejection,
429 with Retry-After, 5xx), a sleep past the client's timeout, or to process a POST and then stall so
its reply is lost. :meth:`FakeAlpaca.fill` executes (part of) an order or its take-profit leg the way
Alpaca reports it: cumulative ``filled_qty``, average ``filled_avg_price``, ``updated_at``/``filled_at``,
a held leg becoming ``new`` once its parent has filled, and the position moving.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def _daily_bars(n: int) -> list[dict]:
    """``n`` daily bars with a deterministic wiggle (enough history for the planner's windows)."""
    import math
    from datetime import date, timedelta

    out, close = [], 170.0
    for d in range(n):
        prev, close = close, 170.0 + 8 * math.sin(d / 5.0) + 3 * math.cos(d * 1.7)
        day = date(2024, 1, 1) + timedelta(days=d)
        out.append({"t": f"{day.isoformat()}T04:00:00Z", "o": prev, "h": max(prev, close) * 1.006,
                    "l": min(prev, close) * 0.994, "c": close, "v": 5e7})
    return out


@dataclass
class Failure:
    method: str
    path: str  # prefix of the path
    status: int = 500
    body: dict | str | None = None
    times: int = 1
    retry_after: str | None = None
    sleep_s: float = 0.0
    after_processing: bool = False  # do the work, then stall (lost reply)
    echo_headers: bool = False  # put the request headers into the error body


class FakeAlpaca:
    def __init__(self, key: str, secret: str) -> None:
        self.key, self.secret = key, secret
        self.orders: list[dict] = []
        self.positions: list[dict] = []
        self.quotes = {"AAPL": {"ap": 190.10, "bp": 189.90, "as": 1, "bs": 1, "t": "2024-05-01T19:59:59Z"},
                       "BTC/USD": {"ap": 60010.0, "bp": 59990.0, "t": "2024-05-01T19:59:59Z"}}
        self.bars = {"AAPL": _daily_bars(120)}
        self.failures: list[Failure] = []
        self.requests: list[tuple[str, str, dict]] = []
        self.lock = threading.Lock()
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

    def fail(self, method: str, path: str, **kwargs) -> None:
        self.failures.append(Failure(method, path, **kwargs))

    def posts(self, client_order_id: str) -> int:
        return sum(1 for m, p, body in self.requests if m == "POST" and body.get("client_order_id") == client_order_id)

    def order(self, client_order_id: str) -> dict:
        return next(o for o in self.orders if o["client_order_id"] == client_order_id)

    def fill(self, client_order_id: str, qty: float, price: float, at: str, leg: bool = False) -> dict:
        """Execute ``qty`` more of the order (or of its take-profit leg) at ``price`` at time ``at``."""
        with self.lock:
            parent = self.order(client_order_id)
            o = parent["legs"][0] if leg else parent
            done, avg = float(o["filled_qty"]), float(o["filled_avg_price"] or 0.0)
            total = done + qty
            o["filled_avg_price"] = str((done * avg + qty * price) / total)
            o["filled_qty"] = str(total)
            o["status"] = "filled" if total >= float(o["qty"]) - 1e-12 else "partially_filled"
            o["updated_at"] = at
            if o["status"] == "filled":
                o["filled_at"] = at
                for held in (o.get("legs") or []):
                    held["status"] = "new"
            sym = o["symbol"].replace("/", "")
            signed = qty if o["side"] == "buy" else -qty
            pos = next((p for p in self.positions if p["symbol"] == sym), None)
            if pos is None:
                self.positions.append({"symbol": sym, "qty": str(signed), "avg_entry_price": str(price)})
            else:
                pos["qty"] = str(float(pos["qty"]) + signed)
                if abs(float(pos["qty"])) < 1e-12:
                    self.positions.remove(pos)
            return o

    # ------------------------------------------------------------------ handling
    def _take_failure(self, method: str, path: str) -> Failure | None:
        with self.lock:
            for f in self.failures:
                if f.method == method and path.startswith(f.path) and f.times > 0:
                    f.times -= 1
                    return f
        return None

    def _route(self, method: str, path: str, query: dict, body: dict):
        q = {k: v[0] for k, v in query.items()}
        if path == "/v2/account":
            return 200, {"id": "acct", "status": "ACTIVE", "equity": "100000", "cash": "60000",
                         "buying_power": "120000", "currency": "USD"}
        if path == "/v2/positions":
            return 200, self.positions
        if path == "/v2/orders" and method == "GET":
            status = q.get("status", "open")
            done = ("filled", "canceled", "expired", "rejected")
            every = self.orders if q.get("nested", "").lower() == "true" else [  # not nested: legs are orders of their own
                x for o in self.orders for x in ({**o, "legs": None}, *(o.get("legs") or []))]
            rows = [o for o in every if status == "all" or (o["status"] not in done) == (status == "open")]
            return 200, rows[-int(q.get("limit", 500)):]
        if path == "/v2/orders" and method == "POST":
            with self.lock:
                if any(o["client_order_id"] == body.get("client_order_id") for o in self.orders):
                    return 422, {"code": 40010001, "message": "client_order_id must be unique"}
                order = {"id": str(uuid.uuid4()), "client_order_id": body["client_order_id"], "symbol": body["symbol"],
                         "side": body["side"], "qty": str(body["qty"]), "type": body["type"],
                         "order_type": body["type"], "time_in_force": body["time_in_force"], "status": "accepted",
                         "limit_price": body.get("limit_price"), "filled_qty": "0", "filled_avg_price": None,
                         "submitted_at": "2024-05-01T20:00:00Z", "updated_at": "2024-05-01T20:00:00Z",
                         "filled_at": None, "order_class": body.get("order_class", "simple"),
                         "legs": ([{"id": str(uuid.uuid4()), "client_order_id": str(uuid.uuid4()),
                                    "symbol": body["symbol"], "side": "sell" if body["side"] == "buy" else "buy",
                                    "qty": str(body["qty"]), "type": "limit", "status": "held", "filled_qty": "0",
                                    "filled_avg_price": None, "submitted_at": "2024-05-01T20:00:00Z",
                                    "updated_at": "2024-05-01T20:00:00Z", "filled_at": None,
                                    "limit_price": body["take_profit"]["limit_price"]}]
                                  if body.get("take_profit") else None)}
                self.orders.append(order)
            return 200, order
        if path == "/v2/orders:by_client_order_id":
            for o in self.orders:
                if o["client_order_id"] == q.get("client_order_id"):
                    return 200, o
            return 404, {"code": 40410000, "message": "order not found"}
        if path.startswith("/v2/orders/") and method == "DELETE":
            for o in [x for o in self.orders for x in (o, *(o.get("legs") or []))]:
                if o["id"] == path.rsplit("/", 1)[1]:
                    if o["status"] in ("filled", "canceled", "expired", "rejected"):
                        return 422, {"code": 42210000, "message": f"order is already {o['status']}"}
                    o["status"] = "canceled"
                    return 204, None
            return 404, {"code": 40410000, "message": "order not found"}
        if path in ("/v2/stocks/quotes/latest", "/v1beta3/crypto/us/latest/quotes"):
            syms = q.get("symbols", "").split(",")
            return 200, {"quotes": {s: self.quotes[s] for s in syms if s in self.quotes}}
        if path in ("/v2/stocks/bars", "/v1beta3/crypto/us/bars"):
            syms = q.get("symbols", "").split(",")
            return 200, {"bars": {s: self.bars[s] for s in syms if s in self.bars}, "next_page_token": None}
        return 404, {"code": 40410000, "message": f"no route {method} {path}"}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
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
                    return self._send(failure.status, body_out, failure.retry_after)
                status, payload = fake._route(method, url.path, parse_qs(url.query), body)
                if failure is not None and failure.after_processing:
                    time.sleep(failure.sleep_s or 2.0)
                    return self._send(504, {"message": "late"})
                self._send(status, payload)

            def _send(self, status: int, payload, retry_after: str | None = None) -> None:
                data = b"" if payload is None else (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
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
