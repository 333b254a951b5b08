"""The loop never sends what the venue would refuse: against the fake Alpaca (its own reading of Alpaca's pages,
written apart from the loop's rules model), an exit that would wash against the loop's own order waits for that order's confirmed cancel, one that
would wash against a foreign order waits untouched, an entry that would wash is refused in the plan, crypto is
sized within cash, and pattern-day-trader protection is respected."""

from __future__ import annotations

from decimal import Decimal

from marketcast.trade.interface import OrderRejected
from marketcast.trade.journal.ids import CLOSE, client_order_id
from marketcast.trade.loop.cycle import describe
from marketcast.trade.test_kit.alpaca_env import D0, D1, adapter, alpaca_loop, embedded_fake, order, submitted
from marketcast.trade.types import CLS, MARKET, OrderRequest
from marketcast.fake_alpaca.server import STOCK
from marketcast.fake_alpaca.exchange import Exchange, ny_day

from .helpers import LongPlanner


def requests_of(fake) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in fake.requests]


def test_a_leftover_close_cancels_the_loops_take_profit_in_its_way_confirms_then_closes(fake, tmp_path):
    """A restart of bar D1 after a late fill: D1's long entry is out (its take-profit leg, a sell at 195, held
    until the entry fills) when D0's short entry fills, so the loop has a leftover short to close with a market
    buy, which could fill against that take-profit (a wash trade: always refused against a market order). The
    loop cancels its own entry (the held leg goes with it), waits until the venue confirms, and only then sends
    the close: the venue refuses nothing."""
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-d0", side="sell", qty=10, limit_price=190.0, take_profit=None), D0)  # a short
    submitted(loop, order("mc-d1", qty=10, limit_price=185.0, take_profit=195.0), D1)
    fake.fill("mc-d0", 10, 190.0, at="2024-04-30T15:00:00Z")  # the late fill
    d1 = fake.order("mc-d1")
    r = loop.reconcile(D1)
    close_id = client_order_id("AAPL", D1, CLOSE)
    assert r.closes == [close_id] and r.deferred == {} and fake.rejections == []
    assert d1["status"] == "canceled" and d1["legs"][0]["status"] == "canceled"
    seen = requests_of(fake)
    delete = seen.index(("DELETE", f"/v2/orders/{d1['id']}"))
    post = seen.index(("POST", "/v2/orders"), delete)
    assert ("GET", f"/v2/orders/{d1['id']}") in seen[delete:post]  # polled until canceled, then closed
    close = fake.order(close_id)
    assert (close["side"], close["type"], close["qty"]) == ("buy", "market", "10")
    [cancel] = loop.journal.cancels()  # write-ahead, as every cancel
    assert (cancel["order_id"], cancel["status"], cancel["decision_ts"]) == (d1["id"], "done", D1)
    assert "potential wash trade" in cancel["reason"] and close_id in cancel["reason"]


def test_an_unconfirmed_cancel_in_the_way_defers_the_close_and_a_restart_sends_it_once(fake, tmp_path):
    """The venue sits on the cancel: the close waits (never sent while the take-profit may still trade); a
    restarted process finds the cancel asked for, only awaits it (no second DELETE), then closes, once."""
    fake.exchange.cancel_polls = 10_000
    loop = alpaca_loop(fake, tmp_path, cancel_wait_s=0.3)
    submitted(loop, order("mc-d0", side="sell", qty=10, limit_price=190.0, take_profit=None), D0)
    submitted(loop, order("mc-d1", qty=10, limit_price=185.0, take_profit=195.0), D1)
    fake.fill("mc-d0", 10, 190.0, at="2024-04-30T15:00:00Z")
    d1, close_id = fake.order("mc-d1"), client_order_id("AAPL", D1, CLOSE)
    r = loop.reconcile(D1)
    assert r.closes == [] and "not confirmed" in r.deferred["AAPL"] and fake.posts(close_id) == 0
    assert d1["status"] == "pending_cancel" and loop.journal.intent(close_id) is None
    d1["cancel_polls"] = 0  # the venue confirms at the next read
    for _ in range(2):  # restarted processes over the same journal
        r = alpaca_loop(fake, tmp_path).reconcile(D1)
        assert r.closes == [close_id] and r.deferred == {}
    deletes = [p for m, p in requests_of(fake) if m == "DELETE"]
    assert deletes == [f"/v2/orders/{d1['id']}"] and d1["status"] == "canceled"
    assert fake.posts(close_id) == 1 and fake.rejections == []


