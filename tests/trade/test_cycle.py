"""The cycle on real embedded data with the baseline forecaster: idempotency and restart cases."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from marketcast.backtest.orders import Costs
from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.forecast import load_forecaster
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.ops.monitor import read_records, summarise, Monitor
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.errors import HaltedError
from marketcast.trade.interface import BrokerUnavailable
from marketcast.trade.loop.quotes import quote
from marketcast.trade.risk.rules import round_price
from marketcast.trade.journal.state import Intent, Journal
from marketcast.trade.ops.status import journal_counts
from marketcast.trade.types import Quote

from .helpers import maxdiff_planner

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)  # let every non-flat signal through


@pytest.fixture(scope="module")
def bars():
    return {s: load_symbol(s) for s in SYMS}


def make_loop(tmp_path, bars, journal_name="journal.db", monitor=False):
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    broker.advance_to("2017-03-01")
    journal = Journal(tmp_path / journal_name)
    loop = TradingLoop(broker, journal, maxdiff_planner(),
                       history_feed(bars, lambda: broker.clock), LoopConfig(SYMS, gates=OPEN_GATES),
                       Monitor(tmp_path) if monitor else None)
    return loop, broker, journal


def test_same_cycle_twice_submits_each_order_once(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars, monitor=True)
    ts = broker.clock
    first = loop.run_cycle(ts)
    assert len(first.submitted) == 2 and first.rejected == {} and first.refused == {}
    second = loop.run_cycle(ts)  # a re-plan of the same bar keeps this bar's entries
    assert second.submitted == second.already == [] and second.planned == []
    assert sorted(i.client_order_id for i in second.kept.values()) == sorted(first.submitted)
    assert {i.status for i in second.kept.values()} == {"submitted"}
    assert broker.submit_log() == [(cid, "accepted") for cid in first.submitted]
    assert {i.status for i in journal.intents()} == {"submitted"}
    recs = read_records(tmp_path)
    assert len(recs) == 1 and recs[0]["decision_ts"] == ts  # re-run cycle: one record per bar kept
    assert summarise(recs)["quotes_synthetic"] == 2


def test_a_lost_journal_with_the_loops_orders_at_the_broker_halts_and_sends_nothing(tmp_path, bars):
    loop, broker, _ = make_loop(tmp_path, bars)
    ts = broker.clock
    first = loop.run_cycle(ts)
    fresh = Journal(tmp_path / "fresh.db")  # journal.db deleted: a new, empty one
    loop3 = TradingLoop(broker, fresh, loop.planner, loop.feed, loop.config)
    with pytest.raises(HaltedError, match=r"the broker has 2 order\(s\) placed by a marketcast loop that this "
                                          r"journal does not know .*trade reconcile --accept-broker"):
        loop3.run_cycle(ts)
    with pytest.raises(HaltedError):  # the halt is kept: a restart refuses at once
        TradingLoop(broker, fresh, loop.planner, loop.feed, loop.config).run_cycle(ts)
    [halt] = fresh.halts.active()
    assert halt.source == "reconcile" and all(cid in halt.details["disagreements"][0] for cid in first.submitted)
    assert [o for _, o in broker.submit_log()] == ["accepted", "accepted"] and fresh.intents() == []
    assert sorted(o.client_order_id for o in broker.open_orders()) == sorted(first.submitted)  # untouched


def test_a_deleted_broker_db_is_another_account_and_halts(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    loop.run_cycle(broker.clock)
    other = PaperBroker(tmp_path / "other.db", bars, start="2017-03-01")
    other.advance_to("2017-03-01")
    with pytest.raises(HaltedError, match="the journal was written for account paper-.* the broker is account paper-"):
        TradingLoop(other, journal, loop.planner, loop.feed, loop.config).run_cycle(other.clock)
    assert other.submit_log() == []


def dry_plan(loop, ts):
    """What a cycle would send at ``ts`` (conformed), without sending or journalling it."""
    return loop.run_cycle(ts, dry_run=True)


def test_restart_after_intent_before_post_submits_once(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    ts = broker.clock
    plan = dry_plan(loop, ts)
    for i in plan.planned:  # what a kill right after the write-ahead leaves behind
        journal.record_intent(i)
        journal.mark_attempt(i.client_order_id)
    report = loop.run_cycle(ts)
    assert sorted(report.submitted) == sorted(i.client_order_id for i in plan.planned)
    assert [o for _, o in broker.submit_log()] == ["accepted"] * len(plan.planned)


def test_restart_after_post_before_journal_update_does_not_resubmit(tmp_path, bars):
    from marketcast.trade.journal.state import request_of

    loop, broker, journal = make_loop(tmp_path, bars)
    ts = broker.clock
    plan = dry_plan(loop, ts)
    for i in plan.planned:  # the broker got the order, the reply was lost with the process
        journal.record_intent(i)
        broker.submit(request_of(i))
    report = loop.run_cycle(ts)
    assert report.submitted == report.already == [] and len(report.kept) == len(plan.planned) == 2
    assert all(i.status == "submitted" and i.broker_order_id for i in journal.intents())
    assert [o for _, o in broker.submit_log()] == ["accepted"] * 2


def test_dry_run_plans_without_submitting_or_journalling(tmp_path, bars):
    loop, broker, journal = make_loop(tmp_path, bars)
    report = loop.run_cycle(broker.clock, dry_run=True)
    assert len(report.planned) == 2
    assert broker.orders() == [] and journal.intents() == [] and broker.submit_log() == []


def test_stale_open_order_is_cancelled_and_stale_pending_intent_abandoned(tmp_path, bars):
    from marketcast.trade.journal.state import request_of

    loop, broker, journal = make_loop(tmp_path, bars)
    old = broker.clock
    planned = dry_plan(loop, old).planned[0]
    far = 1.0 if planned.side == "buy" else 1e6  # a limit no bar reaches
    gtc = Intent(planned.client_order_id, old, "maxdiff", planned.symbol, planned.side, 1, "limit", far, None, "gtc")
    journal.record_intent(gtc)
    broker.submit(request_of(gtc))
    journal.record_intent(Intent("mc-never-sent", old, "maxdiff", "SP500", "buy", 1, "limit", 1.0, None, "day"))
    broker.advance_to("2017-03-02")
    report = loop.run_cycle(broker.clock)
    assert report.cancelled == 1 and broker.order_by_client_id(gtc.client_order_id).status == "canceled"
    assert journal.intent("mc-never-sent").status == "abandoned"
    assert len(report.submitted) == 2  # the cancelled order no longer blocks its symbol


class QuotingPaperBroker(PaperBroker):
    """The paper broker with a live-like quote feed: its ``latest_quote`` raises ``fail`` times (a broker
    outage), then quotes ``bid``/``ask`` as multiples of the clock bar's close, labelled real."""

    has_quotes = True  # like Alpaca: ADD_LATEST and require_quote apply

    def __init__(self, *args, fail: int = 0, bid: float = 1.004, ask: float = 1.006, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail, self.bid, self.ask, self.calls = fail, bid, ask, 0

    def latest_quote(self, symbol: str) -> Quote | None:
        self.calls += 1
        if self.calls <= self.fail:
            raise BrokerUnavailable(f"quote {symbol}: HTTP 503 after 0 retries")
        close = self.latest_bars(symbol, 1)[-1].close
        return Quote(symbol, close * self.bid, close * self.ask, source="real")


def quoting_loop(tmp_path, bars, syms=("SP500",), monitor=False, **kw):
    broker = QuotingPaperBroker(tmp_path / "broker.db", bars, start="2017-03-01", **kw)
    broker.advance_to("2017-03-01")
    loop = TradingLoop(broker, Journal(tmp_path / "journal.db"),
                       maxdiff_planner(),
                       history_feed(bars, lambda: broker.clock),
                       LoopConfig(syms, gates=OPEN_GATES, add_latest=True, quote_retry_wait_s=0.0),
                       Monitor(tmp_path) if monitor else None)
    return loop, broker


def test_real_quote_mid_replaces_the_last_close_and_its_spread_feeds_costs(tmp_path, bars):
    loop, broker = quoting_loop(tmp_path, bars)
    ts = broker.clock
    close = float(bars["SP500"].frame.loc[ts, "close"])  # 2017-03-01: 2395.96
    mid, spread = close * 1.005, 1.006 / 1.004 - 1.0
    report = dry_plan(loop, ts)
    sig = report.signals[0]
    assert report.quotes == {"SP500": "real"} and sig.close == pytest.approx(mid, rel=1e-15)
    # what the planner must have seen: bars whose decision bar closes at the mid, costs with the spread
    frame = bars["SP500"].frame.loc[:ts].copy()
    frame.loc[ts, ["close", "high"]] = [mid, max(frame.at[ts, "high"], mid)]
    expected = maxdiff_planner().plan(
        Bars("SP500", frame, "stock", "test"), Costs.for_asset("stock", None, spread))
    assert sig.decision == expected.decision and sig.metrics == expected.metrics
    # and it moved the orders: the synthetic plan (bar close, no spread) prices them differently
    off = dry_plan(TradingLoop(broker, loop.journal, maxdiff_planner(),
                               loop.feed, LoopConfig(("SP500",), gates=OPEN_GATES)), ts)
    assert off.quotes == {"SP500": "synthetic"} and off.signals[0].close == close
    moved = sig.decision.entry_limit / off.signals[0].decision.entry_limit
    assert moved == pytest.approx(1.005, abs=0.003) and moved != 1.0  # limits follow the 0.5 % higher mid
    sent = report.planned[0]  # the limit on the penny grid, never above the decision for a buy
    assert sent.limit_price == round_price(sig.decision.entry_limit, broker.asset("SP500"), sent.side)
    assert abs(sent.limit_price - sig.decision.entry_limit) < 0.01


def test_quote_retries_then_succeeds(tmp_path, bars, caplog):
    caplog.set_level(logging.WARNING, "marketcast.trade")
    loop, broker = quoting_loop(tmp_path, bars, fail=2, monitor=True)
    report = loop.run_cycle(broker.clock)
    assert broker.calls == 3 and report.quotes == {"SP500": "real"}
    assert [r.getMessage().split(":")[1].strip() for r in caplog.records] == [
        "quote failed (attempt 1/3)", "quote failed (attempt 2/3)"]
    assert report.record["quotes"] == {"real": 1, "synthetic": 0} and report.record["quote_source"] == {"SP500": "real"}


def test_quote_falls_back_to_synthetic_after_three_failures(tmp_path, bars, caplog):
    caplog.set_level(logging.WARNING, "marketcast.trade")
    loop, broker = quoting_loop(tmp_path, bars, fail=5, monitor=True)
    close = float(bars["SP500"].frame.loc[broker.clock, "close"])
    q = quote(broker, "SP500", close, True, 3, 0.0)
    assert (q.bid, q.ask, q.source, broker.calls) == (close, close, "synthetic", 3)
    assert caplog.records[-1].getMessage() == (
        f"SP500: no quote after 3 attempts; synthetic quote bid = ask = last close {close:.4f}")
    report = loop.run_cycle(broker.clock)  # two more failures, then a real quote on the 3rd try of this cycle
    assert report.quotes == {"SP500": "real"} and broker.calls == 6
    broker.fail = 100
    nxt = loop.run_cycle(broker.clock)
    assert nxt.quotes == {"SP500": "synthetic"} and nxt.signals[0].close == close  # bar close, not a mid
    assert read_records(tmp_path)[-1]["quote_source"] == {"SP500": "synthetic"}


def test_paper_broker_quotes_are_synthetic_in_the_records(tmp_path, bars):
    broker = PaperBroker(tmp_path / "broker.db", bars, spread=0.001, start="2017-03-01")
    broker.advance_to("2017-03-01")
    q = broker.latest_quote("SP500")
    assert q.source == "synthetic" and q.spread == pytest.approx(1.0005 / 0.9995 - 1)
    loop = TradingLoop(broker, Journal(tmp_path / "journal.db"),
                       maxdiff_planner(),
                       history_feed(bars, lambda: broker.clock),
                       LoopConfig(SYMS, gates=OPEN_GATES, add_latest=True), Monitor(tmp_path))
    report = loop.run_cycle(broker.clock)
    assert report.record["quotes"] == {"real": 0, "synthetic": 2}
    assert report.record["quote_source"] == {"SP500": "synthetic", "NASDAQ": "synthetic"}
    assert report.signals[0].close == float(bars["SP500"].frame.loc[broker.clock, "close"])
    assert summarise(read_records(tmp_path))["quotes_real"] == 0


class EagerFallbackForecaster:
    """The baseline, reporting what a compiled model reports after falling back to eager."""

    name, fields = "toto", ("close", "high", "low", "open")

    def __init__(self) -> None:
        self.inner = load_forecaster("baseline")

    def forecast(self, batch, horizon, num_samples, seed=0):
        fc = self.inner.forecast(batch, horizon, num_samples, seed)
        fc.meta.update(model="toto", compiled=False, fallback_reason="dynamo: graph break")
        return fc


def test_a_lasting_eager_fallback_counts_once_per_model(tmp_path, bars):
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    loop = TradingLoop(broker, Journal(tmp_path / "journal.db"), BacktestPlanner(EagerFallbackForecaster()),
                       history_feed(bars, lambda: broker.clock), LoopConfig(SYMS, gates=OPEN_GATES),
                       Monitor(tmp_path))
    for day in ("2017-03-01", "2017-03-02", "2017-03-03"):
        broker.advance_to(day)
        rec = loop.run_cycle(broker.clock).record
        assert (rec["fallbacks_to_eager"], rec["eager_fallback_models"]) == (1, ["toto"])  # 2 symbols, 1 model
    summary = summarise(read_records(tmp_path))
    assert journal_counts(loop.journal)["cycles"] == 3 and summary["fallbacks_to_eager"] == 1  # not 3 x 2 = 6
    Monitor(tmp_path).record(decision_ts="2017-03-06", fallbacks_to_eager=1, eager_fallback_models=["kronos"])
    assert summarise(read_records(tmp_path))["fallbacks_to_eager"] == 2


class ScriptedPlanner:
    """Decides what the test says (the loop is under test, not the strategy): ``decisions[symbol]``."""

    model = "scripted"

    def __init__(self, decisions) -> None:
        self.decisions = decisions

    def plan(self, bars, costs, learn_from=None):
        from marketcast.trade.loop.planner import Signal

        close = float(bars.frame["close"].iloc[-1])
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), "scripted", self.decisions[bars.symbol](close),
                      close, {"edge": 0.01, "sharpe": 1.0, "max_drawdown": 0.0})


