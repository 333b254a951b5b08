"""Holdings the loop did not expect (issue 28, item 3): a broker quantity beyond the journal's on a symbol the
loop trades holds that symbol alone until ``trade reconcile --accept-broker`` adopts it; times are compared as
times, whatever their spelling; a lost or replaced journal is found in the account's whole order history."""

from __future__ import annotations

import json
import logging

import pytest

from marketcast.data import load_symbol
from marketcast.errors import HaltedError
from marketcast.trade.interface import BrokerError
from marketcast.trade.test_kit.alpaca_env import KEY, SECRET, adapter, alpaca_loop, embedded_fake, order, submitted
from marketcast.trade.types import Asset
from marketcast.trade.types import Position
from marketcast.trade.journal.ids import CLOSE, ENTRY, client_order_id
from marketcast.trade.journal.state import Booked, Journal
from marketcast.trade.loop.ownership import Book, fee_slack, owned

from .helpers import LongPlanner

STOCKS = ("SP500", "NASDAQ")
STOCK, BTC = Asset("GOOG"), Asset("BTCUSD", "crypto", fractionable=True, shortable=False, easy_to_borrow=False,
                                  min_order_size=0.0001, min_trade_increment=0.0001, fee_in_asset=0.0025)


def book(booked: list[Booked], held: dict[str, float], assets: dict[str, Asset]) -> Book:
    return Book.of(owned(booked, {}, assets), [Position(s, q, 100.0) for s, q in held.items()], [],
                   {b.symbol for b in booked}, fee_slack(booked, assets), "marketcast trade reconcile --accept-broker")


def test_more_than_the_journal_on_a_traded_symbol_is_held_elsewhere_it_is_foreign():
    """The line names both quantities; less than the journal is a mismatch (a halt), not this; the fee a crypto
    buy may leave (0.25 % at most counted, 0.15 % taken) is the loop's own dust, not an outside quantity."""
    goog, assets = [Booked("GOOG", "buy", 10, "2024-01-02T00:00:00+00:00", ENTRY)], {"GOOG": STOCK, "BTCUSD": BTC}
    split = book(goog, {"GOOG": 20, "AAPL": 5}, assets)
    line = ("broker holds 20 GOOG, journal 10: split or outside trade? GOOG is held (no entries, nothing sold); to "
            "adopt the broker's 20: marketcast trade reconcile --accept-broker")
    assert split.unexpected(assets) == {"GOOG": line} and split.mismatches(assets) == []
    assert line in split.entry_conflicts("GOOG", 1, assets) and split.foreign(assets) == {
        "AAPL": {"position": 5.0, "orders": []}}  # never traded: foreign, as before
    assert split.entry_conflicts("AAPL", 1, assets) == [
        "foreign position 5 (not the loop's): an entry would mix the loop's quantity with it"]
    assert book(goog, {"GOOG": 6}, assets).unexpected(assets) == {}  # short of the journal: a mismatch instead
    assert book(goog, {"GOOG": 6}, assets).mismatches(assets) == [
        "GOOG: the journal says the loop holds 10, the broker shows 6"]
    closed = goog + [Booked("GOOG", "sell", 10, "2024-01-03T00:00:00+00:00", CLOSE)]
    assert list(book(closed, {"GOOG": 3}, assets).unexpected(assets)) == ["GOOG"]  # flat, yet the broker holds 3
    short = [Booked("GOOG", "sell", 10, "2024-01-02T00:00:00+00:00", ENTRY)]
    assert list(book(short, {"GOOG": -20}, assets).unexpected(assets)) == ["GOOG"]  # further from zero
    btc = [Booked("BTCUSD", "buy", 1.0, "2024-01-02T00:00:00+00:00", ENTRY),
           Booked("BTCUSD", "sell", 0.9975, "2024-01-02T00:00:00+00:00", "take_profit")]
    assert book(btc, {"BTCUSD": 0.001}, assets).unexpected(assets) == {}  # 1 * (0.0025 - 0.0015) of fee dust
    assert list(book(btc, {"BTCUSD": 0.003}, assets).unexpected(assets)) == ["BTCUSD"]  # > 0.0001 dust + 0.0025


