"""Market-on-close (``cls``) exits, exit rule ``close``: the paper broker that holds takes a ``cls`` only while the
bar trades and fills it at the close, refusing one sent after the cutoff as Alpaca does; the loop sends one for a
filled entry (after cancelling its take-profit leg), none when the take-profit filled first, and none once the
cutoff has passed (that position then leaves at the next open); the cutoff itself from the stock calendar."""

from __future__ import annotations

import pandas as pd
import pytest

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.data.bars import Bars
from marketcast.trade.interface import OrderRejected
from marketcast.trade.journal.ids import CLOSE, ON_CLOSE, client_order_id
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.loop.on_close import day_trade_note
from marketcast.trade.replay import replay
from marketcast.trade.risk.freshness import before_cls_cutoff, cls_cutoff
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.test_kit.alpaca_env import submitted
from marketcast.trade.types import OrderRequest
from marketcast.trade.venues.paper import PaperBroker

from .helpers import LongPlanner

OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
FEE = 0.0005
LATE = "CLS orders submitted after 3:50pm but before 7:00pm ET will be rejected"


def sessions(rows, asset_class: str = "stock", symbol: str = "AAA") -> Bars:
    """Daily bars on NYSE sessions from 2024-01-02 (a Tuesday)."""
    index = pd.bdate_range("2024-01-02", periods=len(rows), tz="UTC", name="timestamp")
    frame = pd.DataFrame(rows, columns=["open", "high", "low", "close"], index=index).astype("float64")
    frame["volume"] = 1e6
    return Bars(symbol, frame, asset_class, "test")


def broker(tmp_path, bars: Bars, hold: bool = True) -> PaperBroker:
    return PaperBroker(tmp_path / "broker.db", {bars.symbol: bars}, fee=FEE, spread=0.0, slippage=0.0,
                       borrow_rate=0.0, start="2024-01-02", hold=hold)


ROWS = [(100, 101, 99, 100), (100, 104, 98, 101), (101, 102, 100.5, 101.5)]


def test_a_cls_sent_while_the_bar_trades_fills_at_its_close_and_one_sent_after_the_close_is_refused(tmp_path):
    b = broker(tmp_path, sessions(ROWS))
    b.submit(OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=105.0))

    def look(stamp):  # the loop's look while the bar trades: the leg reserves the shares, so it goes first
        [leg] = [o for o in b.open_orders() if o.parent_client_order_id == "mc-a"]
        b.cancel(leg.id)
        b.submit(OrderRequest("AAA", "sell", 10, "mc-c", type="market", time_in_force="cls"))

    b.advance_to("2024-01-03", between=look)  # O100 H104 L98 C101: the entry at its 99, the cls at the close
    day = "2024-01-03T00:00:00+00:00"
    assert [(f.client_order_id, f.side, f.qty, f.price, f.timestamp) for f in b.fills()] == [
        ("mc-a", "buy", 10, 99.0, day), ("mc-c", "sell", 10, 101.0, day)]
    assert b.positions() == [] and b.order_by_client_id("mc-c").time_in_force == "cls"
    assert b.account().cash == pytest.approx(100_000 + 10 * (101.0 - 99.0) - 2 * 10 * 99.0 * FEE)  # 100,019.01
    with pytest.raises(OrderRejected, match=LATE):  # the clock is at the bar's close: past the cutoff
        b.submit(OrderRequest("AAA", "buy", 10, "mc-late", type="market", time_in_force="cls"))
    assert b.submit_log()[-1] == ("mc-late", "rejected") and b.order_by_client_id("mc-late") is None


def test_crypto_takes_no_cls_and_the_broker_that_settles_within_the_bar_takes_none(tmp_path):
    coin = broker(tmp_path, sessions(ROWS, "crypto", "BTCUSD"))
    def look(stamp):  # while the bar trades: for a stock this is when a cls is taken
        with pytest.raises(OrderRejected, match="gtc or ioc only"):
            coin.submit(OrderRequest("BTCUSD", "buy", 1, "mc-c", type="market", time_in_force="cls"))

    coin.advance_to("2024-01-03", between=look)
    assert [outcome for _, outcome in coin.submit_log()] == ["rejected"]
    settling = PaperBroker(tmp_path / "settling.db", {"AAA": sessions(ROWS)}, start="2024-01-02")
    with pytest.raises(OrderRejected, match="takes no cls order"):
        settling.submit(OrderRequest("AAA", "buy", 1, "mc-s", type="market", time_in_force="cls"))


