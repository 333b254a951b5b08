"""``trade replay --hold --exit close`` trades what ``backtest --hold --exit close`` scores (issue 53, the first "Done
when" line's close + hold combination): on the embedded SP500 and NASDAQ (2018-01 .. 03, every gate open) and a
synthetic 24/7 series, the replay's held positions enter and leave at the times and prices of the backtest's held
trades (on the broker's price grid) with the same per-trade returns (sizing apart), judged as
tests/trade/test_replay_hold_backtest.py judges next-open (its helpers, imported).

Under ``close`` a stock position entered on bar t+1 is held overnight (no ``cls`` order on its entry's session:
the next decision is made after that close); a decision that turns leaves it by a ``cls`` order at the next bar's
close, its ``gtc`` take-profit leg resting until then (cancelled and confirmed just before). A 24/7 position
leaves at the next bar's open under both rules."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.costs import Costs
from marketcast.backtest.holding import REASON_NAMES, hold
from marketcast.data import load_symbol
from marketcast.forecast import load_forecaster
from marketcast.trade.journal.ids import CLOSE, ENTRY, ON_CLOSE, TOP_UP, client_order_id
from marketcast.trade.journal.ids import TAKE_PROFIT as TP_ORDER
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.risk.freshness import in_a_later_session
from marketcast.trade.risk.portfolio import PortfolioConfig
from marketcast.trade.types import CLS
from marketcast.trade.venues.paper import PaperBroker

from .test_replay import OPEN_GATES
from .test_replay_hold_backtest import TAKE_PROFIT, as_sent, backtest, crypto, replay_trades, trades_of

RULE = "close"
CASH = 1e8  # whole shares of an index-level price leave a $100,000 position up to 1/7 short of its target, which
# the backtest's continuous units never are: a top-up (and its new take-profit) would then follow the rounding;
# at this cash the rounding is under 0.02 % and the replay buys up where the backtest does (sizing apart)
GUARD = ("ci_guard",)  # a market entry without a take-profit: every position leaves by a cls order
MAXDIFF = ("maxdiff",)  # a limit entry with a take-profit
PICK = PLANNER_CONFIG.strategies  # the walk-forward pick of every strategy the planner trades


def _judge(tmp_path, symbol: str, start: str, end: str, strategy: tuple[str]) -> tuple[Counter, list, Journal]:
    """Replay ``symbol`` with exit ``close`` and hold from the first day on or after ``start`` that the backtest
    holds nothing, judge each held trade against the backtest's (scored on its orders as sent), and count."""
    bars = crypto() if symbol == "ETHUSD" else load_symbol(symbol)
    index = bars.frame.index
    lo, hi = (int(index.searchsorted(pd.Timestamp(day, tz="UTC"))) for day in (start, end))
    first_look = backtest(bars, lo - PLANNER_CONFIG.windows, hi - 1, strategy, RULE)
    flat = first_look.held.entered | ~first_look.held.filled  # nothing carried into the window's decision
    k0 = PLANNER_CONFIG.windows + int(np.argmax(flat[PLANNER_CONFIG.windows:]))
    begin = index[lo - PLANNER_CONFIG.windows + k0]

    planner = BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, exit=RULE), strategies=strategy)
    replay({symbol: bars}, planner, tmp_path, begin.isoformat(), index[hi].isoformat(),
           LoopConfig((symbol,), gates=OPEN_GATES, exit=RULE), hold=True, starting_cash=CASH)
    broker = PaperBroker(tmp_path / "broker.db", {symbol: bars}, hold=True)
    got = replay_trades(broker, symbol)

    result = backtest(bars, index.get_loc(begin) - PLANNER_CONFIG.windows, hi - 1, strategy, RULE)
    first = int(np.searchsorted(result.decision_times, begin))
    assert result.held.entered[first] or not result.held.filled[first]
    scored = [t for t in trades_of(result.held.trades, result.settle_times) if t[1] > begin]
    sent = [t for t in as_sent(result, bars, broker, PortfolioConfig().per_symbol_cap) if t[1] > begin]
    # the backtest's own held trades are the scoring of its orders at the unit size
    unit = [t for t in as_sent(result, bars, broker, 1.0) if t[1] > begin]
    assert [(t[0], t[1], t[3], t[5]) for t in scored] == [(t[0], t[1], t[3], t[5]) for t in unit]
    assert not any(outcome == "rejected" for _, outcome in broker.submit_log())

    counted = Counter()
    assert len(got) == len(sent), (got, sent)
    for g, s in zip(got, sent):
        assert g[:3] == s[:3], (g, s)  # side, entry bar, entry price (the open, or the limit as sent)
        assert g[3:5] == s[3:5], (g, s)  # exit bar and price (None: still open when the replay ends)
        if s[4] is not None:
            assert g[0] * (g[4] / g[2] - 1) == pytest.approx(s[0] * (s[4] / s[2] - 1), abs=1e-12)
        counted[s[5]] += 1
        counted["held overnight"] += s[3] is not None and s[3] > s[1]
    broker.close()
    return counted, got, Journal(tmp_path / "journal.db")


