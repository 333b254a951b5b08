"""Risk limits with a halted state: a scripted losing day trips the daily loss limit against the faithful fake
Alpaca, where exits are real OTO legs (the entry cancelled, the take-profit kept; re-placed once, and only once,
after its day leg expired or a partly filled entry took it along; ``flatten_on_halt`` closes the loop's quantity
and never the user's; ``trade status`` shows the positions and their exits, ``trade resume`` lifts the halt);
order-count and notional limits on the paper broker; the day's starting equity by hand."""

from __future__ import annotations

import logging
from decimal import Decimal

import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.errors import HaltedError
from marketcast.trade.journal.ids import client_order_id
from marketcast.trade.journal.state import Intent, Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.risk.freshness import Freshness
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.risk.limits import RiskGuard, RiskLimits
from marketcast.trade.risk.portfolio import PortfolioConfig, allocate
from marketcast.trade.test_kit.alpaca_env import D1, D2, alpaca_loop, order, submitted
from marketcast.trade.venues.paper import PaperBroker
from tests.trade.helpers import trade_main

from .helpers import maxdiff_planner, signal

T = pd.Timestamp
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)


def posts_and_deletes(fake) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in fake.requests if m in ("POST", "DELETE")]


AAPL_BTC = {"symbols": ("AAPL", "BTCUSD"), "classes": {"AAPL": "stock", "BTCUSD": "crypto"}}


# Positions held across looks with their take-profit working, what a halt keeps: exit rule next-open (under close
# a look while the entry's session trades would cancel the leg and send the position's market-on-close exit)
HELD = {"exit": "next-open"}


def held_with_a_take_profit_and_an_open_entry(fake, tmp_path, **limits):
    """400 AAPL the loop bought at 188.50 with its OTO take-profit leg at 199 working, and a working BTC entry (0.2
    at 59,000, gtc); the day's first equity reading 24,600 cash + 400 x 190 = 100,600 (the day's start)."""
    loop = alpaca_loop(fake, tmp_path, **AAPL_BTC,
                       loop_config={**HELD, "risk": RiskLimits(**limits), "resume": RESUME_CMD})
    submitted(loop, order("mc-big", qty=400, limit_price=188.5, take_profit=199.0), D1)
    fake.fill("mc-big", 400, 188.5, at="2024-04-30T14:00:00Z")
    submitted(loop, order("mc-btc", symbol="BTCUSD", qty=0.2, limit_price=59_000.0, take_profit=61_000.0,
                          time_in_force="gtc"), D1)
    morning = loop.reconcile(D1, now=T("2024-04-30T14:30Z"))
    assert morning.cancelled == 0 and loop.journal.halts.active() == []
    return loop


RESUME_CMD = "marketcast trade resume --state-dir STATE"
LOSS = ("risk limit: daily loss 2.78% of the day's starting equity 100,600.00 (now 97,800.00) reached the limit "
        "max_daily_loss 2.00% on 2024-04-30")


def working_exits(fake, symbol="AAPL") -> list[dict]:
    return [o for o in fake.exchange.everything() if o["symbol"] == symbol and o["side"] == "sell"
            and o["status"] in ("new", "accepted", "partially_filled")]