def test_a_close_that_would_wash_against_a_foreign_order_waits_and_never_touches_it(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-d0", take_profit=None), D0)
    fake.fill("mc-d0", 10, 188.5, at="2024-04-30T15:00:00Z")
    user = adapter(fake).submit(order("user-bid", qty=5, limit_price=150.0, take_profit=None, time_in_force="gtc"))
    r = loop.reconcile(D1)
    close_id = client_order_id("AAPL", D1, CLOSE)
    assert r.closes == [] and fake.posts(close_id) == 0 and fake.rejections == []
    assert r.deferred["AAPL"] == ("potential wash trade against user-bid (buy 5 limit @ 150, accepted), which the "
                                  "loop did not place (left untouched)")
    assert not [p for m, p in requests_of(fake) if m == "DELETE"] and fake.order("user-bid")["status"] == "accepted"
    assert user.qty == 5 and loop.journal.cancels() == []


def test_an_entry_that_would_wash_is_refused_in_the_plan_and_never_sent(fake, tmp_path):
    adapter(fake).submit(order("user-offer", side="sell", qty=5, limit_price=150.0, take_profit=None,
                               time_in_force="gtc"))  # the user's short sale, under the loop's bid
    loop = alpaca_loop(fake, tmp_path, planner=LongPlanner())
    report = loop.run_cycle(D1)
    entry = client_order_id("AAPL", D1, "entry")
    assert report.refused == {entry: "potential wash trade detected. use complex orders"} and report.submitted == []
    assert "refused: potential wash trade detected" in describe(report)[0]["why_not"]
    assert fake.posts(entry) == 0 and fake.rejections == []
    assert loop.journal.intent(entry).status == "refused"


def test_crypto_is_sized_within_the_cash_the_account_has_not_its_margin(tmp_path):
    with embedded_fake("2015-03-02", crypto={"NQUSD": "NASDAQ"}) as fake:  # a margin account (multiplier 2)
        fake.exchange.clock = "2015-03-02T21:00:00Z"
        fake.exchange.last.update({"SP500": Decimal("2117.39")})
        fake.hold("SP500", 40, 2000.0)  # the user's shares, bought on margin
        fake.exchange.cash = Decimal(30_000)
        account = adapter(fake).account()
        assert account.non_marginable_buying_power == 30_000.0 and account.buying_power > 100_000.0
        loop = alpaca_loop(fake, tmp_path, ("NQUSD",), {"NQUSD": "crypto"}, planner=LongPlanner())
        report = loop.run_cycle("2015-03-02T05:00:00+00:00")
        [entry] = report.planned
        notional = entry.qty * entry.limit_price
        assert 29_990.0 < notional <= 30_000.0 < 0.5 * account.equity  # margin would have allowed more
        assert report.submitted == [entry.client_order_id] and fake.rejections == []


def test_pattern_day_trader_protection_refuses_the_fourth_day_trade_under_25000(fake, tmp_path):
    fake.exchange.cash = Decimal(20_000)  # equity under $25,000
    today = ny_day(fake.exchange.clock)
    fake.exchange.day_trades = [today] * 3  # three day trades in the last five business days
    a = adapter(fake).account()
    assert (a.daytrade_count, a.last_equity, a.pattern_day_trader) == (3, 20_000.0, False)
    loop = alpaca_loop(fake, tmp_path, planner=LongPlanner())
    report = loop.run_cycle(D1)
    entry = client_order_id("AAPL", D1, "entry")  # an OTO entry: its take-profit leg makes a buy/sell pair
    assert report.refused == {entry: "trade denied due to pattern day trading protection"}
    assert fake.posts(entry) == 0 and fake.rejections == []
    fake.exchange.day_trades = [today] * 2  # one more would be the third: allowed
    again = alpaca_loop(fake, tmp_path, planner=LongPlanner()).run_cycle(D0)
    assert again.submitted == [client_order_id("AAPL", D0, "entry")] and fake.rejections == []
    fake.exchange.reports_day_trades = False  # Alpaca since 2026-07-06: no such fields, no such protection
    assert adapter(fake).account().daytrade_count is None


def test_the_fake_counts_day_trades_as_finras_examples_do():
    """user-protection, "The Rule": examples A-F (one symbol a day; F: two symbols)."""
    examples = {"A": ([250, 250, -500], 1), "B": ([100, -100, 100, -100], 2), "C": ([500, -100, -100, -300], 1),
                "D": ([250, 300, 100, -150, -175], 1), "E": ([199, 142, -1, 45, -100, -200], 2)}
    for name, (fills, want) in examples.items():
        venue = Exchange({"ABC": dict(STOCK)})
        for qty in fills:
            o = {"symbol": "ABC", "side": "buy" if qty > 0 else "sell", "qty": str(abs(qty)), "filled_qty": "0",
                 "filled_avg_price": None, "legs": None}
            venue.fill(o, Decimal(abs(qty)), Decimal(10), "2024-05-01T17:00:00Z")
        assert len(venue.day_trades) == want, name
    venue = Exchange({"ABC": dict(STOCK), "XYZ": dict(STOCK)})
    for sym, qty in (("ABC", 200), ("XYZ", 100), ("ABC", -100), ("XYZ", -100)):  # F
        venue.fill({"symbol": sym, "side": "buy" if qty > 0 else "sell", "qty": str(abs(qty)), "filled_qty": "0",
                    "filled_avg_price": None, "legs": None}, Decimal(abs(qty)), Decimal(10), "2024-05-01T17:00:00Z")
    assert len(venue.day_trades) == 2 and venue.daytrade_count() == 2


def test_the_pre_check_judges_a_cls_order_by_the_brokers_clock(fake, tmp_path):
    """A market-on-close buy, asked of the loop's pre-check with what the fake shows, and then sent to the fake:
    both take it until 3:50 pm ET, refuse it after (to 7:00 pm), take it again from 7:00 pm (queued for the next
    close); on the day after Thanksgiving the cutoff is 12:50 pm; on a day without a session nothing is late. The
    pre-check reads the broker's clock (``GET /v2/clock``), never the machine's."""
    loop = alpaca_loop(fake, tmp_path)
    broker, precheck = loop.broker, loop.checks.precheck
    asset = broker.asset("AAPL")
    for n, (clock, taken) in enumerate((("2024-05-01T19:49:00Z", True), ("2024-05-01T19:50:00Z", True),
                                        ("2024-05-01T19:51:00Z", False), ("2024-05-01T22:59:00Z", False),
                                        ("2024-05-01T23:00:00Z", True), ("2024-11-29T17:49:00Z", True),
                                        ("2024-11-29T17:51:00Z", False), ("2024-07-04T19:55:00Z", True),
                                        ("2024-05-04T20:00:00Z", True))):  # a holiday, a Saturday: no session
        fake.exchange.clock = clock
        request = OrderRequest("AAPL", "buy", 1.0, f"mc-cls-{n}", MARKET, None, None, CLS)
        standing = precheck.standing("AAPL", broker.account(), broker.open_orders(), None, 100.0)
        refused = [r.rule for r in precheck.refusals(request, asset, standing)]
        assert refused == ([] if taken else ["cls_cutoff"]), clock
        try:
            broker.submit(request)
            sent = True
        except OrderRejected:
            sent = False
        assert sent == taken, clock