def test_a_2_for_1_split_holds_that_symbol_only_until_accept_broker_adopts_it(tmp_path, caplog, capsys, monkeypatch):
    """Broker 20, journal 10: no SP500 entry and no SP500 close (half the split position is not sold), NASDAQ
    trades; the cycle's record, its plan and ``trade status`` say why; ``trade reconcile`` lists it;
    ``--accept-broker`` adopts 20 and the next cycle closes 20."""
    from marketcast.trade.launch import setup_logging
    from marketcast.trade.loop.cycle import describe
    from marketcast.trade.ops.alerts import Alerts, AlertThresholds, cycle_alerts
    from marketcast.trade.ops.status import status_rows
    from tests.trade.helpers import trade_main

    day0, day1, day2 = [t.isoformat() for t in load_symbol("SP500").frame.loc["2015-02-27":"2015-03-03"].index]
    with embedded_fake("2015-03-03") as fake:
        fake.exchange.clock = "2015-02-27T21:00:00Z"
        loop = alpaca_loop(fake, tmp_path, STOCKS, planner=LongPlanner(), monitor=True)
        entry = order(client_order_id("SP500", day0, ENTRY), symbol="SP500", qty=10, limit_price=2104.0,
                      take_profit=2125.0)
        submitted(loop, entry, day0)  # the loop's 10 SP500, bought on the bar before ...
        fake.fill(entry.client_order_id, 10, 2104.0, at="2015-03-02T14:30:00Z")
        with fake.lock:  # ... split 2:1 before the next decision: twice the shares at half the price
            fake.exchange.clock = "2015-03-02T21:00:00Z"
            split = fake.exchange.positions["SP500"]
            split.qty, split.avg = split.qty * 2, split.avg / 2
        caplog.set_level(logging.WARNING, "marketcast.trade")
        mark = len(fake.requests)
        report = loop.run_cycle(day1)
        line = ("broker holds 20 SP500, journal 10: split or outside trade? SP500 is held (no entries, nothing "
                "sold); to adopt the broker's 20: marketcast trade reconcile --accept-broker (with this run's "
                "--state-dir and broker flags)")
        assert line in caplog.messages and report.reconciled.deferred == {"SP500": line}
        assert report.skipped == {"SP500": ("the loop holds 10", line)}
        assert [i.symbol for i in report.planned] == ["NASDAQ"] and len(report.submitted) == 1  # the other trades
        sent = [(m, b.get("symbol")) for m, p, b in fake.requests[mark:] if m in ("POST", "DELETE")]
        assert sent == [("DELETE", None), ("POST", "NASDAQ")]  # the loop's own stale take-profit leg, the entry
        leg = fake.order(entry.client_order_id)["legs"][0]
        assert [p for m, p, _ in fake.requests[mark:] if m == "DELETE"] == [f"/v2/orders/{leg['id']}"]
        assert [p["qty"] for p in fake.positions if p["symbol"] == "SP500"] == ["20"]  # nothing sold
        assert report.record["unexpected"] == {"SP500": line} and "SP500" not in report.record["foreign"]
        assert line in next(r for r in describe(report) if r["symbol"] == "SP500")["why_not"]
        assert ("held (broker holds more than the journal)", line) in status_rows(tmp_path)
        alerts = Alerts(tmp_path)
        cycle_alerts(alerts, report.record, AlertThresholds(), report.record["peak_memory_mb"])  # no growth
        [alert] = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
        assert (alert["kind"], alert["subject"], alert["message"]) == ("holdings", "SP500", line)

        for k, v in {"APCA_API_KEY_ID": KEY, "APCA_API_SECRET_KEY": SECRET, "APCA_API_BASE_URL": fake.url,
                     "APCA_API_DATA_URL": fake.url, "COLUMNS": "250"}.items():
            monkeypatch.setenv(k, v)
        cli = ["reconcile", "--broker", "alpaca", "--symbols", ",".join(STOCKS), "--state-dir", str(tmp_path)]
        capsys.readouterr()
        try:  # the commands in this process (cheaper than a subprocess), as a user types them
            assert trade_main(cli) == 0
            listed = " ".join(capsys.readouterr().out.split())
            assert "- broker holds 20 SP500, journal 10: split or outside trade?" in listed
            assert "except 1 held symbol(s) listed above" in listed and loop.journal.halts.active() == []
            assert trade_main([*cli, "--accept-broker"]) == 0
            assert "- SP500: the loop's quantity 10 -> 20 (the broker holds 20)" in capsys.readouterr().out
            assert trade_main(cli) == 0 and "held" not in capsys.readouterr().out
        finally:
            setup_logging(None, verbose=False)  # detach trade.log

        fake.session(day2)
        after = alpaca_loop(fake, tmp_path, STOCKS, planner=LongPlanner()).run_cycle(day2)  # a restart, adopted
        close = fake.order(client_order_id("SP500", day2, CLOSE))
        assert (close["side"], close["qty"], close["type"]) == ("sell", "20", "market")
        assert "SP500" not in after.reconciled.deferred and after.skipped["SP500"] == ("the loop holds 20",)


