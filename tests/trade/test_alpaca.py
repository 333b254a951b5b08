"""The Alpaca adapter and alpaca-py, for real, against a local fake of Alpaca's REST API."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("alpaca")

from marketcast.forecast import load_forecaster  # noqa: E402
from marketcast.trade.alpaca import AlpacaBroker  # noqa: E402
from marketcast.trade.broker import BrokerUnavailable, DuplicateOrder, OrderRejected, submit_once  # noqa: E402
from marketcast.trade.cycle import LoopConfig, TradingLoop  # noqa: E402
from marketcast.trade.feed import broker_feed  # noqa: E402
from marketcast.trade.gates import GateConfig  # noqa: E402
from marketcast.trade.ids import client_order_id  # noqa: E402
from marketcast.trade.monitor import Monitor  # noqa: E402
from marketcast.trade.planner import BacktestPlanner  # noqa: E402
from marketcast.trade.state import Intent, Journal  # noqa: E402
from marketcast.trade.types import OrderRequest  # noqa: E402

from .fake_alpaca import FakeAlpaca  # noqa: E402

KEY, SECRET = "PKFAKEKEYZ9Q7W3E5R1T", "sEcReT-fake-9f8e7d6c5b4a3f2e1d0c"
SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def fake():
    with FakeAlpaca(KEY, SECRET) as server:
        yield server


def adapter(fake, **kw) -> AlpacaBroker:
    kw.setdefault("timeout_s", 0.5)
    kw.setdefault("max_retries", 2)
    return AlpacaBroker(KEY, SECRET, url_override=fake.url, data_url_override=fake.url, **kw)


def order(cid="mc-000000000000000000000001", **kw) -> OrderRequest:
    kw = {"symbol": "AAPL", "side": "buy", "qty": 10, "limit_price": 188.5, "take_profit": 192.25, **kw}
    return OrderRequest(client_order_id=cid, **kw)


def test_account_positions_quotes_bars_and_order_lifecycle(fake):
    b = adapter(fake)
    assert (b.account().equity, b.account().cash, b.account().buying_power) == (100_000.0, 60_000.0, 120_000.0)
    fake.positions = [{"symbol": "AAPL", "qty": "-5", "side": "short", "avg_entry_price": "180.0"}]
    assert [(p.symbol, p.qty) for p in b.positions()] == [("AAPL", -5.0)]
    q = b.latest_quote("AAPL")
    assert (q.bid, q.ask, q.source) == (189.90, 190.10, "real") and q.spread == pytest.approx(190.10 / 189.90 - 1)
    bars = b.latest_bars("AAPL", 50)
    assert len(bars) == 50 and bars[-1].close == fake.bars["AAPL"][-1]["c"]

    placed = b.submit(order())
    method, path, body = fake.requests[-1]
    assert (method, path) == ("POST", "/v2/orders")
    assert body == {"symbol": "AAPL", "qty": 10, "side": "buy", "type": "limit", "time_in_force": "day",
                    "order_class": "oto", "take_profit": {"limit_price": 192.25}, "limit_price": 188.5,
                    "client_order_id": "mc-000000000000000000000001"}
    assert (placed.status, placed.take_profit, placed.limit_price) == ("accepted", 192.25, 188.5)
    assert b.order_by_client_id(placed.client_order_id).id == placed.id
    assert b.order_by_client_id("mc-unknown") is None  # 404 -> None
    assert [o.id for o in b.open_orders()] == [placed.id]
    b.cancel(placed.id)
    assert b.open_orders() == [] and b.orders()[0].status == "canceled"


def test_crypto_orders_use_gtc_no_legs_and_never_short(fake):
    b = adapter(fake, asset_classes={"BTCUSD": "crypto"})
    b.submit(order("mc-c1", symbol="BTCUSD", qty=0.25, limit_price=59_000.0, take_profit=61_000.0))
    body = fake.requests[-1][2]
    assert (body["symbol"], body["time_in_force"], "take_profit" in body) == ("BTC/USD", "gtc", False)
    with pytest.raises(OrderRejected, match="short"):
        b.submit(order("mc-c2", symbol="BTCUSD", side="sell", qty=0.25, limit_price=61_000.0, take_profit=59_000.0))
    assert fake.posts("mc-c2") == 0
    assert b.latest_quote("BTCUSD").mid == pytest.approx(60_000.0)


@pytest.mark.parametrize("status, message", [(403, "insufficient buying power"), (422, "qty must be > 0")])
def test_rejected_order_raises_order_rejected_once(fake, status, message):
    fake.fail("POST", "/v2/orders", status=status, body={"code": 40310000, "message": message}, times=5)
    with pytest.raises(OrderRejected, match=message):
        adapter(fake).submit(order())
    assert fake.posts("mc-000000000000000000000001") == 1  # a rejection is not retried


def test_duplicate_client_order_id_counts_as_already_submitted(fake):
    b = adapter(fake)
    first = b.submit(order())
    with pytest.raises(DuplicateOrder):
        b.submit(order())  # the fake answers 422 "client_order_id must be unique", as Alpaca does
    again, new = submit_once(b, order())
    assert not new and again.id == first.id
    assert fake.posts(first.client_order_id) == 2 and len(fake.orders) == 1


def test_429_honours_retry_after_instead_of_alpaca_pys_fixed_3s(fake):
    fake.fail("GET", "/v2/account", status=429, body={"message": "too many requests"}, retry_after="1")
    started = time.perf_counter()
    assert adapter(fake).account().equity == 100_000.0
    elapsed = time.perf_counter() - started
    assert 0.9 <= elapsed < 2.5  # one Retry-After wait; alpaca-py alone would sleep 3 s per retry
    assert [p for m, p, _ in fake.requests] == ["/v2/account", "/v2/account"]


def test_429_that_persists_gives_broker_unavailable_after_retries(fake):
    fake.fail("GET", "/v2/account", status=429, body={"message": "too many requests"}, retry_after="0", times=10)
    with pytest.raises(BrokerUnavailable, match="HTTP 429 after 2 retries"):
        adapter(fake).account()
    assert len(fake.requests) == 3


def test_5xx_retries_reads_but_never_blindly_reposts_an_order(fake):
    fake.fail("GET", "/v2/positions", status=503, body={"message": "unavailable"}, times=2)
    assert adapter(fake).positions() == []
    assert len(fake.requests) == 3
    fake.fail("POST", "/v2/orders", status=502, body={"message": "bad gateway"}, times=5)
    with pytest.raises(BrokerUnavailable, match="HTTP 502"):
        adapter(fake).submit(order())
    assert fake.posts("mc-000000000000000000000001") == 1


def test_timeout_is_enforced_and_a_lost_submit_reply_is_reconciled_not_resent(fake):
    fake.fail("GET", "/v2/account", sleep_s=1.5)
    started = time.perf_counter()
    assert adapter(fake, timeout_s=0.3).account().cash == 60_000.0  # first try times out, the retry works
    assert time.perf_counter() - started < 1.4
    fake.fail("POST", "/v2/orders", after_processing=True, sleep_s=1.0)
    b = adapter(fake, timeout_s=0.3)
    with pytest.raises(BrokerUnavailable, match="timed out"):
        b.submit(order())  # the server took the order but the reply never came
    found, new = submit_once(b, order())  # what reconcile does: ask by client_order_id first
    assert not new and found.client_order_id == "mc-000000000000000000000001"
    assert fake.posts("mc-000000000000000000000001") == 1 and len(fake.orders) == 1


def test_keys_never_reach_exceptions_logs_or_records(fake, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    fake.fail("GET", "/v2/account", echo_headers=True, times=10)  # a server that echoes our headers back
    b = adapter(fake, max_retries=1)
    with pytest.raises(BrokerUnavailable) as err:
        b.account()
    assert "***" in str(err.value) and KEY not in str(err.value) and SECRET not in str(err.value)
    assert KEY not in repr(b) and SECRET not in repr(b)
    fake.failures.clear()
    # a whole cycle through the adapter with real quotes: records and logs stay clean
    from marketcast.trade.cli import _setup_logging

    _setup_logging(tmp_path, verbose=True)
    logging.getLogger("marketcast.trade").info("account %s", f"{KEY}:{SECRET}")  # even if someone logs it
    loop = TradingLoop(b, Journal(tmp_path / "journal.db"),
                       BacktestPlanner(load_forecaster("baseline"), strategies=("maxdiff",)),
                       broker_feed(b, {"AAPL": "stock"}),
                       LoopConfig(("AAPL",), gates=GateConfig(min_edge=-1, min_sharpe=-1e9, max_drawdown=1.01),
                                  add_latest=True, mode="paper"),
                       Monitor(tmp_path), {"AAPL": "stock"})
    report = loop.run_cycle("2024-04-29T04:00:00+00:00")
    assert report.quotes == {"AAPL": "real"} and len(report.submitted) == 1, (report.skipped, report.planned, report.signals)
    record = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[-1])
    assert record["quotes"]["real"] == 1 and record["orders_submitted"] == 1
    texts = [(tmp_path / "records.jsonl").read_text(), (tmp_path / "trade.log").read_text(), caplog.text,
             *(r.getMessage() for r in caplog.records)]
    assert "***" in (tmp_path / "trade.log").read_text()
    for text in texts:
        assert KEY not in text and SECRET not in text
    for h in list(logging.getLogger("marketcast").handlers):
        if getattr(h, "_marketcast_trade", False):
            logging.getLogger("marketcast").removeHandler(h)
            h.close()


def test_cli_live_needs_confirmation_and_never_prints_keys(fake, tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC, APCA_API_KEY_ID=KEY, APCA_API_SECRET_KEY=SECRET,
               APCA_API_BASE_URL=fake.url, APCA_API_DATA_URL=fake.url)
    base = [sys.executable, "-m", "marketcast.trade", "run", "--symbols", "AAPL", "--state-dir", str(tmp_path),
            "--once", "--dry-run"]
    refused = subprocess.run([*base, "--live"], capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2 and "--i-understand-live-trading" in refused.stderr
    assert not any(m == "POST" for m, _, _ in fake.requests) and fake.requests == []
    ok = subprocess.run([*base, "--live", "--i-understand-live-trading", "--add-latest", "-v"],
                        capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "dry run, nothing sent" in ok.stdout.replace("\n", " ")
    assert [m for m, _, _ in fake.requests].count("POST") == 0 and "DELETE" not in [m for m, _, _ in fake.requests]
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing, not even its log
    for text in (ok.stdout, ok.stderr):
        assert KEY not in text and SECRET not in text
    missing = subprocess.run([*base, "--broker", "alpaca"], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in env.items() if not k.startswith("APCA_API_")})
    assert missing.returncode == 2 and "APCA_API_KEY_ID" in missing.stderr


D0, D1 = "2024-04-28T04:00:00+00:00", "2024-04-29T04:00:00+00:00"


def alpaca_loop(fake, tmp_path, symbol="AAPL", asset_class="stock", **kw) -> TradingLoop:
    """A loop over the adapter with its own journal connection, as a freshly (re)started process has."""
    b = adapter(fake, asset_classes={symbol: asset_class}, **kw)
    return TradingLoop(b, Journal(tmp_path / "journal.db"), BacktestPlanner(load_forecaster("baseline")),
                       broker_feed(b, {symbol: asset_class}), LoopConfig((symbol,)), None, {symbol: asset_class})


def submitted(loop: TradingLoop, request: OrderRequest, decision_ts: str, kind: str = "entry") -> None:
    """An order the loop sent on an earlier cycle: at the broker and journalled as submitted."""
    placed = loop.broker.submit(request)
    r = request
    loop.journal.record_intent(Intent(r.client_order_id, decision_ts, "maxdiff", r.symbol, r.side, r.qty, r.type,
                                      r.limit_price, r.take_profit, r.time_in_force, kind=kind))
    loop.journal.mark(r.client_order_id, "submitted", placed.id)


def test_fills_partial_top_ups_take_profit_legs_and_orders_filled_after_later_ones(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-a"), D1)  # buy 10 @ 188.5, OTO take-profit leg @ 192.25
    submitted(loop, order("mc-b", qty=4, limit_price=188.0, take_profit=None), D1)
    fake.fill("mc-a", 4, 188.5, at="2024-05-02T14:00:00Z")  # partial
    assert loop.reconcile(D1) == (1, 0)
    # b was submitted (05-01 20:00) before the last fill the journal has, and fills only now
    fake.fill("mc-b", 4, 188.0, at="2024-05-02T15:00:00Z")
    assert loop.reconcile(D1) == (1, 0)
    fake.fill("mc-a", 6, 188.3, at="2024-05-02T16:00:00Z")  # top-up to 10: avg 188.38
    assert loop.reconcile(D1) == (0, 0)  # a already had its entry fill: no new order filled
    fake.fill("mc-a", 10, 192.25, at="2024-05-02T18:00:00Z", leg=True)  # the take-profit leg
    loop.reconcile(D1)
    loop.reconcile(D1)  # nothing is booked twice
    got = [(f.client_order_id, f.kind, f.side, f.qty, round(f.price, 9), f.timestamp) for f in loop.journal.fills()]
    assert got == [
        ("mc-a", "entry", "buy", 4.0, 188.5, "2024-05-02T14:00:00Z"),
        ("mc-b", "entry", "buy", 4.0, 188.0, "2024-05-02T15:00:00Z"),
        ("mc-a", "entry", "buy", 6.0, 188.3, "2024-05-02T16:00:00Z"),
        ("mc-a", "take_profit", "sell", 10.0, 192.25, "2024-05-02T18:00:00Z"),
    ]
    leg = fake.order("mc-a")["legs"][0]["id"]
    assert [f.fill_id.split("@")[1] for f in loop.journal.fills()] == ["4.0", "4.0", "10.0", "10.0"]
    assert loop.journal.fills()[-1].fill_id == f"{leg}@10.0"
    assert loop.journal.filled_qty("mc-a") == 10.0


def test_leftover_close_and_cancels_are_journalled_and_a_restart_never_closes_twice(fake, tmp_path):
    first = alpaca_loop(fake, tmp_path, timeout_s=0.3)
    submitted(first, order("mc-entry"), D0)
    fake.fill("mc-entry", 10, 188.5, at="2024-04-28T15:00:00Z")  # filled; its take-profit leg is now working
    leg = fake.order("mc-entry")["legs"][0]
    assert leg["status"] == "new" and float(fake.positions[0]["qty"]) == 10.0
    close_id = client_order_id("close", "AAPL", D1, "sell")
    fake.fail("POST", "/v2/orders", after_processing=True, sleep_s=1.0)  # the server takes the close, the reply is lost
    assert first.reconcile(D1) == (1, 1)  # the entry's fill is booked, the leg cancelled
    assert leg["status"] == "canceled"  # the working take-profit leg goes before the position is closed
    [cancel] = first.journal.cancels()
    assert (cancel["order_id"], cancel["status"], cancel["decision_ts"]) == (leg["id"], "done", D1)
    intent = first.journal.intent(close_id)
    assert (intent.kind, intent.status, intent.side, intent.qty) == ("close", "pending", "sell", 10)
    assert first.journal.submission_counts() == {close_id: 1}
    for _ in range(2):  # restarted processes reconcile the same bar: the close is found, never sent again
        again = alpaca_loop(fake, tmp_path)
        assert again.reconcile(D1) == (0, 0)
    assert fake.posts(close_id) == 1 and len([o for o in fake.orders if o["type"] == "market"]) == 1
    closed = again.journal.intent(close_id)
    assert closed.status == "submitted" and closed.broker_order_id == fake.order(close_id)["id"]
    assert fake.order(close_id)["status"] == "accepted" and again.journal.submission_counts() == {close_id: 1}


def test_a_kill_between_journal_and_broker_call_is_finished_once_on_restart(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-entry", take_profit=None), D0)
    stale = order("mc-stale", qty=1, limit_price=150.0, take_profit=None)
    submitted(loop, stale, D0)
    fake.fill("mc-entry", 10, 188.5, at="2024-04-28T15:00:00Z")
    close_id = client_order_id("close", "AAPL", D1, "sell")
    # what a kill right after the write-ahead rows leaves: a pending close never sent, a pending cancel
    loop.journal.record_intent(Intent(close_id, D1, "close", "AAPL", "sell", 10, "market", None, None, "day",
                                      kind="close"))
    stale_id = fake.order("mc-stale")["id"]
    loop.journal.record_cancel(stale_id, "mc-stale", "AAPL", D1, "its bar has passed")
    restarted = alpaca_loop(fake, tmp_path)
    assert restarted.reconcile(D1) == (1, 1)
    assert restarted.reconcile(D1) == (0, 0)
    assert fake.posts(close_id) == 1 and fake.order("mc-stale")["status"] == "canceled"
    assert [(c["order_id"], c["status"]) for c in restarted.journal.cancels()] == [(stale_id, "done")]
    assert [m for m, p, _ in fake.requests if m == "DELETE"] == ["DELETE"]  # cancelled once


def test_crypto_take_profit_is_sent_apart_once_the_entry_fill_is_seen(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path, "BTCUSD", "crypto")
    assert not loop.broker.attaches_take_profit("BTCUSD") and loop.broker.attaches_take_profit("AAPL")
    entry = order("mc-btc", symbol="BTCUSD", qty=0.25, limit_price=59_000.0, take_profit=61_000.0,
                  time_in_force="gtc")
    submitted(loop, entry, D1)
    assert "take_profit" not in fake.requests[-1][2]  # Alpaca has no OTO/bracket orders for crypto
    loop.reconcile(D1)
    assert len(fake.orders) == 1  # nothing filled yet: no take-profit
    fake.fill("mc-btc", 0.1, 59_000.0, at="2024-04-29T10:00:00Z")
    loop.reconcile(D1)
    loop.reconcile(D1)
    tp1 = client_order_id("take_profit", "BTCUSD", f"{D1}@0.1", "sell")
    assert fake.posts(tp1) == 1 and fake.requests[-1][0] == "GET"
    body = next(b for m, _, b in fake.requests if m == "POST" and b.get("client_order_id") == tp1)
    assert body == {"symbol": "BTC/USD", "qty": 0.1, "side": "sell", "type": "limit", "time_in_force": "gtc",
                    "limit_price": 61_000.0, "client_order_id": tp1}
    fake.fill("mc-btc", 0.15, 59_000.0, at="2024-04-29T11:00:00Z")  # the rest of the entry: one more, for 0.15
    alpaca_loop(fake, tmp_path, "BTCUSD", "crypto").reconcile(D1)  # (a restarted process)
    loop.reconcile(D1)
    tp2 = client_order_id("take_profit", "BTCUSD", f"{D1}@0.25", "sell")
    assert (fake.posts(tp1), fake.posts(tp2), float(fake.order(tp2)["qty"])) == (1, 1, 0.15)
    assert [(i.client_order_id, i.kind, i.qty, i.status) for i in loop.journal.intents() if i.kind != "entry"] == [
        (tp1, "take_profit", 0.1, "submitted"), (tp2, "take_profit", 0.15, "submitted")]
    fake.fill(tp1, 0.1, 61_000.0, at="2024-04-29T12:00:00Z")
    loop.reconcile(D1)
    assert [(f.client_order_id, f.kind, f.qty) for f in loop.journal.fills()] == [
        ("mc-btc", "entry", 0.1), ("mc-btc", "entry", 0.15), (tp1, "take_profit", 0.1)]
    # the next bar: the unfilled take-profit is cancelled and the 0.15 left is closed at market
    nxt = "2024-04-30T04:00:00+00:00"
    assert loop.reconcile(nxt) == (0, 1) and fake.order(tp2)["status"] == "canceled"
    close = fake.order(client_order_id("close", "BTCUSD", nxt, "sell"))
    assert (close["type"], close["side"], close["qty"], close["time_in_force"]) == ("market", "sell", "0.15", "gtc")