@pytest.mark.parametrize("symbol, strategy, start, closes, take_profits", [
    ("SP500", TAKE_PROFIT, "2018-01-01", 0, 10),
    ("NASDAQ", TAKE_PROFIT, "2018-01-01", 0, 10),
    ("SP500", GUARD, "2018-01-01", 10, 0),
    ("NASDAQ", GUARD, "2018-01-01", 10, 0),
    ("NASDAQ", MAXDIFF, "2018-01-01", 1, 3),
    ("SP500", PICK, "2018-01-01", 10, 0),
    ("NASDAQ", PICK, "2018-03-19", 10, 0),  # the pick holds NASDAQ from 2017-11-06 to 2018-03-16
])
def test_a_held_close_replay_enters_and_exits_as_the_held_close_backtest(tmp_path, symbol, strategy, start, closes,
                                                                           take_profits):
    end = "2018-03-31" if start < "2018-03-01" else "2018-06-30"
    counted, got, journal = _judge(tmp_path, symbol, start, end, strategy)
    print(symbol, strategy, counted)
    # 2018-01 .. 03: entry_takeprofit's positions leave by their take-profits, resting overnight too (3 on SP500,
    # 6 on NASDAQ); ci_guard's by a cls order at a later close (16, 15); maxdiff's both ways (3 and 1); the pick's
    # by cls orders (14 on SP500; NASDAQ, 2018-03-19 .. 06-29: 16)
    assert counted["close"] >= closes and counted["take_profit"] >= take_profits, counted
    assert counted["held overnight"] >= 3, counted
    assert set(counted) <= {"close", "take_profit", "marked", "held overnight"}, counted
    intents = journal.intents()
    entries = [i for i in intents if i.kind == ENTRY]
    assert entries and {i.time_in_force for i in entries} == {"gtc"}  # a take-profit leg rests across sessions
    assert not [i for i in intents if i.kind == CLOSE]  # no position left at market: every stock exit is a cls
    exits = [i for i in intents if i.kind == ON_CLOSE and i.status == "submitted"]
    assert len(exits) == counted["close"] and all(i.time_in_force == CLS for i in exits)
    index = load_symbol(symbol).frame.index
    closed = {g[3] for g in got if g[3] is not None}
    for i in exits:  # journalled under the decision that turned, filled at the next bar's close, never the entry's
        exit_bar = index[index.get_loc(pd.Timestamp(i.decision_ts)) + 1]
        assert exit_bar in closed, i
        (position,) = [g for g in got if g[3] == exit_bar]
        assert position[1] < exit_bar
    journal.close()


def test_a_held_24_7_replay_under_close_exits_at_the_next_open(tmp_path):
    counted, _, journal = _judge(tmp_path, "ETHUSD", "2015-03-01", "2015-05-31", TAKE_PROFIT)
    print(counted)
    assert counted["next_open"] >= 3 and counted["take_profit"] >= 1, counted
    assert not [i for i in journal.intents() if i.kind == ON_CLOSE]  # no closing auction on 24/7 bars
    journal.close()


