"""A year's replay that holds (``replay(hold=True)``): SP500 beside two synthetic 24/7 crypto series through 2015
(ETHUSD on MaxDiff's limit buys, BTCUSD on market buys with a take-profit at the forecast high). Positions carry
overnight and are marked at each close; a position is held on while the decision stays on its side, its
take-profit resting across bars until a later bar touches it, and closed at market when the decision turns;
crypto's take-profits are sent on their own; a held position short of the bar's target beyond the band is topped
up, a crypto one's resting take-profit cancelled and confirmed first (the wash cancel-then-submit); the paper broker refuses nothing and neither would the independent
fake (:mod:`marketcast.fake_alpaca.rules`, asked of every order with the account as it stood at the submit);
every time column is simulated time with no fill before its submission, and every entry fills as the backtest's
rule fills it on the bar after its decision."""

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
from marketcast.trade.journal.ids import client_order_id
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.ops import blotter
from marketcast.trade.risk.limits import RiskLimits
from marketcast.trade.types import OrderRequest
from marketcast.trade.venues.paper import PaperBroker

from .test_clocks import OPEN_GATES, crypto_bars

SYMS = ("SP500", "ETHUSD", "BTCUSD")
STOCK = {"class": "us_equity", "tradable": True, "fractionable": False, "shortable": True, "easy_to_borrow": True}
# the paper broker knows no crypto price grid and takes Alpaca's finest size (its docstring): the same here
CRYPTO = {"class": "crypto", "tradable": True, "fractionable": True, "shortable": False, "easy_to_borrow": False,
          "min_order_size": "1E-9", "min_trade_increment": "1E-9", "price_increment": "1E-20"}


class Judged(PaperBroker):
    """The paper broker, each order first judged by the independent fake's rules on the account as it stands."""

    # (client order id, the fake's refusal or None, the opposite orders working on its symbol as it was sent)
    verdicts: ClassVar[list[tuple[str, str | None, list[str]]]] = []

    def submit(self, request: OrderRequest):
        opposite = [o.client_order_id for o in self.open_orders() if o.symbol == request.symbol
                    and o.side != request.side]
        self.verdicts.append((request.client_order_id, fake_refusal(self, request), opposite))
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
    bars = {"SP500": load_symbol("SP500"), "ETHUSD": crypto_bars("ETHUSD", "2014-01-01", "2015-12-31"),
            "BTCUSD": crypto_bars("BTCUSD", "2014-01-01", "2015-12-31", seed=3)}
    planner = BacktestPlanner(load_forecaster("baseline"), pinned={"ETHUSD": "maxdiff", "BTCUSD": "entry_takeprofit"})
    # two random walks of 3 % a day at up to half the equity each: a 5 % daily-loss halt would end the year early;
    # the paper broker's quote (the close +- its half spread) sizes the entries, as the fake values a crypto
    # market buy at the ask plus the collar (with bid = ask = close, 16 buys would exceed the cash by the spread)
    config = LoopConfig(SYMS, gates=OPEN_GATES, risk=RiskLimits(max_daily_loss=0.15), add_latest=True)
    patch = pytest.MonkeyPatch()
    patch.setattr(replay_module, "PaperBroker", Judged)
    Judged.verdicts = []
    try:
        result = replay_module.replay(bars, planner, state, "2015-01-01", "2015-12-31", config, hold=True)
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
    assert kinds[("entry", "SP500")] > 40 and kinds[("close", "SP500")] > 40 and kinds[("close", "ETHUSD")] >= 3, kinds
    assert kinds[("close", "BTCUSD")] > 20, kinds  # the decision turned flat under a held position
    assert kinds[("take_profit", "ETHUSD")] >= 3 and kinds[("take_profit", "BTCUSD")] > 50, kinds  # sent apart
    assert kinds[("take_profit", "SP500")] == 0, kinds  # stocks: OTO legs
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
    # 120 of 160 positions closed on a later bar than they opened (held over a close); held on while the decision
    # stayed on their side, the longest for 18 bars (the other 40 opened and closed within one bar)
    assert carried >= 100 and longest >= 10, (carried, longest)
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


