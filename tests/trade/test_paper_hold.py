"""The paper broker holding as Alpaca does (``hold=True``): a day order ends at the close, a gtc order works on,
a stock entry's take-profit leg fills when a later bar touches it, an unfilled gtc order ends 90 days after its
submission, a position carries overnight marked at the close, crypto gets no leg and an order sent while the bar trades fills only if the bar closes beyond it. Where
an entry and its take-profit both fill in one bar the cash is the backtest's settlement to the cent."""

from __future__ import annotations

import pytest

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import LONG, Bar, Costs, Decision
from marketcast.trade.interface import BrokerError
from marketcast.trade.types import OrderRequest, Position
from marketcast.trade.venues.paper import PaperBroker

from .helpers import bars_from_rows

# 2024-01-01 .. 2024-01-04 (daily, UTC midnight)
ROWS = [(100, 101, 99, 100), (100, 104, 98, 101), (101, 102, 100.5, 101.5), (99, 100, 95, 96)]
FEE = 0.0005


def holding(tmp_path, asset_class: str = "stock", symbol: str = "AAA") -> PaperBroker:
    return PaperBroker(tmp_path / "broker.db", {symbol: bars_from_rows(symbol, ROWS, asset_class=asset_class)},
                       fee=FEE, spread=0.0, slippage=0.0, borrow_rate=0.0, start="2024-01-01", hold=True)


def test_a_position_carries_overnight_marked_at_each_close_and_the_day_leg_ends_at_the_close(tmp_path):
    b = holding(tmp_path)
    b.submit(OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=103.0))  # a day OTO
    [leg] = [o for o in b.orders() if o.parent_client_order_id == "mc-a"]
    assert (leg.status, leg.side, leg.limit_price) == ("held", "sell", 103.0)
    b.advance_to("2024-01-02")
    # bar O100 H104 L98 C101: the entry fills at its 99 limit; 103 traded too but OHLC cannot tell whether after the
    # entry and the bar closed under it (the backtest's pessimistic rule), so the leg works on until the close
    assert [(f.kind, f.side, f.qty, f.price) for f in b.fills()] == [("entry", "buy", 10, 99.0)]
    assert b.order(leg.id).status == "expired" and b.order_by_client_id("mc-a").status == "filled"
    cash = 100_000 - 10 * 99.0 - 10 * 99.0 * FEE  # 99,009.505
    assert b.positions() == [Position("AAA", 10, 99.0, 10)]
    assert (b.account().cash, b.account().equity) == (pytest.approx(cash), pytest.approx(cash + 10 * 101.0))
    b.advance_to("2024-01-03")  # nothing trades: the position is marked at the new close
    assert b.account().equity == pytest.approx(cash + 10 * 101.5) == pytest.approx(100_024.505)
    assert list(b.equity_curve().round(3)) == [round(cash + 1010.0, 3), round(cash + 1015.0, 3)]


def test_a_gtc_take_profit_fills_when_a_later_bar_touches_it(tmp_path):
    b = holding(tmp_path)
    b.submit(OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=101.8, time_in_force="gtc"))
    b.advance_to("2024-01-02")  # entry at 99; 101.8 traded but the bar closed at 101: the leg works on (gtc)
    [leg] = b.open_orders()
    assert (leg.parent_client_order_id, leg.status, b.positions()[0].available) == ("mc-a", "new", 0.0)
    b.advance_to("2024-01-03")  # O101 H102: the sell limit at 101.8 is touched
    assert [(f.kind, f.client_order_id, f.side, f.price) for f in b.fills()] == [
        ("entry", "mc-a", "buy", 99.0), ("take_profit", "mc-a", "sell", 101.8)]
    # fees are per_side of the entry notional on each side (the backtest's Costs): 2 x 0.495
    assert b.account().cash == pytest.approx(100_000 + 10 * (101.8 - 99.0) - 2 * 10 * 99.0 * FEE)  # 100,027.01
    assert b.positions() == [] and b.account().equity == b.account().cash


