"""The loop over the real Alpaca adapter against the faithful fake: fills, closes after confirmed cancels,
restarts, crypto take-profits after fees, ownership of orders and quantities, and fail-closed halts."""

from __future__ import annotations

import json
import logging

import pytest

from marketcast.errors import HaltedError
from marketcast.trade.interface import BrokerUnavailable
from marketcast.trade.journal.ids import CLOSE, client_order_id
from marketcast.trade.journal.state import Intent
from marketcast.trade.test_kit.alpaca_env import D0, D1, D2, KEY, SECRET, adapter, alpaca_loop, order, submitted

from .helpers import LongPlanner


def test_keys_never_reach_exceptions_logs_or_records(fake, tmp_path, caplog):
    from marketcast.trade.launch import setup_logging

    caplog.set_level(logging.DEBUG)
    fake.fail("GET", "/v2/account", echo_headers=True, times=10)  # a server that echoes our headers back
    b = adapter(fake, max_retries=1)
    with pytest.raises(BrokerUnavailable) as err:
        b.account()
    assert "***" in str(err.value) and KEY not in str(err.value) and SECRET not in str(err.value)
    assert KEY not in repr(b) and SECRET not in repr(b)
    fake.failures.clear()
    # a whole cycle through the adapter with real quotes: records and logs stay clean
    setup_logging(tmp_path, verbose=True)
    logging.getLogger("marketcast.trade").info("account %s", f"{KEY}:{SECRET}")  # even if someone logs it
    from marketcast.forecast import load_forecaster
    from marketcast.trade.loop.planner import BacktestPlanner

    loop = alpaca_loop(fake, tmp_path, monitor=True,
                       planner=BacktestPlanner(load_forecaster("baseline"), strategies=("maxdiff",)))
    loop.config = type(loop.config)(**{**loop.config.__dict__, "add_latest": True})
    report = loop.run_cycle(D1)
    assert report.quotes == {"AAPL": "real"} and len(report.submitted) == 1, (report.skipped, report.refused)
    record = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[-1])
    assert record["quotes"]["real"] == 1 and record["orders_submitted"] == 1
    assert record["endpoint"] == f"{fake.url} (paper, local test server)"
    texts = [(tmp_path / "records.jsonl").read_text(), (tmp_path / "trade.log").read_text(), caplog.text,
             *(r.getMessage() for r in caplog.records)]
    assert "***" in (tmp_path / "trade.log").read_text()
    for text in texts:
        assert KEY not in text and SECRET not in text
    setup_logging(None, verbose=False)  # detach trade.log