def test_an_order_that_cannot_be_made_valid_is_refused_journalled_and_shown_never_sent(tmp_path):
    from marketcast.backtest.orders import Decision
    from marketcast.trade.loop.cycle import describe

    from .helpers import bars_from_rows

    rows = [(100 + i % 7, 103 + i % 7, 98 + i % 7, 101 + i % 7) for i in range(120)]
    bars = {"BTCUSD": bars_from_rows("BTCUSD", rows, asset_class="crypto")}
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2024-04-01")
    broker.advance_to("2024-04-01")
    short = ScriptedPlanner({"BTCUSD": lambda c: Decision(-1, c * 1.01, c * 0.99)})
    loop = TradingLoop(broker, Journal(tmp_path / "journal.db"), short, history_feed(bars, lambda: broker.clock),
                       LoopConfig(("BTCUSD",), gates=GateConfig(min_dollar_volume=0.0)), Monitor(tmp_path),
                       {"BTCUSD": "crypto"})
    report = loop.run_cycle(broker.clock)
    [(cid, reason)] = report.refused.items()
    assert reason == "BTCUSD: crypto cannot be sold short" and report.submitted == [] and broker.submit_log() == []
    stored = loop.journal.intent(cid)
    assert (stored.status, stored.error, stored.side) == ("refused", reason, "sell")
    assert describe(report)[0]["why_not"] == f"refused: {reason}" and describe(report)[0]["client_order_id"] == cid
    assert report.record["orders_refused"] == 1 and report.record["refused"] == {cid: reason}
    assert journal_counts(loop.journal)["orders_refused"] == 1
    again = loop.run_cycle(broker.clock)  # the bar's entry is decided: a re-plan neither refuses nor sends again
    assert again.refused == {} and again.kept["BTCUSD"].status == "refused" and broker.submit_log() == []


