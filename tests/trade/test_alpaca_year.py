"""A replay-style year through the real TradingLoop and AlpacaBroker against the faithful fake: the embedded
SP500 as a stock and NASDAQ's bars as a crypto pair (NQUSD: a price grid of $1, sizes in 0.0001), each day's
bar played through the working orders before the loop decides on it. Every order the loop sends must be one
Alpaca accepts."""

from __future__ import annotations

from collections import Counter

import pandas as pd


from marketcast.backtest.orders import Decision
from marketcast.data import load_symbol
from marketcast.trade.journal.ids import ENTRY, client_order_id
from marketcast.forecast import load_forecaster
from marketcast.trade.loop.planner import BacktestPlanner, Signal

from marketcast.trade.ops import blotter
from marketcast.trade.test_kit.alpaca_env import adapter, alpaca_loop, embedded_fake, order
from marketcast.fake_alpaca.server import FakeAlpaca

from .test_clocks import audit_blotter

SYMBOLS = ("SP500", "NQUSD")
CLASSES = {"SP500": "stock", "NQUSD": "crypto"}


def year_fake(end: str) -> FakeAlpaca:
    fake = embedded_fake(end, crypto={"NQUSD": "NASDAQ"})
    fake.exchange.cancel_polls = 0  # the venue confirms a cancel by the first read after it (still asynchronous)
    return fake


def days(start: str, end: str) -> list[pd.Timestamp]:
    return list(load_symbol("SP500").frame.loc[start:end].index)


def test_a_year_of_orders_that_alpaca_accepts_and_the_users_holdings_untouched(tmp_path):
    with year_fake("2015-12-31") as fake:
        first = days("2015-01-01", "2015-12-31")
        fake.exchange.clock = first[0].strftime("%Y-%m-%dT%H:%M:%SZ")
        # the user's own shares, with a good-till-cancelled exit far away, on a stock the loop does not trade (on
        # one it trades they would hold it: the loop could not tell its shares from theirs, test_holdings.py)
        fake.hold("NASDAQ", 7, 4000.0)
        user = adapter(fake).submit(order("user-exit", symbol="NASDAQ", side="sell", qty=7, limit_price=9999.0,
                                          take_profit=None, time_in_force="gtc"))
        # SP500 pinned to MaxDiff so its orders include limits on the penny grid (under the default exit rule the
        # walk-forward pick there sends market orders only)
        planner = BacktestPlanner(load_forecaster("baseline"), pinned={"SP500": "maxdiff"})
        loop = alpaca_loop(fake, tmp_path, SYMBOLS, CLASSES, planner=planner, monitor=True)
        refused = Counter()
        for ts in first:
            fake.session(ts)
            report = loop.run_cycle(ts.isoformat())
            refused.update(reason for reason in report.refused.values())
        posts = [b for m, p, b in fake.requests if m == "POST" and p == "/v2/orders"]
        assert len(posts) > 150 and fake.rejections == []  # not one order Alpaca would refuse
        assert len({b["client_order_id"] for b in posts}) == len(posts)  # and none sent twice
        kinds = Counter(i.kind for i in loop.journal.intents() if i.status == "submitted")
        assert kinds["entry"] > 60 and kinds["close"] > 30, kinds
        stock_prices = [b["limit_price"] for b in posts if b["symbol"] == "SP500" and "limit_price" in b]
        assert all(round(p, 2) == p for p in stock_prices) and any(p != int(p) for p in stock_prices)
        crypto = [b for b in posts if b["symbol"] == "NQ/USD"]
        assert crypto and all(b["time_in_force"] == "gtc" and "take_profit" not in b for b in crypto)
        assert all(round(b["qty"], 4) == b["qty"] for b in crypto)
        # every planned order could be made valid (the backtest's crypto strategies never go short; a refused
        # order is covered in test_cycle.py)
        assert refused == Counter() and not [i for i in loop.journal.intents() if i.status != "submitted"]
        # the user's order and shares are as they were (the venue ended the gtc order after its 90 days, the loop
        # never touched it); what the loop holds is its own
        exit_ = fake.order("user-exit")
        assert (exit_["status"], exit_["qty"], exit_["filled_qty"]) == ("expired", "7", "0")
        assert (pd.Timestamp(exit_["updated_at"]) - pd.Timestamp(exit_["submitted_at"])).days in (90, 91, 92, 93)
        assert not any(p.endswith(user.id) for m, p, _ in fake.requests if m == "DELETE")
        held = {p["symbol"]: float(p["qty"]) for p in fake.positions}
        book = loop.reconcile(first[-1].isoformat()).book
        assert held["NASDAQ"] == 7 and held.get("SP500", 0.0) == book.owned.get("SP500", 0.0)
        assets = loop.reconciler.assets(("NASDAQ", *SYMBOLS))
        assert book.foreign(assets)["NASDAQ"]["position"] == 7 and book.unexpected(assets) == {}  # crypto fee dust too
        assert loop.journal.halts.active() == []
        # the blotter shows it too: crypto bought within the cash it saw (the fake lends stocks 2x, not crypto)
        orders = pd.DataFrame(blotter.rows(loop.journal))
        audit_blotter(orders, weekends=False, stock_limits=True)
        crypto = orders[(orders["asset_class"] == "crypto") & (orders["side"] == "buy")]
        stock = orders[(orders["asset_class"] == "stock") & (orders["kind"] == "entry")]
        assert (crypto["buying_power_seen"] < stock["buying_power_seen"].max() / 1.5).any()


class AlternatingPlanner:
    """Re-plans of one bar that disagree: every call picks the other side and another strategy name (what a
    restart with another model, or a re-plan on fresher data, can do). It decides from the real bars."""

    model = "alternating"

    def __init__(self) -> None:
        self.calls = 0

    def plan(self, bars, costs, learn_from=None) -> Signal:
        self.calls += 1
        close = float(bars.frame["close"].iloc[-1])
        long = (self.calls // 2) % 2 == 0  # two symbols a cycle: each symbol flips from one cycle to the next
        d = Decision(1, close * 0.99, close * 1.01) if long else Decision(-1, close * 1.01, close * 0.99)
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), f"strategy-{self.calls % 3}", d, close,
                      {"edge": 0.01, "sharpe": 1.0, "max_drawdown": 0.0})


def test_ten_re_plans_of_one_bar_leave_exactly_one_order_per_symbol(tmp_path):
    with year_fake("2015-03-02") as fake:
        ts = days("2015-03-02", "2015-03-02")[0]
        fake.exchange.clock = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
        planner, seen = AlternatingPlanner(), set()
        for _ in range(10):  # each a fresh process (a new loop over the same state) re-planning the same bar
            report = alpaca_loop(fake, tmp_path, ("SP500", "NASDAQ"), planner=planner).run_cycle(ts.isoformat())
            seen |= {(s.symbol, s.decision.side, s.strategy) for s in report.signals}
        assert {side for _, side, _ in seen} == {1, -1} and len({s for _, _, s in seen}) == 3  # they disagreed
        entries = [o for o in fake.orders if o["client_order_id"].startswith("mc-")]
        assert sorted(o["symbol"] for o in entries) == ["NASDAQ", "SP500"]  # ... and still one order each
        assert {o["client_order_id"] for o in entries} == {client_order_id(s, ts.isoformat(), ENTRY)
                                                           for s in ("SP500", "NASDAQ")}
        assert [m for m, p, _ in fake.requests].count("POST") == 2 and fake.rejections == []
