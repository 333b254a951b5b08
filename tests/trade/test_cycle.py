"""The cycle on real embedded data with the baseline forecaster: idempotency and restart cases."""

from __future__ import annotations

import pytest

from marketcast.data import load_symbol
from marketcast.forecast import load_forecaster
from marketcast.trade.cycle import LoopConfig, TradingLoop
from marketcast.trade.feed import history_feed
from marketcast.trade.gates import GateConfig
from marketcast.trade.monitor import read_records, summarise, Monitor
from marketcast.trade.paper import PaperBroker
from marketcast.trade.planner import BacktestPlanner
from marketcast.trade.state import Intent, Journal

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)  # let every non-flat signal through


@pytest.fixture(scope="module")
def bars():
    return {s: load_symbol(s) for s in SYMS}


def make_loop(tmp_path, bars, journal_name="journal.db", monitor=False):
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    broker.advance_to("2017-03-01")
    journal = Journal(tmp_path / journal_name)
    loop = TradingLoop(broker, journal, BacktestPlanner(load_forecaster("baseline"), strategies=("maxdiff",)),
                       history_feed(bars, lambda: broker.clock), LoopConfig(SYMS, gates=OPEN_GATES),
                       Monitor(tmp_path) if monitor else None)
    return loop, broker, journal


def test_same_cycle_twice_submits_each_order_once(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars, monitor=True)
    ts = broker.clock
    first = loop.run_cycle(ts)
    assert len(first.submitted) == 2 and first.rejected == {}
    second = loop.run_cycle(ts)
    assert second.submitted == [] and sorted(second.already) == sorted(first.submitted)
    assert broker.submit_log() == [(cid, "accepted") for cid in first.submitted]
    assert {i.status for i in journal.intents()} == {"submitted"}
    # a loop that lost its journal sees the open orders at the broker as held and sends nothing new
    loop3 = TradingLoop(broker, Journal(tmp_path / "fresh.db"), loop.planner, loop.feed, loop.config)
    third = loop3.run_cycle(ts)
    assert third.submitted == [] and third.planned == []
    assert set(third.skipped) == set() and len(third.signals) == 2
    assert [o for _, o in broker.submit_log()] == ["accepted", "accepted"]
    recs = read_records(tmp_path)
    assert len(recs) == 1 and recs[0]["decision_ts"] == ts  # re-run cycle: one record per bar kept
    assert summarise(recs)["quotes_synthetic"] == 2


def test_restart_after_intent_before_post_submits_once(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    ts = broker.clock
    plan = loop.plan(ts)
    for p in plan.planned:  # what a kill right after the write-ahead leaves behind
        r = p.request
        journal.record_intent(Intent(r.client_order_id, ts, p.signal.strategy, r.symbol, r.side, r.qty, r.type,
                                     r.limit_price, r.take_profit, r.time_in_force))
        journal.mark_attempt(r.client_order_id)
    report = loop.run_cycle(ts)
    assert sorted(report.submitted) == sorted(p.request.client_order_id for p in plan.planned)
    assert [o for _, o in broker.submit_log()] == ["accepted"] * len(plan.planned)


def test_restart_after_post_before_journal_update_does_not_resubmit(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    ts = broker.clock
    plan = loop.plan(ts)
    for p in plan.planned:  # the broker got the order, the reply was lost with the process
        r = p.request
        journal.record_intent(Intent(r.client_order_id, ts, p.signal.strategy, r.symbol, r.side, r.qty, r.type,
                                     r.limit_price, r.take_profit, r.time_in_force))
        broker.submit(r)
    report = loop.run_cycle(ts)
    assert report.submitted == [] and len(report.already) == len(plan.planned) == 2
    assert all(i.status == "submitted" and i.broker_order_id for i in journal.intents())
    assert [o for _, o in broker.submit_log()] == ["accepted"] * 2


def test_dry_run_plans_without_submitting_or_journalling(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    report = loop.run_cycle(broker.clock, dry_run=True)
    assert len(report.planned) == 2
    assert broker.orders() == [] and journal.intents() == [] and broker.submit_log() == []


def test_stale_open_order_is_cancelled_and_stale_pending_intent_abandoned(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    old = broker.clock
    gtc = loop.plan(old).planned[0].request
    far = 1.0 if gtc.side == "buy" else 1e9  # a limit no bar reaches
    gtc = type(gtc)(gtc.symbol, gtc.side, gtc.qty, gtc.client_order_id, "limit", far, None, "gtc")
    journal.record_intent(Intent(gtc.client_order_id, old, "maxdiff", gtc.symbol, gtc.side, gtc.qty, "limit", far,
                                 None, "gtc"))
    broker.submit(gtc)
    journal.record_intent(Intent("mc-never-sent", old, "maxdiff", "SP500", "buy", 1, "limit", 1.0, None, "day"))
    broker.advance_to("2017-03-02")
    report = loop.run_cycle(broker.clock)
    assert report.cancelled == 1 and broker.order_by_client_id(gtc.client_order_id).status == "canceled"
    assert journal.intent("mc-never-sent").status == "abandoned"