def test_position_caps_and_exposure_count_the_loops_working_orders(tmp_path, bars):
    from dataclasses import replace as with_

    from marketcast.trade.risk.portfolio import PortfolioConfig

    loop, broker, journal = make_loop(tmp_path, bars)
    ts = broker.clock
    sp_only = TradingLoop(broker, journal, loop.planner, loop.feed, with_(loop.config, symbols=("SP500",)))
    [sp] = sp_only.run_cycle(ts).submitted  # SP500's entry is working at the broker
    sp_notional = journal.intent(sp).qty * journal.intent(sp).limit_price
    one_slot = with_(loop.config, portfolio=PortfolioConfig(max_positions=1))
    assert TradingLoop(broker, journal, loop.planner, loop.feed, one_slot).run_cycle(ts, dry_run=True).planned == []
    tight = with_(loop.config, portfolio=PortfolioConfig(max_exposure=0.6))
    [nq] = TradingLoop(broker, journal, loop.planner, loop.feed, tight).run_cycle(ts, dry_run=True).planned
    equity = broker.account().equity
    assert nq.symbol == "NASDAQ" and nq.qty * nq.limit_price <= 0.6 * equity - sp_notional < 0.5 * equity


def test_require_quote_keeps_a_symbol_without_a_real_quote_from_entering(tmp_path, bars, caplog):
    caplog.set_level(logging.WARNING, "marketcast.trade")
    loop, broker = quoting_loop(tmp_path, bars, fail=100)  # the broker has quotes, but none comes
    report = dry_plan(loop, broker.clock)
    assert report.quotes == {"SP500": "synthetic"} and report.planned == []
    assert report.skipped == {"SP500": ("no real quote (require_quote)",)}
    assert "SP500: no new entry: no real quote (require_quote)" in caplog.messages  # a WARNING
    loop.config = replace(loop.config, gates=replace(loop.config.gates, require_quote=False))
    assert [i.symbol for i in dry_plan(loop, broker.clock).planned] == ["SP500"]  # the gate was the only reason


@pytest.mark.parametrize("kw", [{}, {"spread": 0.001, "slippage": 0.0003, "borrow_rate": 0.02}])
def test_the_loop_plans_with_the_costs_the_paper_broker_charges(tmp_path, bars, kw):
    """One cost model (marketcast.backtest.costs): what the planner assumes is what the paper broker books,
    the class defaults or the broker's own settings, borrow per bar included."""
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01", **kw)
    broker.advance_to("2017-03-01")
    seen = []

    class Spy:
        model = "spy"

        def plan(self, b, costs, learn_from=None):
            seen.append(costs)
            return maxdiff_planner().plan(b, costs, learn_from)

    loop = TradingLoop(broker, Journal(tmp_path / "journal.db"), Spy(), history_feed(bars, lambda: broker.clock),
                       LoopConfig(("SP500",), gates=OPEN_GATES))
    dry_plan(loop, broker.clock)
    assert seen == [broker.costs["SP500"]]
    assert seen[0].borrow == pytest.approx(seen[0].borrow_rate / bars["SP500"].periods_per_year)
    assert seen[0].borrow_rate == kw.get("borrow_rate", 0.005)