# ---------------------------------------------------------------------------------------------------- restarts
STRAIGHT = ("2018-01-02", "2018-02-28")
STOPS = ("2018-01-19", "2018-02-07")


class Killed(BaseException):
    """A kill: nothing after it runs in that process (not an ``Exception``: no handler of the loop catches it)."""


def _close_hold_replay(state, end: str = STRAIGHT[1]) -> None:
    bars = {"SP500": load_symbol("SP500")}
    replay(bars, BacktestPlanner(load_forecaster("baseline"), strategies=GUARD), state, STRAIGHT[0], end,
           LoopConfig(("SP500",), gates=OPEN_GATES, exit=RULE), hold=True)


def _books(state) -> dict:
    broker = PaperBroker(state / "broker.db", {"SP500": load_symbol("SP500")}, hold=True)
    books = {"orders": [(o.client_order_id, o.side, o.qty, o.type, o.limit_price, o.time_in_force, o.status,
                         o.submitted_at) for o in broker.order_history()],
             "fills": [(f.client_order_id, f.side, f.qty, f.price, f.timestamp, f.kind) for f in broker.fills()],
             "equity": broker.equity_curve(), "log": broker.submit_log()}
    broker.close()
    return books


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    state = tmp_path_factory.mktemp("straight")
    _close_hold_replay(state)
    books = _books(state)
    journal = Journal(state / "journal.db")
    exits = [i for i in journal.intents() if i.kind == ON_CLOSE]
    journal.close()
    assert len(exits) >= 5 and all(i.status == "submitted" for i in exits), exits  # the restarts cross cls exits
    return {**books, "turned": min(i.decision_ts for i in exits)}


def test_a_close_hold_replay_stopped_and_resumed_ends_as_the_straight_one(tmp_path, straight):
    for stop in STOPS:
        _close_hold_replay(tmp_path, stop)
    _close_hold_replay(tmp_path)
    resumed = _books(tmp_path)
    assert resumed["orders"] == straight["orders"] and resumed["fills"] == straight["fills"]
    assert resumed["equity"].equals(straight["equity"])


@pytest.mark.parametrize("kill_at", [1, 3])
def test_a_kill_after_a_cls_exit_is_journalled_sends_it_once_on_restart(tmp_path, monkeypatch, straight, kill_at):
    """Killed between the ``on_close`` intent's write-ahead and its submit (the look between the bar's halves): the
    restart finishes the bar, its look re-finds the pending intent and sends it once; the books end the same."""
    real, seen = PaperBroker.submit, []

    def submit(self, request):
        if request.time_in_force == CLS:
            seen.append(request.client_order_id)
            if len(seen) == kill_at:
                raise Killed
        return real(self, request)

    monkeypatch.setattr(PaperBroker, "submit", submit)
    with pytest.raises(Killed):
        _close_hold_replay(tmp_path)
    journal = Journal(tmp_path / "journal.db")
    assert journal.intent(seen[-1]).status == "pending"  # written ahead, never sent
    journal.close()
    monkeypatch.setattr(PaperBroker, "submit", real)
    _close_hold_replay(tmp_path)
    books = _books(tmp_path)
    assert books["orders"] == straight["orders"] and books["fills"] == straight["fills"]
    assert books["equity"].equals(straight["equity"])
    assert [cid for cid, _ in books["log"]].count(seen[-1]) == 1


# ---------------------------------------------------------------------------------------------------- the live look
@pytest.mark.parametrize("now, decision, later", [
    ("2018-01-03 15:00", "2018-01-02", True),  # 10:00 ET the session after bar 2018-01-02's
    ("2018-01-02 20:00", "2018-01-02", False),  # 3:00 pm ET, bar 2018-01-02's own session
    ("2018-01-03 13:00", "2018-01-02", False),  # 8:00 am ET: the next session is not open yet
    ("2018-01-03 22:00", "2018-01-02", False),  # 5:00 pm ET: closed
    ("2018-01-05 15:00", "2018-01-02", True),  # a later session still (the look came late)
    ("2018-01-02 15:00", "2017-12-29", True),  # over the New Year holiday: the next session is 2018-01-02
])
def test_a_held_position_leaves_only_while_a_later_session_is_open(now, decision, later):
    """Daily bars are labelled by their session's date at 00:00 UTC; NYSE opens 14:30 UTC and closes 21:00 UTC
    in January (EST); 2018-01-01 is a holiday."""
    assert in_a_later_session(pd.Timestamp(now, tz="UTC"), pd.Timestamp(decision, tz="UTC").isoformat()) is later


