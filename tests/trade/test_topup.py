"""Topping up a held position (:mod:`marketcast.trade.loop.topup`) on the holding paper broker, hand-computed.

A crypto position of Q bought at D1's open (100, no fee, no spread) is held on at D1's decision (close 101) with its
take-profit (a sell limit of the loop's own) resting. Equity is 100,000 - 100 Q + 101 Q = 100,000 + Q and the bar's
target is the entry's sizing, ``per_symbol_cap`` 0.5 of it at the close: T = 0.5 (100,000 + Q) / 101. The loop buys
T - Q when that exceeds 10 % of T, i.e. when Q < 45,000 / 100.55 = 447.54: Q = 448 buys nothing, Q = 447 buys
T - Q = 0.5 x 100,447 / 101 - 447 = 50.2624 (against a band of 49.726)."""

from __future__ import annotations

import pytest

from marketcast.trade.journal.ids import TAKE_PROFIT, TOP_UP, client_order_id
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.loop.topup import TOP_UP_BAND, shortfall
from marketcast.trade.test_kit.alpaca_env import submitted
from marketcast.trade.types import OrderRequest
from marketcast.trade.venues.paper import PaperBroker

from .helpers import LongPlanner, bars_from_rows
from .test_clocks import OPEN_GATES

ROWS = [(100, 101, 99, 100), (100, 104, 98, 101), (101, 102, 100.5, 101.5), (99, 100, 95, 96)]
D0, D1, D2 = "2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00"


def held(tmp_path, qty: float) -> tuple[PaperBroker, TradingLoop]:
    """The loop holding ``qty`` XBT bought at D1's open, its take-profit at 110 resting, at D1's close."""
    bars = {"XBT": bars_from_rows("XBT", ROWS, asset_class="crypto")}
    b = PaperBroker(tmp_path / "broker.db", bars, fee=0.0, spread=0.0, slippage=0.0, borrow_rate=0.0,
                    start="2024-01-01", hold=True)
    loop = TradingLoop(b, Journal(tmp_path / "journal.db"), LongPlanner(), history_feed(bars, lambda: b.clock),
                       LoopConfig(("XBT",), gates=OPEN_GATES, hold_agreeing=True))
    submitted(loop, OrderRequest("XBT", "buy", qty, "mc-d0", type="market", time_in_force="gtc"), D0)
    b.advance_to(D1)
    submitted(loop, OrderRequest("XBT", "sell", qty, "mc-tp", limit_price=110.0, time_in_force="gtc"), D0,
              kind=TAKE_PROFIT)
    assert b.positions()[0].qty == qty and b.account().equity == pytest.approx(100_000 + qty)
    return b, loop


def test_the_band_is_a_tenth_of_the_target():
    assert TOP_UP_BAND == 0.10
    assert shortfall(100.0, 90.0) == 0.0 and shortfall(100.0, 89.0) == 11.0  # 10 is the band itself: no order
    assert shortfall(100.0, 120.0) == 0.0 and shortfall(0.0, 0.0) == 0.0  # above the target: no trim


def test_just_inside_the_band_nothing_is_sent_and_the_take_profit_rests(tmp_path):
    b, loop = held(tmp_path, 448)  # T = 0.5 x 100,448 / 101 = 497.27; short of it by 49.27 < 49.73
    report = loop.run_cycle(D1)
    assert report.top_ups == [] and loop.journal.intent(client_order_id("XBT", D1, TOP_UP)) is None
    assert loop.journal.cancels() == [] and [o.client_order_id for o in b.open_orders()] == ["mc-tp"]
    assert [cid for cid, _ in b.submit_log()] == ["mc-d0", "mc-tp"]


def test_beyond_the_band_the_loop_cancels_its_take_profit_then_tops_up_then_covers_the_whole_position(tmp_path):
    b, loop = held(tmp_path, 447)
    report = loop.run_cycle(D1)
    top_id = client_order_id("XBT", D1, TOP_UP)
    assert report.top_ups == [top_id]
    [cancel] = loop.journal.cancels()  # the loop's own take-profit, cancelled write-ahead, before the buy
    assert (cancel["client_order_id"], cancel["status"]) == ("mc-tp", "done")
    assert cancel["reason"] == f"in the way of top_up {top_id} (potential wash trade)"
    seq = dict(b.conn.execute("SELECT client_order_id, seq FROM orders").fetchall())
    tp, buy = b.order_by_client_id("mc-tp"), b.order_by_client_id(top_id)
    assert tp.status == "canceled" and seq["mc-tp"] < seq[top_id]
    size = 0.5 * 100_447 / 101 - 447  # 50.2624 on the finest crypto step
    assert (buy.side, buy.type, buy.time_in_force) == ("buy", "market", "gtc")
    assert buy.qty == pytest.approx(size, abs=1e-8) and buy.qty > TOP_UP_BAND * 0.5 * 100_447 / 101
    assert [outcome for _, outcome in b.submit_log()] == ["accepted"] * 3  # nothing refused: no wash
    assert loop.run_cycle(D1).top_ups == [] and len(b.submit_log()) == 3  # a re-run of the bar sends nothing again

    b.advance_to(D2)  # the top-up fills at D2's open, 101
    assert b.positions()[0].qty == pytest.approx(447 + size, abs=1e-8)
    look = loop.reconcile(D1)  # the look while D2 trades: a take-profit for the whole position
    cover = client_order_id("XBT", D1, f"{TAKE_PROFIT}@{TOP_UP}@{buy.qty!r}")
    assert look.take_profits == [cover]
    order = b.order_by_client_id(cover)
    assert (order.side, order.type, order.limit_price) == ("sell", "limit", 102.01)  # D1's take-profit: 101 x 1.01
    assert order.qty == pytest.approx(447 + size, abs=1e-8) and b.positions()[0].available == pytest.approx(0.0)
    assert loop.reconcile(D1).take_profits == [] and len(b.submit_log()) == 4  # a second look sends no second one


def test_a_kill_between_the_cancel_and_the_top_up_is_finished_by_the_rerun_without_a_second_cancel(tmp_path):
    b, loop = held(tmp_path, 447)
    top_id = client_order_id("XBT", D1, TOP_UP)

    class Killed(Exception):
        pass

    def kill(intent):
        raise Killed(intent.client_order_id)

    loop.desk.send = kill  # the process dies after the cancel is confirmed, before the top-up's POST
    with pytest.raises(Killed):
        loop.run_cycle(D1)
    assert loop.journal.intent(top_id).status == "pending" and b.order_by_client_id("mc-tp").status == "canceled"
    assert b.order_by_client_id(top_id) is None

    again = TradingLoop(b, Journal(tmp_path / "journal.db"), LongPlanner(), loop.feed, loop.config)
    assert again.run_cycle(D1).top_ups == [top_id]
    assert len(again.journal.cancels()) == 1 and [cid for cid, _ in b.submit_log()] == ["mc-d0", "mc-tp", top_id]
    assert b.order_by_client_id(top_id).qty == pytest.approx(0.5 * 100_447 / 101 - 447, abs=1e-8)