def test_a_gtc_order_and_a_resting_leg_end_90_days_after_their_submission(tmp_path):
    """``holding.GTC_DAYS``: a gtc buy limit nothing reaches, and a gtc entry's take-profit leg nothing reaches
    (both sent on 2024-01-01), still work on day 89 (2024-03-30) and end ``expired`` when the bar of day 90
    (2024-03-31, 2024 being a leap year) opens; the position the entry opened is kept."""
    flat = [(100.0, 101.0, 99.0, 100.0)] * 100  # 2024-01-01 .. 2024-04-09
    b = PaperBroker(tmp_path / "broker.db", {"AAA": bars_from_rows("AAA", flat)}, fee=FEE, spread=0.0, slippage=0.0,
                    borrow_rate=0.0, start="2024-01-01", hold=True)
    b.submit(OrderRequest("AAA", "buy", 5, "mc-low", limit_price=50.0, time_in_force="gtc"))
    b.submit(OrderRequest("AAA", "buy", 10, "mc-tp", limit_price=100.0, take_profit=150.0, time_in_force="gtc"))
    b.advance_to("2024-03-30")
    assert sorted((o.client_order_id[:7], o.status) for o in b.open_orders()) == [("mc-low", "new"),
                                                                                    ("paper-l", "new")]
    b.advance_to("2024-03-31")
    assert b.open_orders() == []
    ended = {o.client_order_id[:7]: (o.status, o.filled_qty) for o in b.orders(limit=10)}
    assert ended == {"mc-low": ("expired", 0.0), "mc-tp": ("filled", 10.0), "paper-l": ("expired", 0.0)}
    assert b.positions()[0].qty == 10 and b.positions()[0].available == 10  # nothing holds it any more


def test_a_day_order_expires_at_the_close_and_a_gtc_order_works_until_it_fills(tmp_path):
    b = holding(tmp_path)
    b.submit(OrderRequest("AAA", "buy", 5, "mc-day", limit_price=90.0))
    b.submit(OrderRequest("AAA", "buy", 5, "mc-gtc", limit_price=96.0, time_in_force="gtc"))
    b.advance_to("2024-01-02")
    assert b.order_by_client_id("mc-day").status == "expired" and b.order_by_client_id("mc-gtc").status == "new"
    b.advance_to("2024-01-03")  # L100.5: still not reached
    assert [o.client_order_id for o in b.open_orders()] == ["mc-gtc"]
    assert b.account().buying_power == pytest.approx(100_000 - 5 * 96.0)  # the open buy draws on it
    b.advance_to("2024-01-04")  # O99 L95: fills at its limit
    assert [(f.client_order_id, f.price, f.timestamp[:10]) for f in b.fills()] == [("mc-gtc", 96.0, "2024-01-04")]
    assert b.positions() == [Position("AAA", 5, 96.0, 5)]


def test_an_entry_and_its_take_profit_in_one_bar_book_the_backtests_settlement(tmp_path):
    b = holding(tmp_path)
    b.submit(OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=100.5))
    b.advance_to("2024-01-02")  # the bar closes at 101, beyond 100.5: the leg fills at its limit
    s = settle(Decision(LONG, 99.0, 100.5), Bar(100, 104, 98, 101), Costs(FEE))
    assert (s.entry_price, s.exit_price, s.exit_reason) == (99.0, 100.5, "take_profit")
    assert [(f.kind, f.price) for f in b.fills()] == [("entry", 99.0), ("take_profit", 100.5)]
    assert b.account().cash - 100_000 == pytest.approx(10 * s.entry_price * s.net_return, abs=1e-9)  # 14.01
    assert b.positions() == []


def test_crypto_has_no_leg_and_an_order_sent_while_the_bar_trades_fills_only_beyond_the_close(tmp_path):
    b = holding(tmp_path, "crypto", "BTCUSD")
    assert not b.attaches_take_profit("BTCUSD")
    b.submit(OrderRequest("BTCUSD", "buy", 2, "mc-e", limit_price=99.0, take_profit=100.5, time_in_force="gtc"))
    assert len(b.orders()) == 1 and b.orders()[0].take_profit is None  # Alpaca crypto: no OTO
    sent = []

    def look(stamp):  # the loop's look while the bar trades: it sees the fill and sends its take-profit
        if not sent:
            assert b.positions() == [Position("BTCUSD", 2, 99.0, 2)] and b.clock == stamp.isoformat()
            sent.append(b.submit(OrderRequest("BTCUSD", "sell", 2, "mc-tp", limit_price=100.5, time_in_force="gtc")))

    b.advance_to("2024-01-02", between=look)  # C101 >= 100.5: filled at its limit, at the bar's time
    tp = b.order_by_client_id("mc-tp")
    assert (tp.status, tp.filled_avg_price, tp.submitted_at) == ("filled", 100.5, "2024-01-02T00:00:00+00:00")
    assert [f.timestamp for f in b.fills()] == ["2024-01-02T00:00:00+00:00"] * 2
    assert b.account().cash == pytest.approx(100_000 + 2 * (100.5 - 99.0) - 2 * 2 * 99.0 * FEE)
    b.submit(OrderRequest("BTCUSD", "buy", 1, "mc-e2", limit_price=101.0, time_in_force="gtc"))
    b.advance_to("2024-01-03", between=lambda stamp: b.submit(OrderRequest(
        "BTCUSD", "sell", 1, "mc-tp2", limit_price=101.8, time_in_force="gtc")))  # closes at 101.5 < 101.8
    assert b.order_by_client_id("mc-tp2").status == "new" and b.positions()[0].qty == 1  # works on (gtc)
    assert b.account().non_marginable_buying_power == pytest.approx(b.account().cash)  # a sell draws nothing


