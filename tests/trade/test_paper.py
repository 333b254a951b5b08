"""The paper broker: fills by the backtest's settle rule, fees, persistence, duplicate ids."""

from __future__ import annotations

import pytest

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import LONG, SHORT, Bar, Costs, Decision
from marketcast.trade.interface import DuplicateOrder, OrderRejected, submit_once
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.types import OrderRequest

from .helpers import bars_from_rows

ROWS = [(100, 101, 99, 100), (100, 104, 98, 101), (101, 102, 100.5, 101.5), (99, 100, 95, 96)]


@pytest.fixture
def broker(tmp_path):
    # fee only (no spread or slippage), as before the per-class costs: these tests are about the fill rules
    b = PaperBroker(tmp_path / "broker.db", {"AAA": bars_from_rows("AAA", ROWS)}, fee=0.0005, spread=0.0,
                    slippage=0.0, borrow_rate=0.0, start="2024-01-01")
    yield b
    b.close()


def test_limit_entry_and_take_profit_in_one_bar_settle_pessimistically(broker):
    req = OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=103.0)
    broker.submit(req)
    assert broker.advance_to("2024-01-02") == 1
    # bar O100 H104 L98 C101: entry at the 99 limit; take-profit 103 also traded, but OHLC cannot tell
    # the order, so the pessimistic rule exits at min(103, close 101) = 101.
    fills = broker.fills()
    assert [(f.kind, f.side, f.price, f.fee) for f in fills] == [
        ("entry", "buy", 99.0, pytest.approx(10 * 99 * 0.0005)),
        ("close", "sell", 101.0, pytest.approx(10 * 99 * 0.0005)),
    ]
    assert broker.account().cash == pytest.approx(100_000 + 10 * (101 - 99) - 2 * 0.495)  # 100_019.01
    s = settle(Decision(LONG, 99.0, 103.0), Bar(100, 104, 98, 101), Costs(0.0005))
    assert broker.account().cash - 100_000 == pytest.approx(10 * s.entry_price * s.net_return)
    assert broker.order_by_client_id("mc-a").status == "filled"
    assert broker.positions() == []  # every order round-trips within its bar, as in the backtest


def test_short_gap_fill_at_open_and_unfilled_order_expires(broker):
    broker.advance_to("2024-01-02")
    broker.submit(OrderRequest("AAA", "sell", 5, "mc-s", limit_price=100.0, take_profit=99.0))  # bar 3 opens 101
    # never reached; its take-profit above the short's (99) so the two legs cannot cross (a wash trade)
    broker.submit(OrderRequest("AAA", "buy", 5, "mc-b", limit_price=90.0, take_profit=99.5))
    broker.advance_to("2024-01-03")
    s = settle(Decision(SHORT, 100.0, 99.0), Bar(101, 102, 100.5, 101.5), Costs(0.0005))
    entry, exit_ = [f for f in broker.fills() if f.client_order_id == "mc-s"]
    assert (entry.price, exit_.price, exit_.kind) == (101.0, 101.5, "close") == (s.entry_price, s.exit_price, "close")
    assert broker.order_by_client_id("mc-b").status == "expired"
    assert broker.open_orders() == []


def test_state_survives_reopening_and_advance_is_idempotent(tmp_path):
    bars = {"AAA": bars_from_rows("AAA", ROWS)}
    b1 = PaperBroker(tmp_path / "b.db", bars, fee=0.0005, start="2024-01-01")
    b1.submit(OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=103.0))
    b1.advance_to("2024-01-02")
    cash = b1.account().cash
    b1.close()
    b2 = PaperBroker(tmp_path / "b.db", bars, fee=0.0005, start="2023-01-01")  # start ignored once set
    assert b2.clock == "2024-01-02T00:00:00+00:00"
    assert b2.advance_to("2024-01-02") == 0
    assert b2.account().cash == cash and len(b2.fills()) == 2


def test_duplicate_client_order_id_is_refused_and_logged(broker):
    req = OrderRequest("AAA", "buy", 10, "mc-a", limit_price=99.0, take_profit=103.0)
    first, new = submit_once(broker, req)
    assert new
    with pytest.raises(DuplicateOrder):
        broker.submit(req)
    again, new = submit_once(broker, req)  # checks the broker first: no second POST
    assert not new and again.id == first.id
    assert broker.submit_log() == [("mc-a", "accepted"), ("mc-a", "duplicate")]


def test_crypto_cannot_be_sold_short(tmp_path):
    b = PaperBroker(tmp_path / "c.db", {"BTCUSD": bars_from_rows("BTCUSD", ROWS, asset_class="crypto")},
                    start="2024-01-01")
    with pytest.raises(OrderRejected, match="short"):
        b.submit(OrderRequest("BTCUSD", "sell", 1, "mc-x", limit_price=100.0, take_profit=99.0))


def test_the_paper_broker_refuses_what_alpaca_refuses_and_logs_every_attempt(broker):
    with pytest.raises(OrderRejected, match=r"invalid limit_price 99.123. sub-penny increment"):
        broker.submit(OrderRequest("AAA", "buy", 10, "mc-sub", limit_price=99.123, take_profit=103.0))
    with pytest.raises(OrderRejected, match="requested asset is not fractionable"):
        broker.submit(OrderRequest("AAA", "buy", 1.5, "mc-frac", limit_price=99.0))
    with pytest.raises(OrderRejected, match=r"insufficient buying power \(required: 1,000,000.00"):
        broker.submit(OrderRequest("AAA", "buy", 10_000, "mc-big", limit_price=100.0))
    broker.submit(OrderRequest("AAA", "buy", 999, "mc-ok", limit_price=100.0))  # 99,900 of 100,000
    assert broker.account().buying_power == pytest.approx(100.0)  # the open order draws on it
    assert broker.submit_log() == [("mc-sub", "rejected"), ("mc-frac", "rejected"), ("mc-big", "rejected"),
                                   ("mc-ok", "accepted")]
    assert [o.client_order_id for o in broker.orders()] == ["mc-ok"]  # a log row and its order, or neither