# Decisions of LongPlanner: a limit 1 % under the close, a take-profit 1 % over it. Session 2: the entry fills at its
# limit (99), the take-profit (101) is not reached: the cls exits at the close. Session 3: the entry fills at the
# open on a gap under its limit, the take-profit is touched: it fills, and no cls goes out.
CLOSE_ROWS = [(100, 101, 99, 100), (100, 100.5, 98, 99.5), (98, 103, 97.5, 100), (100, 100.2, 99.9, 100)]


def test_the_loop_exits_a_filled_entry_by_cls_and_sends_none_when_its_take_profit_filled_first(tmp_path):
    bars = sessions(CLOSE_ROWS)
    costs = Costs(fee=FEE, spread=0.0, slippage=0.0, borrow_rate=0.0)
    second, third = (Bar(*CLOSE_ROWS[k]) for k in (1, 2))
    assert settle(Decision(1, 99.0, 101.0), second, costs).exit_reason == "close"  # the judge: the backtest's rule
    third_decision = Decision(1, round(99.5 * 0.99, 2), round(99.5 * 1.01, 2))
    assert settle(third_decision, third, costs).exit_reason == "take_profit"
    state = tmp_path / "st"
    replay({"AAA": bars}, LongPlanner(), state, "2024-01-02", "2024-01-05",
           LoopConfig(("AAA",), gates=OPEN_GATES, exit="close", fee=FEE))
    journal = Journal(state / "journal.db")
    b = PaperBroker(state / "broker.db", {"AAA": bars}, hold=True)
    days = [t.isoformat() for t in bars.frame.index]
    on_close = {i.decision_ts: i for i in journal.intents() if i.kind == ON_CLOSE}
    assert list(on_close) == [days[0]]  # the first entry's cls; the second's take-profit filled first
    cls = on_close[days[0]]
    filled = journal.filled_qty(client_order_id("AAA", days[0], "entry"))
    assert (cls.side, cls.type, cls.time_in_force, cls.qty, cls.status) == ("sell", "market", "cls", filled,
                                                                             "submitted")
    entry1, entry2 = (client_order_id("AAA", d, "entry") for d in days[:2])
    legs = {o.parent_client_order_id: o for o in b.orders(limit=100) if o.parent_client_order_id}
    assert legs[entry1].status == "canceled" and legs[entry2].status == "filled"  # cancelled before the cls
    got = [(f.client_order_id, f.kind, f.price, f.timestamp[:10]) for f in b.fills()]
    assert got[:4] == [(entry1, "entry", 99.0, days[1][:10]), (cls.client_order_id, "entry", 99.5, days[1][:10]),
                       (entry2, "entry", 98.0, days[2][:10]), (entry2, "take_profit", third_decision.take_profit,
                                                               days[2][:10])]
    assert not any(i.kind == CLOSE for i in journal.intents())  # nothing left for a next open
    assert [outcome for _, outcome in b.submit_log()] == ["accepted"] * len(b.submit_log())


def loop_with_entry(tmp_path, rows, rule: str = "close", hold: bool = True):
    """A loop on the paper broker (holding, or settling within the bar) over ``rows`` whose entry of the first
    bar (a buy limit 99, take-profit 101) was sent; returns the broker, the loop, the bars and the first two."""
    bars = sessions(rows)
    b = broker(tmp_path, bars, hold)
    loop = TradingLoop(b, Journal(tmp_path / "journal.db"), LongPlanner(), history_feed({"AAA": bars}, lambda: b.clock),
                       LoopConfig(("AAA",), gates=OPEN_GATES, exit=rule))
    d0, d1 = (t.isoformat() for t in bars.frame.index[:2])
    submitted(loop, OrderRequest("AAA", "buy", 10, client_order_id("AAA", d0, "entry"), limit_price=99.0,
                                 take_profit=101.0), d0)
    return b, loop, bars, d0, d1


