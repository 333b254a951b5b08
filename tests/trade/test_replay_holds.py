"""A year's replay that holds (``replay(hold=True)``): SP500 beside a synthetic 24/7 crypto series through 2015.
Positions carry overnight and are marked at each close, the loop closes what earlier bars left and sends
crypto's take-profits on its own, the paper broker refuses nothing and neither would the independent fake
(:mod:`marketcast.fake_alpaca.rules`, asked of every order with the account as it stood at the submit), every
time column is simulated time with no fill before its submission, and every entry fills as the backtest's rule
fills it on the bar after its decision."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import pandas as pd
import pytest

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.data import load_symbol
from marketcast.fake_alpaca import rules
from marketcast.forecast import load_forecaster
from marketcast.trade import replay as replay_module
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.ops import blotter
from marketcast.trade.types import OrderRequest
from marketcast.trade.venues.paper import PaperBroker

from .test_clocks import OPEN_GATES, crypto_bars

SYMS = ("SP500", "ETHUSD")
STOCK = {"class": "us_equity", "tradable": True, "fractionable": False, "shortable": True, "easy_to_borrow": True}
# the paper broker knows no crypto price grid and takes Alpaca's finest size (its docstring): the same here
CRYPTO = {"class": "crypto", "tradable": True, "fractionable": True, "shortable": False, "easy_to_borrow": False,
          "min_order_size": "1E-9", "min_trade_increment": "1E-9", "price_increment": "1E-20"}


class Judged(PaperBroker):
    """The paper broker, each order first judged by the independent fake's rules on the account as it stands."""

    verdicts: ClassVar[list[tuple[str, str | None]]] = []

    def submit(self, request: OrderRequest):
        self.verdicts.append((request.client_order_id, fake_refusal(self, request)))
        return super().submit(request)


def fake_refusal(b: PaperBroker, r: OrderRequest) -> str | None:
    asset, crypto = (CRYPTO, True) if b.asset(r.symbol).crypto else (STOCK, False)
    leg = r.take_profit is not None and b.attaches_take_profit(r.symbol)
    body = {"symbol": r.symbol, "qty": r.qty, "side": r.side, "type": r.type, "time_in_force": r.time_in_force,
            **({"limit_price": r.limit_price} if r.limit_price is not None else {}),
            **({"take_profit": {"limit_price": r.take_profit}, "order_class": "oto"} if leg else {})}
    account, quote = b.account(), b.latest_quote(r.symbol)
    bid, ask = rules.D(quote.bid), rules.D(quote.ask)
    p = next((p for p in b.positions() if p.symbol == r.symbol), None)
    held = rules.D(0 if p is None else p.qty)
    free = rules.D(0 if p is None else (p.qty_available if p.qty_available is not None else p.qty))
    working = []
    for o in b.open_orders():
        limit = None if o.limit_price is None else rules.D(o.limit_price)
        working.append(rules.Working(o.symbol, o.side, o.type, limit, o.status, o.root_client_order_id))
        if o.take_profit is not None and o.parent_client_order_id is None:  # its held leg
            working.append(rules.Working(o.symbol, "sell" if o.side == "buy" else "buy", "limit",
                                         rules.D(o.take_profit), "held", o.client_order_id))
    power = account.non_marginable_buying_power if crypto else account.buying_power
    try:
        rules.flags(body, crypto, r.side == "sell" and held <= 0, rules.Flags())
        rules.prices(body, asset)
        rules.shape(body, asset)
        if not crypto:
            rules.take_profit_base(body, bid, ask)
        rules.carry(body, asset, held, free, rules.D(account.equity), rules.D(power), ask)
        rules.wash(rules.legs(body, r.client_order_id), working, str.upper)
    except rules.Refused as exc:  # the paper broker reports no day-trade count: PDT is not evaluated
        return exc.message
    return None


@pytest.fixture(scope="module")
def year(tmp_path_factory, request):
    state = tmp_path_factory.mktemp("hold") / "st"
    bars = {"SP500": load_symbol("SP500"), "ETHUSD": crypto_bars("ETHUSD", "2014-01-01", "2015-12-31")}
    planner = BacktestPlanner(load_forecaster("baseline"), pinned={"ETHUSD": "maxdiff"})
    patch = pytest.MonkeyPatch()
    patch.setattr(replay_module, "PaperBroker", Judged)
    Judged.verdicts = []
    try:
        result = replay_module.replay(bars, planner, state, "2015-01-01", "2015-12-31", LoopConfig(SYMS, gates=OPEN_GATES),
                                      hold=True)
    finally:
        patch.undo()
    journal = Journal(state / "journal.db")
    broker = PaperBroker(state / "broker.db", bars, hold=True)
    yield bars, result, journal, broker, list(Judged.verdicts)
    broker.close()
    journal.close()