# ---------------------------------------------------------------------------------------------------- top-ups
@pytest.mark.parametrize("low_close, exit_k, price", [(96.0, 1, 95.0), (94.0, 2, 95.0)])
def test_the_backtest_scores_a_top_ups_new_take_profit_as_sent_once_it_filled(low_close, exit_k, price):
    """By hand, a stock under ``--exit close --hold``, no costs: window 0 buys 0.5 of equity 1 at 100 (take-profit
    110, not reached: close 80, equity 0.9); window 1 agrees with take-profit 95: the target 0.45 / 80 = 0.005625
    units is 12.5 % over the 0.005 held, so it is bought up at bar 2's open (80) and the new take-profit for the
    whole position goes out while bar 2 trades: it fills there only at a close at or beyond it (96: at 95), else it
    rests and fills at 95 in bar 3, which trades through it before window 2's cls (flat) would go out. The old
    leg's 110 is never reached."""
    bars = (np.array([100.0, 100.0, 80.0, 90.0]), np.array([100.0, 105.0, 98.0, 99.0]),
            np.array([100.0, 79.0, 79.0, 89.0]), np.array([100.0, 80.0, low_close, 98.0]))
    held = hold(np.array([1, 1, 0]), np.full(3, np.nan), np.array([110.0, 95.0, 95.0]), np.full(3, 0.5), bars,
                Costs(0.0), RULE, np.ones(3, dtype=bool), False)
    t = held.trades
    assert list(t.top_ups) == [1] and list(t.exit_window) == [exit_k] and list(t.exit_price) == [price]
    assert REASON_NAMES[int(t.reason[0])] == "take_profit"


def test_a_top_up_under_close_cancels_the_leg_and_rests_a_gtc_take_profit_for_the_whole_position(tmp_path):
    """$100,000 on NASDAQ (about 7,000): 6 whole shares at the cap's $50,000 are 1/7 short of the target after the
    2018-02 fall, so the loop buys 1 up (decided 2018-02-08). The entry's gtc take-profit leg is cancelled and
    confirmed before the top-up goes out (it would wash), the top-up carries no leg, and once it filled a gtc
    take-profit for all 7 shares at the top-up decision's take-profit goes out while 2018-02-09 trades; it fills
    there at its limit only because the bar closes beyond it."""
    bars = load_symbol("NASDAQ")
    replay({"NASDAQ": bars}, BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, exit=RULE),
                                             strategies=TAKE_PROFIT), tmp_path, "2018-01-29", "2018-02-16",
           LoopConfig(("NASDAQ",), gates=OPEN_GATES, exit=RULE), hold=True)
    journal = Journal(tmp_path / "journal.db")
    broker = PaperBroker(tmp_path / "broker.db", {"NASDAQ": bars}, hold=True)
    (top_up,) = [i for i in journal.intents() if i.kind == TOP_UP]
    (whole,) = [i for i in journal.intents() if i.kind == TP_ORDER]
    assert top_up.decision_ts.startswith("2018-02-08") and top_up.take_profit is None and top_up.type == "market"
    orders = {o.client_order_id: o for o in broker.order_history()}
    (entry,) = [i for i in journal.intents() if i.kind == ENTRY and i.status == "submitted"
                and orders[i.client_order_id].status == "filled" and i.decision_ts < top_up.decision_ts]
    (leg,) = [o for o in orders.values() if o.parent_client_order_id == entry.client_order_id]
    sent = orders[top_up.client_order_id]
    assert leg.time_in_force == "gtc" and leg.status == "canceled"
    assert leg.limit_price == entry.take_profit and pd.Timestamp(leg.submitted_at) < pd.Timestamp(sent.submitted_at)
    assert list(orders).index(leg.client_order_id) < list(orders).index(sent.client_order_id)
    tp = json.loads(top_up.decision)["take_profit"]
    day = pd.Timestamp("2018-02-09", tz="UTC")
    assert (whole.time_in_force, whole.qty, whole.limit_price) == ("gtc", entry.qty + top_up.qty, round(tp, 2))
    assert whole.limit_price >= tp and pd.Timestamp(orders[whole.client_order_id].submitted_at) == day
    bar = bars.frame.loc[day]
    assert bar.close >= whole.limit_price  # sent while the bar traded: filled at its limit as the close is beyond
    (fill,) = [f for f in broker.fills() if f.client_order_id == whole.client_order_id]
    assert (pd.Timestamp(fill.timestamp), fill.price, fill.qty) == (day, whole.limit_price, whole.qty)
    assert sum(f.qty if f.side == "buy" else -f.qty for f in broker.fills() if pd.Timestamp(f.timestamp) <= day) == 0
    broker.close()
    journal.close()