def test_an_entry_fill_seen_after_the_cutoff_sends_no_cls_and_leaves_at_the_next_open(tmp_path):
    """``trade run``'s watch with the wall clock: at 15:55 ET the cutoff has passed, so the loop journals the cls as
    refused (counted as late), keeps the take-profit working and closes the position at the next decision, a
    market order filled at the next open; at 15:45 ET the cls goes out."""
    b, loop, bars, d0, d1 = loop_with_entry(tmp_path, CLOSE_ROWS[:2] + [(101, 101.2, 100.2, 100.8)])
    looks = []
    late = pd.Timestamp("2024-01-03 15:55", tz="America/New_York")
    b.advance_to(d1, between=lambda stamp: looks.append(loop.reconcile(d0, now=late)))
    [look] = looks
    cid = client_order_id("AAA", d0, ON_CLOSE)
    assert look.late == [cid] and look.closes == []
    refused = loop.journal.intent(cid)
    assert refused.status == "refused" and "after the cls cutoff" in refused.error
    assert [o.status for o in b.orders() if o.parent_client_order_id] == ["expired"]  # worked to the close, untouched
    report = loop.run_cycle(d1)  # the next decision closes the leftover: queued to the next open
    assert report.reconciled.closes == [client_order_id("AAA", d1, CLOSE)]
    b.advance_to(bars.frame.index[2])
    assert b.positions() == [] and b.fills()[-1].price == 101.0  # the open of the session after


def test_an_entry_fill_seen_before_the_cutoff_gets_its_cls(tmp_path):
    b, loop, _, d0, d1 = loop_with_entry(tmp_path, CLOSE_ROWS[:2])
    looks = []
    b.advance_to(d1, between=lambda stamp: looks.append(loop.reconcile(
        d0, now=pd.Timestamp("2024-01-03 15:45", tz="America/New_York"))))
    assert looks[0].closes == [client_order_id("AAA", d0, ON_CLOSE)] and looks[0].late == []
    assert b.positions() == [] and b.fills()[-1].price == 99.5  # the close


def test_next_open_sends_no_cls(tmp_path):
    b, loop, _, d0, d1 = loop_with_entry(tmp_path, CLOSE_ROWS[:2], "next-open")
    b.advance_to(d1, between=lambda stamp: loop.reconcile(d0))
    assert b.positions()[0].qty == 10 and loop.journal.intent(client_order_id("AAA", d0, ON_CLOSE)) is None


@pytest.mark.parametrize("now, cutoff", [
    ("2024-01-03 15:49:59", "2024-01-03 15:50"),  # a full session: 4:00 pm close
    ("2024-11-29 12:49:59", "2024-11-29 12:50"),  # the day after Thanksgiving: a 1:00 pm early close
    ("2024-07-03 12:00", "2024-07-03 12:50"),  # Independence Day's eve: early close
])
def test_the_cls_cutoff_is_ten_minutes_before_the_calendars_close(now, cutoff):
    et = "America/New_York"
    at, limit = pd.Timestamp(now, tz=et), pd.Timestamp(cutoff, tz=et)
    assert cls_cutoff(at) == limit and before_cls_cutoff(at)
    assert not before_cls_cutoff(limit) and not before_cls_cutoff(limit + pd.Timedelta(minutes=5))


def test_no_cls_is_sent_while_the_market_is_closed():
    for closed in ("2024-01-03 17:00", "2024-01-03 08:00", "2024-01-06 12:00"):  # after, before, a Saturday
        assert cls_cutoff(pd.Timestamp(closed, tz="America/New_York")) is None
        assert not before_cls_cutoff(pd.Timestamp(closed, tz="America/New_York"))


def test_the_pattern_day_trader_note_is_said_under_close_with_stocks_and_less_than_25000():
    note = day_trade_note("close", 20_000.0, ["stock", "crypto"])
    assert "allows 3 day trades in 5 business days" in note and "the 4th cls exit is refused" in note
    assert day_trade_note("close", 25_000.0, ["stock"]) is None
    assert day_trade_note("next-open", 20_000.0, ["stock"]) is None
    assert day_trade_note("close", 20_000.0, ["crypto"]) is None