def test_fills_are_taken_since_the_last_one_by_time_not_by_text(fake, tmp_path):
    """Alpaca stamps ``...:00Z`` and ``...:00.1Z`` in one second; as text the first sorts last, so the journal's
    newest fill was the earlier one and a fill after it was skipped as older (never booked)."""
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-first", take_profit=None, qty=5), "2024-04-30T04:00:00+00:00")
    submitted(loop, order("mc-second", take_profit=None, qty=3, limit_price=188.0), "2024-04-30T04:00:00+00:00")
    fake.fill("mc-first", 5, 188.5, at="2024-05-01T15:30:00Z")
    loop.reconcile("2024-04-30T04:00:00+00:00")
    fake.fill("mc-second", 3, 188.0, at="2024-05-01T15:30:00.1Z")  # a tenth of a second later
    r = loop.reconcile("2024-04-30T04:00:00+00:00")
    assert [(f.client_order_id, f.qty) for f in loop.journal.fills()] == [("mc-first", 5.0), ("mc-second", 3.0)]
    assert r.book.owned == {"AAPL": 8.0} and r.book.unexpected({}) == {}
    assert loop.journal.last_fill_ts() == "2024-05-01T15:30:00.100000+00:00"


def test_the_journal_and_the_paper_broker_compare_fill_times_as_times(tmp_path):
    from marketcast.trade.venues.paper import PaperBroker

    journal = Journal(tmp_path / "journal.db")
    stamps = ["2024-05-01T15:30:00.250Z", "2024-05-01T15:30:00Z", "2024-05-01T15:30:00.1+00:00"]
    journal.conn.executemany("INSERT INTO fills VALUES (?,?,?,?,?,?,?,?,?,?)",
                             [(f"f{n}", "mc-x", "AAPL", "buy", 1.0, 1.0, 0.0, ts, "entry", None)
                              for n, ts in enumerate(stamps)])
    journal.conn.commit()
    assert journal.last_fill_ts() == "2024-05-01T15:30:00.250000+00:00"  # SQL's MAX(ts) says "...:00Z"
    bars = {"SP500": load_symbol("SP500")}
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    broker.advance_to("2017-03-01")
    broker.submit(order("mc-paper", symbol="SP500", qty=1, limit_price=2400.0, take_profit=None))
    broker.advance_to("2017-03-02")
    [entry, _] = broker.fills()
    assert entry.timestamp == "2017-03-02T00:00:00+00:00"
    assert [f.fill_id for f in broker.fills(since="2017-03-02T00:00:00Z")] == ["mc-paper-entry", "mc-paper-exit"]
    assert broker.fills(since="2017-03-02T00:00:00.000001Z") == []
    assert [o.client_order_id for o in broker.order_history("2017-03-01T00:00:00Z")] == ["mc-paper"]


def place(fake, cid: str, at: str, status: str = "canceled") -> None:
    """An order of the account, submitted at ``at`` (finished: ``status``), booked at the fake directly."""
    with fake.lock:
        fake.exchange.clock = at
        fake.exchange.submit({"symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "150",
                              "time_in_force": "day", "client_order_id": cid})
        fake.order(cid)["status"] = status