@pytest.mark.parametrize("at, sent", [("15:00", "submitted"), ("20:55", "refused"), ("13:00", None)])
def test_a_live_look_sends_the_cls_only_in_the_next_session_before_the_cutoff(tmp_path, straight, at, sent):
    """The loop stopped right after the first decision that turned against a held position (the straight replay's
    first ``on_close``), then a look with a wall clock while the next bar trades, as ``trade run``'s watch: at
    10:00 am ET the ``cls`` goes out; at 3:55 pm ET (past the 3:50 pm cutoff) it is journalled as refused, never
    sent, and the position stays; at 8:00 am ET (the session not open) nothing is journalled."""
    bars = {"SP500": load_symbol("SP500")}
    index = bars["SP500"].frame.index
    turned = straight["turned"]
    cycles = int(((index >= pd.Timestamp(STRAIGHT[0], tz="UTC")) & (index <= pd.Timestamp(turned))).sum())
    state = tmp_path / "look"
    planner = BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, exit=RULE), strategies=GUARD)
    config = LoopConfig(("SP500",), gates=OPEN_GATES, exit=RULE)
    replay(bars, planner, state, STRAIGHT[0], STRAIGHT[1], config, hold=True, max_cycles=cycles)
    journal = Journal(state / "journal.db")
    assert journal.last_done_cycle("stock") == turned and not [i for i in journal.intents() if i.kind == ON_CLOSE]
    broker = PaperBroker(state / "broker.db", bars, hold=True)
    loop = TradingLoop(broker, journal, planner, history_feed(bars, lambda: broker.clock, None),
                       replace(config, hold_agreeing=True), asset_classes={"SP500": "stock"})
    nxt = index[index.get_loc(pd.Timestamp(turned)) + 1]
    assert nxt.month in (1, 2)  # ET is UTC - 5
    now = pd.Timestamp(f"{nxt:%Y-%m-%d} {at}", tz="UTC")
    looked = []
    broker.advance_to(nxt, lambda stamp: looked.append(loop.reconcile(turned, now=now)))
    exit_ = journal.intent(client_order_id("SP500", turned, ON_CLOSE))
    held = {p.symbol: p.qty for p in broker.positions()}
    if sent is None:
        assert exit_ is None and held["SP500"] > 0
    elif sent == "refused":
        assert exit_.status == "refused" and "after the cls cutoff" in exit_.error and held["SP500"] > 0
        assert looked[0].late == [exit_.client_order_id]
        assert exit_.client_order_id not in [cid for cid, _ in broker.submit_log()]
    else:
        assert exit_.status == "submitted" and exit_.time_in_force == CLS and "SP500" not in held
        (fill,) = [f for f in broker.fills() if f.client_order_id == exit_.client_order_id]
        assert (pd.Timestamp(fill.timestamp), fill.price) == (nxt, bars["SP500"].frame.at[nxt, "close"])
    broker.close()
    journal.close()