def test_the_year_holds_closes_and_sends_crypto_take_profits_with_no_refusal(year):
    _, result, journal, broker, verdicts = year
    assert result.cycles_run == 364 and result.refusals == 0  # every calendar day but the last is a crypto cycle
    kinds = Counter((i.kind, i.symbol) for i in journal.intents() if i.status == "submitted")
    assert kinds[("entry", "SP500")] > 40 and kinds[("close", "SP500")] > 40 and kinds[("close", "ETHUSD")] > 3, kinds
    assert kinds[("take_profit", "ETHUSD")] >= 3 and kinds[("take_profit", "SP500")] == 0, kinds  # stocks: OTO legs
    assert not [i for i in journal.intents() if i.status not in ("submitted",)]  # nothing refused or rejected
    assert len(verdicts) == len(broker.orders(limit=10**6)) - sum(
        o.parent_client_order_id is not None for o in broker.orders(limit=10**6))  # every order was judged ...
    assert [v for v in verdicts if v[1] is not None] == []  # ... and the independent fake refuses none


def test_positions_carry_overnight_and_equity_is_cash_plus_the_marked_positions(year):
    bars, _, _, broker, _ = year
    held, opened, carried, longest = {}, {}, 0, 0
    for f in broker.fills():
        q = held.get(f.symbol, 0.0)
        held[f.symbol] = q + (f.qty if f.side == "buy" else -f.qty)
        if q == 0:
            opened[f.symbol] = f.timestamp
        elif abs(held[f.symbol]) < 1e-9:
            index = bars[f.symbol].frame.index
            span = index.get_loc(pd.Timestamp(f.timestamp)) - index.get_loc(pd.Timestamp(opened[f.symbol]))
            carried += span >= 1
            longest = max(longest, span)
    # 86 positions closed on a later bar than they opened (held over a close), each for one bar (the loop closes
    # a leftover at the next decision); none of the year's take-profits filled, so every exit is a close
    assert carried >= 80 and longest >= 1, (carried, longest)
    marked = 0
    for ts, equity, cash in broker.conn.execute("SELECT ts, equity, cash FROM equity ORDER BY ts"):
        at = pd.Timestamp(ts)
        pos: dict[str, float] = {}
        for f in broker.fills():
            if pd.Timestamp(f.timestamp) <= at:
                pos[f.symbol] = pos.get(f.symbol, 0.0) + (f.qty if f.side == "buy" else -f.qty)
        value = sum(q * float(bars[s].frame.loc[:at, "close"].iloc[-1]) for s, q in pos.items() if abs(q) > 1e-9)
        assert equity == pytest.approx(cash + value, abs=1e-6), ts
        marked += abs(value) > 0
    assert marked >= 80  # bar closes with a position open, marked at that close


def test_every_time_is_simulated_and_no_fill_comes_before_its_submission(year):
    _, _, journal, broker, _ = year
    orders = pd.DataFrame(blotter.rows(journal))
    year_2015 = (pd.Timestamp("2015-01-01", tz="UTC"), pd.Timestamp("2015-12-31", tz="UTC"))
    for column in ("decision_ts", "submitted_at", "filled_at", "exit_filled_at"):
        times = pd.to_datetime(orders[column].dropna(), utc=True)  # exit_filled_at: a leg's fill (none this year)
        assert (len(times) > 0 or column == "exit_filled_at") and times.between(*year_2015).all(), column
    sent = orders[orders["filled_at"].notna()]
    assert (pd.to_datetime(sent["filled_at"], utc=True) >= pd.to_datetime(sent["submitted_at"], utc=True)).all()
    assert (pd.to_datetime(sent["submitted_at"], utc=True) >= pd.to_datetime(sent["decision_ts"], utc=True)).all()
    submitted = {o.client_order_id: pd.Timestamp(o.submitted_at) for o in broker.orders(limit=10**6)}
    assert all(pd.Timestamp(f.timestamp) >= submitted[f.client_order_id] for f in broker.fills())


def test_every_entry_fills_as_the_backtests_rule_on_the_bar_after_its_decision(year):
    """Where the backtest's rule applies (an entry on the bar after its decision, with its take-profit if that
    fills in the same bar), the held replay fills as :func:`settle`; what a bar leaves open is held, not closed
    at that bar's close as the backtest books it."""
    bars, _, journal, broker, _ = year
    entries = {i.client_order_id: i for i in journal.intents() if i.kind == "entry"}
    checked = 0
    for f in broker.fills():
        i = entries.get(f.client_order_id)
        if i is None or f.kind != "entry":
            continue
        frame = bars[i.symbol].frame
        nxt = frame.iloc[frame.index.get_loc(pd.Timestamp(i.decision_ts)) + 1]
        assert pd.Timestamp(f.timestamp) == nxt.name
        side = 1 if i.side == "buy" else -1
        costs = Costs.for_asset(bars[i.symbol].asset_class, periods_per_year=bars[i.symbol].periods_per_year)
        s = settle(Decision(side, i.limit_price, i.take_profit), Bar(nxt.open, nxt.high, nxt.low, nxt.close), costs)
        assert s.filled and f.price == s.entry_price, (i, s)
        checked += 1
    assert checked >= 80
