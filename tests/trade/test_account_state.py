"""What a real account reports and the loop must heed before each cycle: the account's flags (a blocked account,
shorting disabled, crypto inactive) refuse the orders they forbid in the plan, with one line and an alert, and
nothing is sent; a crypto market entry is sized within the non-marginable buying power over the 2 % collar."""

from __future__ import annotations

import json
import logging
from decimal import Decimal

from marketcast.backtest.orders import Decision
from marketcast.fake_alpaca.rules import COLLAR, Flags
from marketcast.trade.journal.ids import client_order_id
from marketcast.trade.loop.planner import Signal
from marketcast.trade.ops.alerts import ALERTS, Alerts, AlertThresholds, cycle_alerts
from marketcast.trade.risk.rules import CRYPTO_COLLAR
from marketcast.trade.test_kit.alpaca_env import D1, adapter, alpaca_loop, embedded_fake

from .helpers import LongPlanner


class ShortPlanner:
    """Short every symbol at its last close (no take-profit): an order only shorting forbids."""

    model = "short"

    def plan(self, bars, costs, learn_from=None) -> Signal:
        close = float(bars.frame["close"].iloc[-1])
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), "short", Decision(-1, round(close, 2), None),
                      close, {"edge": 0.01, "sharpe": 1.0, "max_drawdown": 0.0, "total_return": 0.01})


class MarketPlanner:
    """Long every symbol at market (no limit, no take-profit)."""

    model = "market"

    def plan(self, bars, costs, learn_from=None) -> Signal:
        close = float(bars.frame["close"].iloc[-1])
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), "market", Decision(1, None, None), close,
                      {"edge": 0.01, "sharpe": 1.0, "max_drawdown": 0.0, "total_return": 0.01})


def test_the_adapter_reads_the_accounts_flags(fake):
    fake.exchange.flags = Flags(trading_blocked=True, shorting_enabled=False, crypto_status="INACTIVE")
    a = adapter(fake).account()
    assert (a.account_blocked, a.trading_blocked, a.shorting_enabled, a.crypto_status) == (False, True, False,
                                                                                          "INACTIVE")
    assert set(a.restrictions()) == {"all", "short", "crypto"}
    fake.exchange.flags = Flags()
    assert adapter(fake).account().restrictions() == {}


def test_a_blocked_account_refuses_the_plan_with_one_line_and_an_alert_and_sends_nothing(fake, tmp_path, caplog):
    fake.exchange.flags = Flags(trading_blocked=True)
    loop = alpaca_loop(fake, tmp_path, planner=LongPlanner(), monitor=True)
    with caplog.at_level(logging.WARNING, logger="marketcast.trade"):
        report = loop.run_cycle(D1)
    entry = client_order_id("AAPL", D1, "entry")
    why = "the broker reports trading_blocked: the account may not place orders"
    assert report.refused == {entry: why} and report.submitted == []
    assert fake.posts(entry) == 0 and fake.rejections == [] and loop.journal.intent(entry).status == "refused"
    assert [r.getMessage() for r in caplog.records if "account restricted" in r.getMessage()] == [
        f"account restricted: {why}; the orders it forbids are refused, never sent"]
    assert report.record["account_restrictions"] == {"all": why}
    alerts = Alerts(tmp_path)
    for _ in range(2):  # edge-triggered: once while it lasts
        cycle_alerts(alerts, report.record, AlertThresholds(), 0.0)
    sent = [json.loads(line) for line in (tmp_path / ALERTS).read_text().splitlines()]
    # only the account's: the record's process memory (a long test session's peak) may raise a memory alert beside it
    assert [(a["kind"], a["subject"], a["message"]) for a in sent if a["kind"] != "memory"] == [("account", "all", why)]


def test_shorting_disabled_refuses_a_short_entry_and_nothing_else(fake, tmp_path):
    fake.exchange.flags = Flags(shorting_enabled=False)
    report = alpaca_loop(fake, tmp_path, planner=ShortPlanner()).run_cycle(D1)
    entry = client_order_id("AAPL", D1, "entry")
    assert report.refused == {entry: "the broker reports shorting_enabled false: no short selling"}
    assert fake.posts(entry) == 0 and fake.rejections == []
    fake.exchange.flags = Flags()
    again = alpaca_loop(fake, tmp_path / "again", planner=ShortPlanner()).run_cycle(D1)
    assert again.submitted == [entry] and fake.rejections == []


def test_crypto_inactive_refuses_the_crypto_entry(tmp_path):
    with embedded_fake("2015-03-02", crypto={"NQUSD": "NASDAQ"}) as fake:
        fake.exchange.clock = "2015-03-02T21:00:00Z"
        fake.exchange.flags = Flags(crypto_status="INACTIVE")
        loop = alpaca_loop(fake, tmp_path, ("NQUSD",), {"NQUSD": "crypto"}, planner=LongPlanner())
        report = loop.run_cycle("2015-03-02T05:00:00+00:00")
        assert list(report.refused.values()) == ["the broker reports crypto_status INACTIVE: no crypto orders"]
        assert report.submitted == [] and fake.rejections == []


def test_a_crypto_market_entry_is_sized_within_cash_over_the_collar(tmp_path):
    """The venue turns a crypto market buy into a limit 2 % over the ask and values it there: an entry sized to
    the whole non-marginable buying power at the ask would be refused ("insufficient balance")."""
    assert CRYPTO_COLLAR == float(COLLAR) == 0.02  # the same documented figure on both sides
    with embedded_fake("2015-03-02", crypto={"NQUSD": "NASDAQ"}) as fake:
        fake.exchange.clock = "2015-03-02T21:00:00Z"
        fake.exchange.last.update({"SP500": Decimal("2117.39")})
        fake.hold("SP500", 40, 2000.0)  # the user's shares, bought on margin: cash, not the caps, binds
        fake.exchange.cash = Decimal(30_000)
        close = Decimal(str(fake.bars["NQ/USD"][-1]["c"]))
        fake.exchange.last["NQUSD"] = close  # the venue judges the order by the same price the loop sizes with
        loop = alpaca_loop(fake, tmp_path, ("NQUSD",), {"NQUSD": "crypto"}, planner=MarketPlanner())
        report = loop.run_cycle("2015-03-02T05:00:00+00:00")
        [entry] = report.planned
        ask = report.asks["NQUSD"]
        assert ask == float(close)
        drawn = entry.qty * ask * 1.02
        assert entry.type == "market" and 29_800.0 < drawn <= 30_000.0  # the whole cash, at the collared price
        assert entry.qty * ask <= 30_000.0 / 1.02  # at the ask: 2 % of the cash left for the collar
        assert report.submitted == [entry.client_order_id] and fake.rejections == []