def test_fills_partial_top_ups_take_profit_legs_and_orders_filled_after_later_ones(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-a"), D1)  # buy 10 @ 188.5, OTO take-profit leg @ 192.25
    submitted(loop, order("mc-b", qty=4, limit_price=188.0, take_profit=None), D1)
    filled = lambda: (lambda r: (r.filled, r.cancelled))(loop.reconcile(D1))  # noqa: E731
    fake.fill("mc-a", 4, 188.5, at="2024-05-02T14:00:00Z")  # partial
    assert filled() == (1, 0)
    # b was submitted (05-01 20:00) before the last fill the journal has, and fills only now
    fake.fill("mc-b", 4, 188.0, at="2024-05-02T15:00:00Z")
    assert filled() == (1, 0)
    fake.fill("mc-a", 6, 188.3, at="2024-05-02T16:00:00Z")  # top-up to 10: avg 188.38
    assert filled() == (0, 0)  # a already had its entry fill: no new order filled
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
    assert loop.reconcile(D1).book.owned == {"AAPL": 4.0}  # b's 4 shares; a went in and out


def test_leftover_close_waits_for_the_confirmed_cancel_and_a_restart_never_closes_twice(fake, tmp_path):
    first = alpaca_loop(fake, tmp_path, timeout_s=1.0)
    submitted(first, order("mc-entry"), D0)
    fake.fill("mc-entry", 10, 188.5, at="2024-04-28T15:00:00Z")  # filled; its take-profit leg is now working
    leg = fake.order("mc-entry")["legs"][0]
    assert leg["status"] == "new" and fake.positions[0]["qty_available"] == "0"  # the leg holds the shares
    close_id = client_order_id("AAPL", D1, CLOSE)
    fake.fail("POST", "/v2/orders", after_processing=True, sleep_s=3.0)  # the server takes the close, the reply is lost
    r = first.reconcile(D1)
    assert (r.filled, r.cancelled) == (1, 1) and leg["status"] == "canceled"  # confirmed before the close went out
    requests = [(m, p) for m, p, _ in fake.requests]
    delete = requests.index(("DELETE", f"/v2/orders/{leg['id']}"))
    post = requests.index(("POST", "/v2/orders"), delete)
    assert ("GET", f"/v2/orders/{leg['id']}") in requests[delete:post]  # polled until canceled, then closed
    [cancel] = first.journal.cancels()
    assert (cancel["order_id"], cancel["status"], cancel["decision_ts"]) == (leg["id"], "done", D1)
    intent = first.journal.intent(close_id)
    assert (intent.kind, intent.status, intent.side, intent.qty) == ("close", "pending", "sell", 10)
    assert first.journal.submission_counts() == {close_id: 1}
    for _ in range(2):  # restarted processes reconcile the same bar: the close is found, never sent again
        again = alpaca_loop(fake, tmp_path)
        r = again.reconcile(D1)
        assert (r.filled, r.cancelled, r.closes) == (0, 0, [close_id])
    assert fake.posts(close_id) == 1 and len([o for o in fake.orders if o["type"] == "market"]) == 1
    closed = again.journal.intent(close_id)
    assert closed.status == "submitted" and closed.broker_order_id == fake.order(close_id)["id"]
    assert fake.order(close_id)["status"] == "accepted" and again.journal.submission_counts() == {close_id: 1}


def test_an_unconfirmed_cancel_defers_the_close_to_the_next_cycle(fake, tmp_path):
    fake.exchange.cancel_polls = 10_000  # the venue sits on the cancel
    loop = alpaca_loop(fake, tmp_path, cancel_wait_s=0.3)
    submitted(loop, order("mc-entry"), D0)
    fake.fill("mc-entry", 10, 188.5, at="2024-04-28T15:00:00Z")
    r = loop.reconcile(D1)
    assert r.cancelled == 1 and r.closes == [] and "not confirmed" in r.deferred["AAPL"]
    assert fake.posts(client_order_id("AAPL", D1, CLOSE)) == 0  # no close while the leg may still sell
    fake.exchange.cancel_polls = 0
    fake.order("mc-entry")["legs"][0]["cancel_polls"] = 0
    r = loop.reconcile(D1)
    assert r.closes == [client_order_id("AAPL", D1, CLOSE)] and fake.posts(r.closes[0]) == 1


def test_a_kill_between_journal_and_broker_call_is_finished_once_on_restart(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-entry", take_profit=None), D0)
    stale = order("mc-stale", qty=1, limit_price=150.0, take_profit=None)
    submitted(loop, stale, D0)
    fake.fill("mc-entry", 10, 188.5, at="2024-04-28T15:00:00Z")
    close_id = client_order_id("AAPL", D1, CLOSE)
    # what a kill right after the write-ahead rows leaves: a pending close never sent, a pending cancel
    loop.journal.record_intent(Intent(close_id, D1, "close", "AAPL", "sell", 10, "market", None, None, "day",
                                      kind="close"))
    stale_id = fake.order("mc-stale")["id"]
    loop.journal.record_cancel(stale_id, "mc-stale", "AAPL", D1, "its bar has passed")
    restarted = alpaca_loop(fake, tmp_path)
    r = restarted.reconcile(D1)
    assert (r.filled, r.cancelled) == (1, 1)
    r = restarted.reconcile(D1)
    assert (r.filled, r.cancelled) == (0, 0)
    assert fake.posts(close_id) == 1 and fake.order("mc-stale")["status"] == "canceled"
    assert [(c["order_id"], c["status"]) for c in restarted.journal.cancels()] == [(stale_id, "done")]
    assert [m for m, p, _ in fake.requests if m == "DELETE"] == ["DELETE"]  # cancelled once


def test_crypto_take_profit_sells_what_the_fills_left_after_the_fee_on_the_assets_grid(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path, symbols=("BTCUSD",), classes={"BTCUSD": "crypto"})
    assert not loop.broker.attaches_take_profit("BTCUSD") and loop.broker.attaches_take_profit("AAPL")
    entry = order("mc-btc", symbol="BTCUSD", qty=0.25, limit_price=59_000.0, take_profit=61_000.0,
                  time_in_force="gtc")
    submitted(loop, entry, D1)
    assert "take_profit" not in fake.requests[-1][2]  # Alpaca has no OTO/bracket orders for crypto
    loop.reconcile(D1)
    assert len(fake.orders) == 1  # nothing filled yet: no take-profit
    fake.fill("mc-btc", 0.1, 59_000.0, at="2024-04-29T10:00:00Z")  # the fake keeps 0.15 % of the BTC as its fee
    assert fake.positions[0]["qty"] == "0.09985"
    loop.reconcile(D1)
    loop.reconcile(D1)
    tp1 = client_order_id("BTCUSD", D1, "take_profit@0.1")
    body = next(b for m, _, b in fake.requests if m == "POST" and b.get("client_order_id") == tp1)
    # 0.1 bought, at most 0.25 % kept as fee -> 0.09975 received at worst, down to the 0.0001 grid
    assert body == {"symbol": "BTC/USD", "qty": 0.0997, "side": "sell", "type": "limit", "time_in_force": "gtc",
                    "limit_price": 61_000.0, "client_order_id": tp1}
    assert fake.posts(tp1) == 1
    fake.fill("mc-btc", 0.15, 59_000.0, at="2024-04-29T11:00:00Z")  # the rest of the entry: one more for it
    alpaca_loop(fake, tmp_path, symbols=("BTCUSD",), classes={"BTCUSD": "crypto"}).reconcile(D1)  # (a restart)
    loop.reconcile(D1)
    tp2 = client_order_id("BTCUSD", D1, "take_profit@0.25")
    # 0.25 * 0.9975 - 0.0997 = 0.149675 -> 0.1496
    assert (fake.posts(tp1), fake.posts(tp2), fake.order(tp2)["qty"]) == (1, 1, "0.1496")
    fake.fill(tp1, 0.0997, 61_000.0, at="2024-04-29T12:00:00Z")
    loop.reconcile(D1)
    assert [(f.client_order_id, f.kind, f.qty) for f in loop.journal.fills()] == [
        ("mc-btc", "entry", 0.1), ("mc-btc", "entry", 0.15), (tp1, "take_profit", 0.0997)]
    # the next bar: the unfilled take-profit is cancelled (confirmed) and what the loop owns is closed at market
    r = loop.reconcile(D2)
    assert r.cancelled == 1 and fake.order(tp2)["status"] == "canceled"
    close = fake.order(client_order_id("BTCUSD", D2, CLOSE))
    assert (close["type"], close["side"], close["qty"], close["time_in_force"]) == ("market", "sell", "0.1496", "gtc")
    assert float(fake.positions[0]["qty"]) > 0.1496  # the fee's difference stays: never sold


def test_the_users_position_and_order_are_reported_never_touched_and_never_entered(fake, tmp_path):
    """A symbol someone else holds is foreign: the loop does not enter it, since its first fill would mix its
    quantity with the user's (then a split could not be told from the user's shares)."""
    fake.hold("AAPL", 100, 150.0)
    user = adapter(fake).submit(order("user-gtc-exit", side="sell", qty=100, limit_price=250.0, take_profit=None,
                                      time_in_force="gtc"))
    loop = alpaca_loop(fake, tmp_path, planner=LongPlanner())  # it wants in
    r = loop.reconcile(D1)
    assert r.book.owned == {} and r.book.foreign_qty("AAPL") == 100.0 and r.book.unexpected({}) == {}
    assert [o.client_order_id for o in r.book.foreign_orders] == ["user-gtc-exit"]
    report = loop.run_cycle(D1)
    assert report.foreign == {"AAPL": {"position": 100.0, "orders": ["sell 100 limit (accepted)"]}}
    assert report.skipped == {"AAPL": ("foreign position 100 (not the loop's): an entry would mix the loop's "
                                       "quantity with it",)} and report.planned == []
    assert [m for m, _, _ in fake.requests if m in ("POST", "DELETE")] == ["POST"]  # the user's own order only
    assert fake.order("user-gtc-exit")["status"] == "accepted" and user.qty == 100
    fake.bars["AAPL"].append({"t": "2024-04-30T04:00:00Z", "o": 191.0, "h": 193.0, "l": 189.0, "c": 192.0, "v": 5e7})
    fake.session("2024-04-30")  # the user's limit at 250 does not fill
    assert fake.positions == [{**fake.positions[0], "qty": "100"}] and fake.order("user-gtc-exit")["status"] == "new"


def test_a_rejection_after_acceptance_is_booked_as_rejected(fake, tmp_path, caplog):
    caplog.set_level(logging.INFO, "marketcast.trade")
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-late", take_profit=None), D1)
    fake.order("mc-late")["status"] = "rejected"  # the venue refused it after Alpaca accepted it
    r = loop.reconcile(D1)
    intent = loop.journal.intent("mc-late")
    assert (intent.status, intent.broker_status, intent.error) == (
        "rejected", "rejected", "rejected by the broker after it accepted the order")
    assert r.book.own_orders == [] and loop.journal.halts.active() == []
    assert "AAPL mc-late: rejected by the broker after acceptance" in caplog.messages  # trade.log has its id


def test_disagreements_halt_until_accept_broker_adopts_the_brokers_view(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-entry", take_profit=None), D0)
    fake.fill("mc-entry", 10, 188.5, at="2024-04-28T15:00:00Z")
    loop.reconcile(D1)  # the loop owns 10 and closes them ...
    fake.exchange.positions["AAPL"].qty -= 4  # ... but someone sold 4 of its shares at the broker
    # placed by another loop, on another symbol (on AAPL a buy would wash against the loop's queued close)
    submitted_elsewhere = adapter(fake).submit(order("mc-0000000000000000000000ff", symbol="BTC/USD", qty=0.1,
                                                     limit_price=60_000.0, take_profit=None, time_in_force="gtc"))
    with pytest.raises(HaltedError) as err:
        alpaca_loop(fake, tmp_path).run_cycle(D1)
    halt = loop.journal.halts.active()[0]
    assert str(err.value) == halt.message() and "journal and broker disagree" in halt.reason
    assert halt.details["disagreements"] == [
        "the broker has 1 order(s) placed by a marketcast loop that this journal does not know "
        "(mc-0000000000000000000000ff): the journal was lost or reset",
        "AAPL: the journal says the loop holds 10, the broker shows 6"]
    posts = len([m for m, _, _ in fake.requests if m in ("POST", "DELETE")])
    with pytest.raises(HaltedError):  # while halted nothing at the broker is touched
        alpaca_loop(fake, tmp_path).run_cycle(D1)
    assert len([m for m, _, _ in fake.requests if m in ("POST", "DELETE")]) == posts
    changes = alpaca_loop(fake, tmp_path).reconciler.adopt()
    assert changes == ["mc-0000000000000000000000ff (BTCUSD buy 0.1, accepted) adopted from the broker",
                       "AAPL: the loop's quantity 10 -> 6 (the broker holds 6)", "reconcile halt lifted"]
    again = alpaca_loop(fake, tmp_path)
    r = again.reconcile("2024-05-02T04:00:00+00:00")  # trades again: the adopted order is the loop's, stale now
    assert r.book.owned == {"AAPL": 6.0} and fake.order(submitted_elsewhere.client_order_id)["status"] in (
        "pending_cancel", "canceled")