def test_take_profits_rest_across_bars_and_fill_where_a_later_bar_touches_them(year):
    """A take-profit sent while bar s traded (a crypto one, sent apart once its entry filled) fills in bar s only
    if s closes at or beyond it, at its limit; else it rests, untouched by every bar before the one that fills
    it, at its limit or at that bar's open on a gap through it (:func:`~marketcast.backtest.fills.limit_fill`)."""
    bars, _, journal, broker, _ = year
    kinds = {i.client_order_id: i.kind for i in journal.intents()}
    done = dict(broker.conn.execute("SELECT client_order_id, done_at FROM orders").fetchall())
    fills = {f.client_order_id: f for f in broker.fills()}
    same, later = 0, 0
    for o in broker.orders(limit=10**6):
        if kinds.get(o.client_order_id) != "take_profit" or o.status != "filled":
            continue
        assert o.side == "sell" and o.time_in_force == "gtc"  # the crypto positions are long
        frame = bars[o.symbol].frame
        sent, filled = pd.Timestamp(o.submitted_at), pd.Timestamp(done[o.client_order_id])
        fill, bar = fills[o.client_order_id], frame.loc[filled]
        assert pd.Timestamp(fill.timestamp) == filled
        if filled == sent:
            assert bar["close"] >= o.limit_price and fill.price == o.limit_price
            same += 1
            continue
        between = frame.loc[sent:filled].iloc[1:-1]
        assert (between["high"] < o.limit_price).all() and frame.loc[sent, "close"] < o.limit_price
        assert bar["high"] >= o.limit_price and fill.price == max(o.limit_price, bar["open"])
        later += 1
    # 74 take-profits filled: 41 in the bar they were sent, 33 resting until a later bar touched them
    assert same >= 20 and later >= 20, (same, later)