def test_the_order_history_walks_every_page_of_500_oldest_first(fake):
    """1,205 orders, three to an instant (some with Alpaca's nanoseconds): every one once, in submission order,
    in pages of at most 500 (Alpaca's cap); ``since`` is inclusive."""
    stamps = [f"2024-03-01T{10 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}{'.123456789' if n % 2 else ''}Z"
              for n in range(402)]
    cids = [f"order-{n:04d}" for n in range(1205)]
    for n, cid in enumerate(cids):
        place(fake, cid, stamps[n // 3])
    history = adapter(fake).order_history()
    assert [o.client_order_id for o in history] == cids
    pages = [q for q in fake.listings if q.get("direction") == "asc"]
    assert len(pages) == 3 and all(q["status"] == "all" and q["limit"] == "500" for q in pages)
    since = [o.client_order_id for o in adapter(fake).order_history("2024-03-01T10:05:01.123456789Z")]
    assert since == cids[3 * 301:]  # the three at that instant, and all after


def test_an_order_history_that_cannot_be_paged_is_an_error_not_a_partial_list(fake):
    """More than a page of orders at one instant: ``after`` cannot step past them, so no history at all."""
    for n in range(501):
        place(fake, f"burst-{n:03d}", "2024-03-01T10:00:00Z")
    with pytest.raises(BrokerError, match="a page of 500 orders submitted from 2024-03-01T10:00:00"):
        adapter(fake).order_history()


@pytest.mark.parametrize("journal_knows", ["nothing", "the newest loop order"])
def test_a_lost_or_replaced_journal_is_found_behind_the_100_newest_orders(fake, tmp_path, journal_knows):
    """150 orders of the loop, then 120 of the user's: the newest 100 hold none of the loop's, yet a fresh
    journal, or one that knows only a later order (a replaced one), halts and sends nothing."""
    loop_ids = [client_order_id("AAPL", f"2024-01-{1 + n // 10:02d}T{n % 10:02d}:00:00+00:00", ENTRY)
                for n in range(150)]
    for n, cid in enumerate(loop_ids):
        place(fake, cid, f"2024-02-01T10:{n // 60:02d}:{n % 60:02d}Z")
    for n in range(120):
        place(fake, f"user-{n:03d}", f"2024-03-01T10:{n // 60:02d}:{n % 60:02d}Z")
    loop = alpaca_loop(fake, tmp_path)
    assert not [o for o in loop.broker.orders() if o.client_order_id in loop_ids]  # beyond the last 100
    if journal_knows != "nothing":
        fake.exchange.clock = "2024-04-01T10:00:00Z"
        submitted(loop, order("mc-replaced-journals-own", take_profit=None), "2024-04-01T04:00:00+00:00")
    posts = len([m for m, _, _ in fake.requests if m in ("POST", "DELETE")])
    with pytest.raises(HaltedError, match=r"the broker has 150 order\(s\) placed by a marketcast loop that this "
                                          r"journal does not know .*: the journal was lost or reset"):
        loop.run_cycle("2024-05-01T04:00:00+00:00")
    assert len([m for m, _, _ in fake.requests if m in ("POST", "DELETE")]) == posts
    changes = alpaca_loop(fake, tmp_path).reconciler.adopt()
    assert sum("adopted from the broker" in c for c in changes) == 150 and changes[-1] == "reconcile halt lifted"
    alpaca_loop(fake, tmp_path).reconcile("2024-05-01T04:00:00+00:00")  # the whole history is known now


def test_reconcile_reads_the_whole_history_once_then_from_the_newest_submission(fake, tmp_path):
    """A process's first compare reads everything; later ones from an hour before the newest submission it saw
    (one page as a rule), which still finds a second loop's order placed meanwhile."""
    place(fake, "user-old", "2024-01-02T15:00:00Z")
    place(fake, "user-new", "2024-04-30T15:00:00Z")
    loop = alpaca_loop(fake, tmp_path)
    loop.reconcile("2024-05-01T04:00:00+00:00")
    loop.reconcile("2024-05-01T04:00:00+00:00")
    history = [q for q in fake.listings if q.get("direction") == "asc"]
    assert "after" not in history[0] and history[1]["after"] == "2024-04-30T13:59:59.999999+00:00"
    place(fake, client_order_id("AAPL", "2024-04-30T04:00:00+00:00", ENTRY), "2024-04-30T16:00:00Z")
    with pytest.raises(HaltedError, match="the journal was lost or reset"):
        loop.run_cycle("2024-05-01T04:00:00+00:00")


def test_what_earlier_bars_left_is_found_by_time_whatever_the_spelling():
    """``owned(before=bar)`` counts the fills of earlier bars; an adopted order's bar is the broker's spelling of
    its submission (``...:00Z``), which as text sorts after ``...:00.5+00:00``."""
    booked = [Booked("GOOG", "buy", 4, "2024-05-02T04:00:00Z", "adopted"),
              Booked("GOOG", "buy", 6, "2024-05-02T04:00:00.6+00:00", ENTRY)]
    assert owned(booked, {}, {"GOOG": STOCK}, before="2024-05-02T04:00:00.5+00:00") == {"GOOG": 4.0}