def test_a_broker_database_is_continued_only_in_the_mode_it_was_written_in(tmp_path):
    holding(tmp_path).close()
    with pytest.raises(BrokerError, match=r"holds as Alpaca does \(a replay's\); use a new state folder"):
        PaperBroker(tmp_path / "broker.db", {"AAA": bars_from_rows("AAA", ROWS)})


def test_a_late_fill_makes_the_loop_cancel_its_own_order_in_the_way_then_close(tmp_path):
    """The wash-trade path on the holding paper broker: bar D0's gtc short fills on D1 after D1's long entry went
    out (a late fill), so the leftover short's close, a market buy, could trade against that entry's held
    take-profit leg. The loop cancels its own entry (the leg goes with it), sees the cancel confirmed, and only
    then sends the close: the broker refuses nothing, and the close covers at the next open."""
    from marketcast.trade.journal.ids import CLOSE, client_order_id
    from marketcast.trade.journal.state import Journal
    from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
    from marketcast.trade.loop.feed import history_feed
    from marketcast.trade.test_kit.alpaca_env import submitted

    from .helpers import LongPlanner
    from .test_clocks import OPEN_GATES

    b = holding(tmp_path)
    bars = {"AAA": bars_from_rows("AAA", ROWS)}
    loop = TradingLoop(b, Journal(tmp_path / "journal.db"), LongPlanner(), history_feed(bars, lambda: b.clock),
                       LoopConfig(("AAA",), gates=OPEN_GATES))
    d0, d1 = "2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00"
    submitted(loop, OrderRequest("AAA", "sell", 10, "mc-d0", limit_price=101.5, time_in_force="gtc"), d0)
    b.advance_to(d1)  # H104: the short fills at 101.5
    submitted(loop, OrderRequest("AAA", "buy", 10, "mc-d1", limit_price=98.0, take_profit=103.0), d1)
    r = loop.reconcile(d1)
    close_id = client_order_id("AAA", d1, CLOSE)
    assert r.closes == [close_id] and r.deferred == {}
    [cancel] = loop.journal.cancels()
    assert cancel["client_order_id"] == "mc-d1" and "potential wash trade" in cancel["reason"] and close_id in cancel["reason"]
    assert [o.status for o in b.orders() if o.root_client_order_id == "mc-d1"] == ["canceled", "canceled"]
    assert [outcome for _, outcome in b.submit_log()] == ["accepted"] * 3
    close = b.order_by_client_id(close_id)
    assert (close.side, close.type, close.qty, close.submitted_at) == ("buy", "market", 10, d1)
    b.advance_to("2024-01-03")  # covered at the open, 101
    assert b.positions() == [] and b.order_by_client_id(close_id).filled_avg_price == 101.0
    assert b.account().cash == pytest.approx(100_000 + 10 * (101.5 - 101.0) - 2 * 10 * 101.5 * FEE)  # 100,003.985


def test_trade_replay_hold_and_a_state_folder_made_without_it_is_one_line_and_exit_2(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    state = tmp_path / "st"

    def replay(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "replay", "--symbols", "SP500",
                               "--start", "2015-01-01", "--end", "2015-02-01", "--state-dir", str(state), *extra],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src}, timeout=300, check=False)

    held = replay("--hold")
    assert held.returncode == 0 and "broker refusals 0;" in held.stdout, held.stderr
    log = (state / "trade.log").read_text()
    other = replay()
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.strip() == (f"error: {state} was made with --hold; run it with --hold as it was made, or use a "
                                    "new state folder")
    assert (state / "trade.log").read_text() == log  # refused before the lock or the log