def test_a_top_up_cancels_the_loops_take_profit_sees_it_confirmed_then_buys_and_covers_the_whole_position(year):
    """The wash cancel-then-submit (:mod:`~marketcast.trade.loop.topup`): a crypto position held on and short of the
    bar's target beyond the band is bought up at market, and its resting take-profit, a sell limit of the loop's own,
    would wash against that buy (https://docs.alpaca.markets/docs/user-protection: against a market order "always
    rejected"). Each such cancel is journalled with the top-up it makes way for, names an order the loop sent (a
    take-profit on the same symbol), is done, and the broker shows the take-profit canceled at or before the
    top-up's submission on the simulated clock and before it in the broker's sequence, with no opposite order
    working on the symbol when the top-up went out. Once the top-up fills, a take-profit for the whole position goes
    out (id (symbol, bar, take_profit@top_up@filled qty)). Otherwise the loop never works a buy and a sell of its own
    on one symbol at once (it enters only a symbol it neither holds nor works, and a close goes out after the
    take-profit's cancel is confirmed, on the same side): every interval counted from the broker's books."""
    _, _, journal, broker, verdicts = year
    intents = {i.client_order_id: i for i in journal.intents()}
    rows = {r["client_order_id"]: r for r in broker.conn.execute("SELECT * FROM orders")}
    opposite = {cid: working for cid, _, working in verdicts}
    fills = broker.fills()
    washes = [c for c in journal.cancels() if c["reason"] != "its bar has passed"]
    for c in washes:
        words = c["reason"].split()  # "in the way of top_up <client order id> (potential wash trade)"
        assert words[:4] == ["in", "the", "way", "of"] and c["reason"].endswith("(potential wash trade)"), c
        top_up, cancelled = intents[words[5]], intents[c["client_order_id"]]
        assert (words[4], top_up.kind, cancelled.kind, c["status"]) == ("top_up", "top_up", "take_profit", "done")
        assert cancelled.symbol == top_up.symbol == c["symbol"] and (cancelled.side, top_up.side) == ("sell", "buy")
        tp, buy = rows[cancelled.client_order_id], rows[top_up.client_order_id]
        assert tp["status"] == "canceled" and tp["seq"] < buy["seq"]
        assert pd.Timestamp(tp["done_at"]) <= pd.Timestamp(buy["submitted_at"]) == pd.Timestamp(top_up.decision_ts)
        assert opposite[top_up.client_order_id] == []  # the cancel was confirmed before the buy went out
        filled = journal.filled_qty(top_up.client_order_id, "top_up")
        assert filled == pytest.approx(top_up.qty)
        cover = rows[client_order_id(top_up.symbol, top_up.decision_ts, f"take_profit@top_up@{filled!r}")]
        at = pd.Timestamp(cover["submitted_at"])
        position = sum(f.qty if f.side == "buy" else -f.qty for f in fills  # the cover may fill within its bar
                       if f.symbol == top_up.symbol and pd.Timestamp(f.timestamp) <= at
                       and f.client_order_id != cover["client_order_id"])
        assert cover["side"] == "sell" and cover["qty"] == pytest.approx(position, abs=1e-8)
        assert cover["limit_price"] == pytest.approx(top_up.take_profit)
    # 2 wash cancel-then-submits (BTCUSD, 2015-05-23 and 2015-07-19) among 14 top-ups (12 SP500, whose held position
    # has no resting exit, so no cancel); both covering take-profits sent
    tops = Counter(i.symbol for i in intents.values() if i.kind == "top_up" and i.status == "submitted")
    assert len(washes) >= 1 and tops["SP500"] >= 5, (washes, tops)
    spans = [(r["symbol"], r["side"], pd.Timestamp(r["submitted_at"]), pd.Timestamp(r["done_at"] or "2100-01-01"))
             for r in broker.conn.execute("SELECT symbol, side, submitted_at, done_at FROM orders")]
    overlaps = [(a, b) for a in spans for b in spans if a[0] == b[0] and a[1] == "buy" and b[1] == "sell"
                and a[2] < b[3] and b[2] < a[3]]
    assert len(spans) > 300 and overlaps == []


def test_a_held_replay_stopped_and_resumed_ends_with_the_orders_and_fills_of_one_run(tmp_path):
    """A replay stopped every 15 cycles and resumed by a new loop (whose first look, while the next bar trades,
    decides afresh from the bars up to the last decided bar whether a position is held on) sends the same
    orders and books the same fills as one uninterrupted run."""
    bars = {"SP500": load_symbol("SP500"), "BTCUSD": crypto_bars("BTCUSD", "2014-01-01", "2015-12-31", seed=3)}
    config = LoopConfig(("SP500", "BTCUSD"), gates=OPEN_GATES, add_latest=True)
    books = []
    for state, step in ((tmp_path / "whole", None), (tmp_path / "parts", 15)):
        runs = 0
        while runs < 10:  # a stopped replay returns before its last settle: the equity curve ends short of March 15
            planner = BacktestPlanner(load_forecaster("baseline"), pinned={"BTCUSD": "entry_takeprofit"})
            result = replay_module.replay(bars, planner, state, "2015-01-01", "2015-03-15", config, hold=True,
                                          max_cycles=step)
            runs += 1
            if result.equity.index[-1] == pd.Timestamp("2015-03-15", tz="UTC"):
                break
        assert runs == (1 if step is None else 5)  # 73 decision days: stopped after 15 four times, then 13 more
        broker = PaperBroker(state / "broker.db", bars, hold=True)
        books.append(([(o.client_order_id, o.status, o.side, o.qty, o.limit_price, o.submitted_at)
                       for o in broker.orders(limit=10**6)],
                      [(f.client_order_id, f.side, f.qty, f.price, f.timestamp) for f in broker.fills()]))
        broker.close()
    (orders, fills), resumed = books
    filled = sum(1 for o in orders if o[1] == "filled")
    assert len(orders) > 40 and filled > 20 and resumed == (orders, fills)