def test_a_losing_day_cancels_the_entry_keeps_the_take_profit_and_resume_lifts_it(fake, tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO, "marketcast.trade")
    loop = held_with_a_take_profit_and_an_open_entry(fake, tmp_path, max_daily_loss=0.02)
    leg, btc = fake.order("mc-big")["legs"][0], fake.order("mc-btc")
    fake.exchange.last["AAPL"] = Decimal("183")  # the afternoon: equity 24,600 + 400 x 183 = 97,800
    before = len(posts_and_deletes(fake))
    with pytest.raises(HaltedError) as err:
        loop.reconcile(D1, now=T("2024-04-30T18:00Z"))
    assert err.value.exit_code == 5
    [halt] = loop.journal.halts.active()
    assert (halt.source, halt.reason, str(err.value)) == ("risk", LOSS, halt.message())
    assert posts_and_deletes(fake)[before:] == [("DELETE", f"/v2/orders/{btc['id']}")]  # the entry, nothing else
    assert (btc["status"], leg["status"]) == ("canceled", "new")  # cancel confirmed; the take-profit still works
    assert any(m.startswith("BTCUSD: cancel mc-btc requested: risk limit: daily loss") for m in caplog.messages)
    exit_ = {"client_order_id": leg["client_order_id"], "entry": "mc-big", "side": "sell", "type": "limit",
             "qty": 400.0, "limit_price": 199.0, "status": "new"}
    assert halt.details["cancelled"] == ["mc-btc"] and halt.details["unconfirmed"] == []
    assert halt.details["positions"] == [{"symbol": "AAPL", "qty": 400.0, "exits": [exit_]}]
    assert halt.details["flattened"] is False and halt.details["sent"] == []

    for _ in range(2):  # while the leg works, a look (a restart refuses at once) sends nothing
        with pytest.raises(HaltedError):
            alpaca_loop(fake, tmp_path, **AAPL_BTC, loop_config=HELD).run_cycle(D1, now=T("2024-04-30T19:00Z"))
    assert len(posts_and_deletes(fake)) == before + 1

    fake.session("2024-05-01")  # halted over the next session: the day leg expires at its close, unfilled
    assert leg["status"] == "expired" and working_exits(fake) == []
    for _ in range(2):  # the next bar's look re-places it for the loop's 400 at 199, once (gtc: it stays)
        with pytest.raises(HaltedError):
            alpaca_loop(fake, tmp_path, **AAPL_BTC, loop_config=HELD).reconcile(D2, now=T("2024-05-01T21:30Z"))
    tp = client_order_id("AAPL", D2, "take_profit@halt@400.0")
    [placed] = working_exits(fake)
    assert (placed["client_order_id"], placed["qty"], placed["limit_price"], placed["type"],
            placed["time_in_force"], fake.posts(tp)) == (tp, "400", "199.0", "limit", "gtc", 1)
    assert posts_and_deletes(fake)[before + 1:] == [("POST", "/v2/orders")]
    journalled = loop.journal.intent(tp)
    assert (journalled.kind, journalled.decision_ts, journalled.status) == ("take_profit", D1, "submitted")
    [halt] = loop.journal.halts.active()
    assert halt.details["positions"] == [{"symbol": "AAPL", "qty": 400.0, "exits": [
        {**exit_, "client_order_id": tp, "entry": None, "status": "accepted"}]}]
    assert halt.details["sent"] == [tp] and halt.details["cancelled"] == ["mc-btc"]

    assert trade_main(["status", "--state-dir", str(tmp_path)]) == 0
    shown = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert f"halted trading is halted since {halt.since} (risk): risk limit: daily loss 2.78%" in shown
    assert f"AAPL 400: exits {tp} sell 400 limit @ 199 accepted" in shown
    assert trade_main(["resume", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "lifted 1 risk halt(s)"
    assert loop.journal.halts.active() == []
    after = alpaca_loop(fake, tmp_path, **AAPL_BTC, loop_config=HELD).reconcile(
        D2, now=T("2024-05-01T21:30Z"))  # trading again:
    assert fake.order(tp)["status"] == "canceled"  # the halt's take-profit (of D1's entry) is stale at D2,
    assert after.closes and fake.order(after.closes[0])["qty"] == "400"  # cancelled first, the leftover closed
    assert trade_main(["resume", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "no risk halt to lift"


def test_a_halt_re_places_the_take_profit_of_a_partly_filled_entry_it_cancels(fake, tmp_path):
    """Alpaca activates an OTO leg only once its entry has filled; cancelling the partly filled entry may take the
    held leg with it (the fake does): the filled 150 get a take-profit of their own at the entry's 199."""
    loop = alpaca_loop(fake, tmp_path, loop_config={**HELD, "risk": RiskLimits(max_daily_loss=0.01)})
    submitted(loop, order("mc-part", qty=400, limit_price=188.5, take_profit=199.0), D1)
    fake.fill("mc-part", 150, 188.5, at="2024-04-30T14:00:00Z")
    loop.reconcile(D1, now=T("2024-04-30T14:30Z"))  # 71,725 cash + 150 x 190 = 100,225
    fake.exchange.last["AAPL"] = Decimal("183")  # 71,725 + 150 x 183 = 99,175: -1.05 %
    with pytest.raises(HaltedError, match=r"daily loss 1\.05%"):
        loop.reconcile(D1, now=T("2024-04-30T18:00Z"))
    entry = fake.order("mc-part")
    assert (entry["status"], entry["filled_qty"], entry["legs"][0]["status"]) == ("canceled", "150", "canceled")
    tp = client_order_id("AAPL", D1, "take_profit@halt@150.0")
    [placed] = working_exits(fake)
    assert (placed["client_order_id"], placed["qty"], placed["limit_price"]) == (tp, "150", "199.0")
    [halt] = loop.journal.halts.active()
    assert halt.details["cancelled"] == ["mc-part"] and halt.details["sent"] == [tp]
    assert [(p["symbol"], p["qty"], [e["client_order_id"] for e in p["exits"]]) for p in halt.details["positions"]] \
        == [("AAPL", 150.0, [tp])]
    with pytest.raises(HaltedError):  # a restart's look: covered, nothing sent
        alpaca_loop(fake, tmp_path, loop_config=HELD).reconcile(D1, now=T("2024-04-30T19:00Z"))
    assert fake.posts(tp) == 1 and len(working_exits(fake)) == 1


def test_an_exit_for_more_than_the_loop_holds_is_replaced_by_one_for_its_quantity(fake, tmp_path):
    """The loop's quantity was lowered to 300 (``trade reconcile --accept-broker``) while its leg sells 400: kept,
    the leg would sell 100 shares that are not the loop's. The halt cancels it (confirmed) and re-places 300."""
    loop = alpaca_loop(fake, tmp_path, loop_config=HELD)
    submitted(loop, order("mc-big", qty=400, limit_price=188.5, take_profit=199.0), D1)
    fake.fill("mc-big", 400, 188.5, at="2024-04-30T14:00:00Z")
    loop.reconcile(D1, now=T("2024-04-30T14:30Z"))
    loop.journal.adjust("AAPL", -100.0, "trade reconcile --accept-broker")
    with pytest.raises(HaltedError):
        raise loop.risk.trip("max_orders_per_day 100", loop.broker, loop.desk, D1)
    assert fake.order("mc-big")["legs"][0]["status"] == "canceled"
    tp = client_order_id("AAPL", D1, "take_profit@halt@300.0")
    [placed] = working_exits(fake)
    assert (placed["client_order_id"], placed["qty"], placed["limit_price"]) == (tp, "300", "199.0")
    assert fake.exchange.positions["AAPL"].qty == 400  # nothing traded


def test_flatten_on_halt_closes_the_loops_quantity_only(fake, tmp_path, capsys):
    fake.hold("AAPL", 100, 150.0)  # the user's own 100 AAPL on the same account
    loop = held_with_a_take_profit_and_an_open_entry(fake, tmp_path, max_daily_loss=0.02, flatten_on_halt=True)
    leg, btc = fake.order("mc-big")["legs"][0], fake.order("mc-btc")
    fake.exchange.last["AAPL"] = Decimal("183")  # 24,600 + 500 x 183 = 116,100 of 119,600: -2.93 %
    before = len(posts_and_deletes(fake))
    with pytest.raises(HaltedError, match=r"daily loss 2\.93%"):
        loop.reconcile(D1, now=T("2024-04-30T18:00Z"))
    close = client_order_id("AAPL", D1, "flatten@400.0")
    sent = posts_and_deletes(fake)[before:]
    assert sorted(sent[:2]) == sorted([("DELETE", f"/v2/orders/{leg['id']}"), ("DELETE", f"/v2/orders/{btc['id']}")])
    assert sent[2:] == [("POST", "/v2/orders")]  # the close only once both cancels were confirmed
    assert (leg["status"], btc["status"]) == ("canceled", "canceled")
    body = next(b for m, p, b in fake.requests if m == "POST" and b.get("client_order_id") == close)
    assert (body["side"], body["qty"], body["type"], body["time_in_force"]) == ("sell", 400, "market", "day")
    [halt] = loop.journal.halts.active()
    assert halt.details["flattened"] is True and sorted(halt.details["cancelled"]) == sorted(
        [leg["client_order_id"], "mc-btc"])
    assert halt.details["positions"] == [{"symbol": "AAPL", "qty": 400.0, "exits": [
        {"client_order_id": close, "entry": None, "side": "sell", "type": "market", "qty": 400.0,
         "limit_price": None, "status": "accepted"}]}]
    assert trade_main(["status", "--state-dir", str(tmp_path)]) == 0
    assert f"AAPL 400: flattened by {close} sell 400 market accepted" in " ".join(
        capsys.readouterr().out.replace("│", " ").split())

    fake.fill(close, 400, 183.0, at="2024-04-30T18:01:00Z")
    for _ in range(2):  # later looks: the loop holds nothing, nothing more goes out
        with pytest.raises(HaltedError):
            alpaca_loop(fake, tmp_path, **AAPL_BTC,
                        loop_config={**HELD, "risk": RiskLimits(flatten_on_halt=True)}).reconcile(
                D1, now=T("2024-04-30T19:00Z"))
    assert fake.posts(close) == 1 and len(posts_and_deletes(fake)) == before + 3
    assert fake.exchange.positions["AAPL"].qty == 100  # the user's 100, untouched
    [halt] = loop.journal.halts.active()
    assert halt.details["positions"] == [] and halt.details["sent"] == [close]


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
    loop = TradingLoop(broker, Journal(tmp_path / name), maxdiff_planner(),
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
    [halt] = loop.journal.halts.active()  # the loop held nothing (the paper broker settles within the bar)
    assert (halt.details["cancelled"], halt.details["positions"], halt.details["flattened"]) == (
        [first.client_order_id], [], False)


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


def test_a_re_placed_take_profit_that_would_wash_against_a_foreign_order_waits_and_never_touches_it(fake, tmp_path):
    from marketcast.trade.test_kit.alpaca_env import adapter

    loop = held_with_a_take_profit_and_an_open_entry(fake, tmp_path, max_daily_loss=0.02)
    fake.exchange.last["AAPL"] = Decimal("183")
    with pytest.raises(HaltedError):
        loop.reconcile(D1, now=T("2024-04-30T18:00Z"))
    fake.session("2024-05-01")  # the kept day leg expires
    user = adapter(fake).submit(order("user-bid", symbol="AAPL", side="buy", qty=5, limit_price=199.5,
                                      take_profit=None, time_in_force="gtc"))  # the user's bid above the 199 exit
    before = len(posts_and_deletes(fake))
    with pytest.raises(HaltedError):
        alpaca_loop(fake, tmp_path, **AAPL_BTC, loop_config=HELD).reconcile(D2, now=T("2024-05-01T21:30Z"))
    assert posts_and_deletes(fake)[before:] == [] and fake.rejections == []  # not sent, the user's bid untouched
    assert fake.order("user-bid")["status"] == "accepted" and working_exits(fake) == []
    adapter(fake).cancel(user.id)  # the user withdraws the bid: the next look places the exit
    statuses = [adapter(fake).order(user.id).status for _ in range(2)]  # the venue confirms at the 2nd read
    assert statuses == ["pending_cancel", "canceled"]
    with pytest.raises(HaltedError):
        alpaca_loop(fake, tmp_path, **AAPL_BTC, loop_config=HELD).reconcile(D2, now=T("2024-05-01T21:45Z"))
    [placed] = working_exits(fake)
    assert (placed["side"], placed["qty"], placed["limit_price"]) == ("sell", "400", "199.0")
    assert fake.rejections == []