def test_alpaca_is_sent_time_in_force_cls():
    """POST /v2/orders (https://docs.alpaca.markets/reference/postorder): ``time_in_force`` ``cls``, a market
    order, no ``order_class``."""
    import json

    from marketcast.trade.venues.alpaca import order_request

    body = json.loads(order_request(OrderRequest("SPY", "sell", 3, "mc-x", type="market", time_in_force="cls"),
                                    crypto=False, attach=True).model_dump_json(exclude_none=True))
    assert {k: body[k] for k in ("symbol", "qty", "side", "type", "time_in_force")} == {
        "symbol": "SPY", "qty": 3.0, "side": "sell", "type": "market", "time_in_force": "cls"}
    assert "order_class" not in body


def test_the_broker_that_settles_within_the_bar_leaves_nothing_to_close_at_the_close(tmp_path):
    """``trade run``'s embedded paper venue settles an entry with its exit inside the bar (booked under the
    entry's id): a look afterwards finds nothing held and sends no cls (it would be refused there)."""
    b, loop, _, d0, d1 = loop_with_entry(tmp_path, CLOSE_ROWS[:2], hold=False)
    b.advance_to(d1)  # the entry at 99, out at the close 99.5, both booked under the entry's id
    look = loop.reconcile(d0, now=pd.Timestamp("2024-01-03 15:00", tz="America/New_York"))
    assert look.closes == [] and loop.journal.intent(client_order_id("AAA", d0, ON_CLOSE)) is None
    assert [(f.kind, f.price) for f in b.fills()] == [("entry", 99.0), ("close", 99.5)]
    assert [outcome for _, outcome in b.submit_log()] == ["accepted"]


class DayTradedPaper(PaperBroker):
    """The holding paper broker reporting what Alpaca reports of a $20,000 account (``last_equity``) once it has
    made 3 day trades in the last 5 business days (``daytrade_count``, from when ``traded`` is set)."""

    traded = False

    def account(self):
        from dataclasses import replace

        return replace(super().account(), last_equity=20_000.0, daytrade_count=3 if self.traded else 0)


def test_the_4th_day_trade_under_25000_gets_no_cls_and_leaves_at_the_next_open(tmp_path):
    """Pattern-day-trader protection (risk/protections.py day_trade): the cls of a position opened today would be
    the 4th day trade in 5 business days under $25,000, so it is not sent and its take-profit keeps working; the
    position is closed as a leftover, queued to the next open."""
    bars = sessions(CLOSE_ROWS[:2] + [(101, 101.2, 100.2, 100.8)])
    b = DayTradedPaper(tmp_path / "broker.db", {"AAA": bars}, fee=FEE, spread=0.0, slippage=0.0, borrow_rate=0.0,
                       start="2024-01-02", hold=True)
    loop = TradingLoop(b, Journal(tmp_path / "journal.db"), LongPlanner(), history_feed({"AAA": bars}, lambda: b.clock),
                       LoopConfig(("AAA",), gates=OPEN_GATES, exit="close"))
    d0, d1 = (t.isoformat() for t in bars.frame.index[:2])
    submitted(loop, OrderRequest("AAA", "buy", 10, client_order_id("AAA", d0, "entry"), limit_price=99.0,
                                 take_profit=101.0), d0)
    b.traded = True  # the entry went out with 2 day trades counted; 3 by the time it fills
    looks = []
    b.advance_to(d1, between=lambda stamp: looks.append(loop.reconcile(d0)))
    assert looks[0].closes == [] and "pattern day trading protection" in looks[0].deferred["AAA"]
    assert loop.journal.intent(client_order_id("AAA", d0, ON_CLOSE)) is None  # not sent, never journalled
    assert [o.status for o in b.orders() if o.parent_client_order_id] == ["expired"]  # the leg worked to the close
    assert b.positions()[0].qty == 10 and [outcome for _, outcome in b.submit_log()] == ["accepted"]
    # the paper broker has no market clock, so the protection takes every fill as today's (fail closed): the
    # leftover's close goes out once the account's count is under the limit again (a day trade left the window)
    b.traded = False
    report = loop.run_cycle(d1)
    assert report.reconciled.closes == [client_order_id("AAA", d1, CLOSE)]
    b.advance_to(bars.frame.index[2])
    assert b.positions() == [] and b.fills()[-1].price == 101.0  # the next open
