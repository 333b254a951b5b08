"""Risk limits with a halted state: a scripted losing day trips the daily loss limit against the faithful fake
Alpaca (the loop's working orders cancelled, nothing sent after, ``trade status`` shows the halt, ``trade
resume`` lifts it); order-count and notional limits; the day's starting equity by hand."""

from __future__ import annotations

import logging

from decimal import Decimal

import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.errors import HaltedError
from marketcast.forecast import load_forecaster
from marketcast.trade.__main__ import main as trade_main
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.loop.freshness import Freshness
from marketcast.trade.loop.gates import GateConfig
from marketcast.trade.broker.paper import PaperBroker
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.portfolio import PortfolioConfig, allocate
from marketcast.trade.risk import RiskGuard, RiskLimits
from marketcast.trade.journal.state import Intent, Journal

from .alpaca_env import D1, D2, alpaca_loop, order, submitted
from .helpers import signal

T = pd.Timestamp
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)


def posts_and_deletes(fake) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in fake.requests if m in ("POST", "DELETE")]


def test_a_losing_day_trips_the_daily_loss_limit_then_resume_lifts_it(fake, tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO, "marketcast.trade")
    loop = alpaca_loop(fake, tmp_path, loop_config={"risk": RiskLimits(max_daily_loss=0.02),
                                                    "resume": f"marketcast trade resume --state-dir {tmp_path}"})
    submitted(loop, order("mc-big", qty=400, limit_price=188.5, take_profit=199.0), D1)  # this bar's entry
    fake.fill("mc-big", 400, 188.5, at="2024-04-30T14:00:00Z")  # 400 AAPL held, its take-profit leg working
    leg = fake.order("mc-big")["legs"][0]
    assert leg["status"] == "new"
    morning = loop.reconcile(D1, now=T("2024-04-30T14:30Z"))  # the day's first reading: 24,600 + 400 x 190
    assert morning.cancelled == 0 and loop.journal.halts.active() == []
    fake.exchange.last["AAPL"] = Decimal("183")  # the afternoon: equity 24,600 + 400 x 183 = 97,800
    before = len(posts_and_deletes(fake))
    with pytest.raises(HaltedError) as err:
        loop.reconcile(D1, now=T("2024-04-30T18:00Z"))
    [halt] = loop.journal.halts.active()
    reason = ("risk limit: daily loss 2.78% of the day's starting equity 100,600.00 (now 97,800.00) reached the limit "
              "max_daily_loss 2.00% on 2024-04-30")
    assert (halt.source, halt.reason, halt.details["cancelled"]) == ("risk", reason, [leg["client_order_id"]])
    assert str(err.value) == halt.message() and halt.resolve == f"marketcast trade resume --state-dir {tmp_path}"
    assert posts_and_deletes(fake)[before:] == [("DELETE", f"/v2/orders/{leg['id']}")]  # its own order, cancelled
    assert leg["status"] == "canceled"  # confirmed: the cancel was awaited
    assert any(m.startswith(f"AAPL: cancel {leg['client_order_id']} requested: risk limit: daily loss")
               for m in caplog.messages)  # trade.log names the order it cancels
    for _ in range(2):  # no new entry, no order at all, while halted (a restart refuses at once too)
        with pytest.raises(HaltedError):
            alpaca_loop(fake, tmp_path).run_cycle(D2, now=T("2024-05-01T20:30Z"))
    assert len(posts_and_deletes(fake)) == before + 1

    assert trade_main(["status", "--state-dir", str(tmp_path)]) == 0
    shown = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert f"halted trading is halted since {halt.since} (risk): risk limit: daily loss 2.78%" in shown
    assert trade_main(["resume", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "lifted 1 risk halt(s)"
    assert loop.journal.halts.active() == []
    after = alpaca_loop(fake, tmp_path).reconcile(D2, now=T("2024-05-01T20:30Z"))  # trading again: the day's
    assert after.closes and fake.order(after.closes[0])["side"] == "sell"  # count restarted; the leftover closes
    assert trade_main(["resume", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "no risk halt to lift"


def test_the_days_starting_equity_is_the_last_reading_of_an_earlier_day(tmp_path):
    guard = RiskGuard(Journal(tmp_path / "journal.db"), RiskLimits(max_daily_loss=0.02))
    guard.begin("2024-04-29")
    assert guard.equity_breach(100_000.0) is None and guard.equity_breach(99_000.0) is None  # -1 % in the day
    guard.begin("2024-04-30")  # the next day starts from 99,000, not from the first reading of the 29th
    assert guard.equity_breach(97_100.0) is None  # -1.92 %
    assert guard.equity_breach(97_000.0) == ("daily loss 2.02% of the day's starting equity 99,000.00 (now "
                                             "97,000.00) reached the limit max_daily_loss 2.00% on 2024-04-30")
    off = RiskGuard(Journal(tmp_path / "off.db"), RiskLimits(max_daily_loss=0.0))
    off.begin("2024-04-29")
    assert off.equity_breach(100_000.0) is None and off.equity_breach(1.0) is None  # 0: no limit


def paper_loop(tmp_path, limits: RiskLimits, name="journal.db"):
    bars = {s: load_symbol(s) for s in ("SP500", "NASDAQ")}
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    broker.advance_to("2017-03-01")
    loop = TradingLoop(broker, Journal(tmp_path / name), BacktestPlanner(load_forecaster("baseline"),
                                                                        strategies=("maxdiff",)),
                       history_feed(bars, lambda: broker.clock),
                       LoopConfig(("SP500", "NASDAQ"), gates=OPEN_GATES, risk=limits,
                                  freshness=Freshness(stale_after_s=1e9)))
    return loop, broker


def test_an_order_beyond_the_cycles_limit_halts_and_the_loops_orders_are_cancelled(tmp_path):
    loop, broker = paper_loop(tmp_path, RiskLimits(max_orders_per_cycle=1))
    plan = loop.run_cycle(broker.clock, dry_run=True).planned
    assert sorted(i.symbol for i in plan) == ["NASDAQ", "SP500"]  # two entries this cycle, best edge first
    with pytest.raises(HaltedError, match=r"risk limit: .* would be order 2 of this cycle: max_orders_per_cycle 1"):
        loop.run_cycle(broker.clock)
    first, second = (loop.journal.intent(i.client_order_id) for i in plan)
    assert first.status == "submitted" and broker.order_by_client_id(first.client_order_id).status == "canceled"
    assert (second.status, second.error.startswith("risk limit: ")) == ("refused", True)
    assert [cid for cid, _ in broker.submit_log()] == [first.client_order_id]  # the second never went out


def test_orders_per_day_count_across_cycles_of_one_day(tmp_path):
    loop, broker = paper_loop(tmp_path, RiskLimits(max_orders_per_day=3))
    day = T("2017-03-03T23:00Z")  # both cycles on the loop's clock's day
    assert len(loop.run_cycle(broker.clock, now=day).submitted) == 2
    broker.advance_to("2017-03-02")
    with pytest.raises(HaltedError, match=r"would be order 4 on 2017-03-03: max_orders_per_day 3"):
        loop.run_cycle(broker.clock, now=day)
    assert len(broker.submit_log()) == 3  # 2 yesterday's bar + 1 today, the 4th refused before it went out


def test_sizing_stays_inside_the_notional_limits_and_an_order_beyond_them_is_refused():
    sigs = [signal("A", edge=0.02, entry=100.0), signal("B", edge=0.01, entry=30.0)]
    capped = allocate(sigs, 100_000.0, PortfolioConfig(), cap=RiskLimits(max_notional_per_order=25_000.0,
                                                                          max_notional_per_symbol=40_000.0).entry_cap)
    assert [(a.signal.symbol, a.qty, a.notional) for a in capped] == [("A", 250.0, 25_000.0), ("B", 833.0, 24_990.0)]
    assert RiskLimits().entry_cap is None
    guard = RiskGuard.__new__(RiskGuard)
    guard.limits = RiskLimits(max_notional_per_order=25_000.0, max_notional_per_symbol=30_000.0)
    entry = Intent("mc-x", "2024-01-02", "maxdiff", "A", "buy", 251.0, "limit", 100.0, None, "day")
    assert guard.notional_breach(entry, 100.0, 0.0) == ("A entry mc-x is worth 25,100.00: max_notional_per_order "
                                                        "25,000.00")
    smaller = Intent("mc-y", "2024-01-02", "maxdiff", "A", "buy", 200.0, "limit", 100.0, None, "day")
    assert guard.notional_breach(smaller, 100.0, 0.0) is None
    assert guard.notional_breach(smaller, 100.0, 10_001.0) == ("A would carry 30,001.00 with entry mc-y: "
                                                               "max_notional_per_symbol 30,000.00")
