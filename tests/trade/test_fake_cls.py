"""The fake Alpaca's session phases and its market-on-close orders (``time_in_force`` ``cls``), judged on the wire:
each order is the raw JSON body of ``POST /v2/orders`` (:func:`tests.trade.wire_judge.body`), each answer read back
from JSON (:func:`tests.trade.wire_judge.post`), one case over HTTP against the running server.

Alpaca ("Time in Force", https://docs.alpaca.markets/docs/orders-at-alpaca): "CLS orders submitted after 3:50pm but
before 7:00pm ET will be rejected. CLS orders submitted after 7:00pm will be queued and routed to the following
day's closing auction"; crypto takes ``gtc`` and ``ioc`` only; a bracket or OTO order takes ``day`` or ``gtc``. On
an early close the fake's cutoff is 10 minutes before it (:mod:`marketcast.fake_alpaca.market`, the assumption
stated there). The times below: 2024-05-01 is a Wednesday in EDT (16:00 New York = 20:00Z, the cutoff 19:50Z);
2024-11-29, the day after Thanksgiving, closes at 13:00 EST (18:00Z, the cutoff 17:50Z)."""

from __future__ import annotations

import json
import random
from decimal import Decimal

import requests

from marketcast.fake_alpaca import market
from marketcast.fake_alpaca.exchange import Exchange, Position
from marketcast.fake_alpaca.server import STOCK, FakeAlpaca

from .wire_judge import account, body, cls_world, post

LATE = "cls orders must be submitted after 7:00pm and before 3:50pm"
BAR = {"o": 100.0, "h": 104.0, "l": 99.0, "c": 103.0}


def moc(side: str = "sell", qty: float = 10, cid: str = "moc", **kw) -> dict:
    return body("ABC", side, qty, cid, type=kw.pop("type", "market"), time_in_force="cls", **kw)


def at(clock: str, **kw) -> Exchange:
    ex = account(**kw)
    ex.clock = clock
    ex.positions["ABC"] = Position(Decimal(10), Decimal(100))
    return ex


def reply(ex: Exchange, sent: dict) -> tuple[int, int | None, str | None]:
    r = post(ex, sent)
    return r.status, r.code, r.message


def test_a_cls_order_is_taken_until_350_pm_and_refused_after_it_until_7_pm():
    assert reply(at("2024-05-01T19:50:00Z"), moc()) == (200, None, None)  # 3:50:00 pm EDT: not after it
    assert reply(at("2024-05-01T19:50:01Z"), moc()) == (422, 42210000, LATE)
    assert reply(at("2024-05-01T20:30:00Z"), moc()) == (422, 42210000, LATE)  # 4:30 pm: after the close too
    assert reply(at("2024-05-01T22:59:59Z"), moc()) == (422, 42210000, LATE)  # 6:59:59 pm
    assert reply(at("2024-05-01T13:00:00Z"), moc()) == (200, None, None)  # 9:00 am: before the open, for today
    assert reply(at("2024-01-10T20:49:00Z"), moc()) == (200, None, None)  # EST: 3:49 pm is 20:49Z
    assert reply(at("2024-01-10T20:51:00Z"), moc()) == (422, 42210000, LATE)


def test_from_7_pm_a_cls_order_is_queued_for_the_next_sessions_close():
    for clock, auction in (("2024-05-01T23:00:00Z", "2024-05-02"),  # Wednesday 7:00 pm -> Thursday
                           ("2024-05-03T23:30:00Z", "2024-05-06"),  # Friday 7:30 pm -> Monday
                           ("2024-05-04T18:00:00Z", "2024-05-06"),  # a Saturday afternoon: no session to be late for
                           ("2024-07-04T19:55:00Z", "2024-07-05")):  # Independence Day: no session
        ex = at(clock)
        assert reply(ex, moc()) == (200, None, None), clock
        assert ex.orders[-1]["auction"] == auction, clock


def test_on_an_early_close_the_cutoff_is_ten_minutes_before_it():
    assert [t.strftime("%H:%M") for t in market.phases("2024-11-29")] == ["14:30", "17:50", "18:00"]
    assert reply(at("2024-11-29T17:45:00Z"), moc()) == (200, None, None)  # 12:45 pm EST
    assert reply(at("2024-11-29T17:55:00Z"), moc()) == (
        422, 42210000, "cls orders must be submitted after 7:00pm and before 12:50pm")
    assert reply(at("2024-11-27T17:55:00Z"), moc()) == (200, None, None)  # 12:55 pm on a full day: in time


def test_crypto_and_advanced_orders_take_no_cls():
    ex = at("2024-05-01T15:00:00Z")
    crypto = body("BTC/USD", "buy", 1, "btc-cls", type="market", time_in_force="cls")
    assert reply(ex, crypto) == (422, 42210000, "invalid crypto time_in_force cls")
    oto = body("ABC", "buy", 10, "oto-cls", limit_price=100.0, take_profit=105.0, time_in_force="cls")
    assert reply(ex, oto) == (422, 42210000, "invalid time_in_force cls for order_class oto: day or gtc only")
    assert reply(ex, body("ABC", "buy", 10, "oto-day", limit_price=100.0, take_profit=105.0)) == (200, None, None)
    assert reply(ex, moc("sell", 2.5, "fractional")) == (422, 42210000, "fractional orders must be simple day orders")


def test_a_day_in_two_phases_enters_at_the_open_and_exits_at_the_close_by_market_on_close():
    ex = Exchange({"ABC": dict(STOCK)}, clock="2024-05-01T01:00:00Z")
    ex.last["ABC"] = Decimal(100)
    assert post(ex, body("ABC", "buy", 10, "entry", type="market")).accepted
    ex.session("2024-05-01", {"ABC": BAR}, phase="open")
    assert ex.clock == "2024-05-01T19:20:00Z"  # 3:20 pm EDT: half an hour before the cutoff
    assert ex.positions["ABC"].qty == 10 and Decimal(ex.orders[0]["filled_avg_price"]) == 100
    assert ex.orders[0]["filled_at"] == "2024-05-01T13:30:00Z"  # the open, 9:30 EDT
    assert post(ex, moc(cid="exit")).accepted
    ex.session("2024-05-01", {"ABC": BAR}, phase="close")
    exit_ = ex.orders[1]
    assert (exit_["status"], exit_["filled_qty"], Decimal(exit_["filled_avg_price"])) == ("filled", "10", 103)
    assert "ABC" not in ex.positions and ex.cash == Decimal(100_000) - 1_000 + 1_030
    assert ex.day_trades == ["2024-05-01"] and ex.daytrade_count() == 1  # a cls exit of a same-day entry


def test_a_limit_on_close_fills_only_at_or_better_than_its_limit_and_is_cancelled_otherwise():
    ex = Exchange({"ABC": dict(STOCK)}, clock="2024-05-01T14:00:00Z", positions={"ABC": Position(Decimal(20),
                                                                                                 Decimal(90))})
    ex.last["ABC"] = Decimal(100)
    assert post(ex, moc(qty=10, cid="loc-in", type="limit", limit_price=103.0)).accepted  # sell >= 103
    assert post(ex, moc(qty=10, cid="loc-out", type="limit", limit_price=103.01)).accepted
    ex.session("2024-05-01", {"ABC": BAR})  # whole: the market-on-close fills at the close, not at the open
    states = [(o["client_order_id"], o["status"], o["filled_avg_price"] and Decimal(o["filled_avg_price"]))
              for o in ex.orders]
    assert states == [("loc-in", "filled", 103), ("loc-out", "canceled", None)]


def test_a_queued_cls_order_waits_for_its_session_and_one_whose_close_had_no_bar_is_cancelled():
    ex = at("2024-05-01T23:00:00Z")
    assert post(ex, moc(cid="thursday")).accepted
    ex.session("2024-05-01", {"ABC": BAR})  # Wednesday's close played after the order: not its auction
    assert ex.orders[0]["status"] == "new" and ex.positions["ABC"].qty == 10
    ex.session("2024-05-02", {})  # Thursday, no bar for ABC (halted): unfilled after the close, cancelled
    assert ex.orders[0]["status"] == "canceled" and ex.positions["ABC"].qty == 10


def day_trade_day(ex: Exchange, day: str, n: int) -> tuple[int, int | None, str | None]:
    """A market entry filled at ``day``'s open, then a cls exit sent before the cutoff: the venue's answer."""
    assert post(ex, body("ABC", "buy", 10, f"in-{n}", type="market")).accepted
    ex.session(day, {"ABC": BAR}, phase="open")
    answer = reply(ex, moc(cid=f"out-{n}"))
    ex.session(day, {"ABC": BAR}, phase="close")
    return answer


def test_the_fourth_cls_day_trade_in_five_business_days_is_refused_under_25000():
    days = ["2024-05-06", "2024-05-07", "2024-05-08", "2024-05-09"]
    poor = Exchange({"ABC": dict(STOCK)}, cash=Decimal(20_000), clock="2024-05-06T01:00:00Z")
    poor.last["ABC"] = Decimal(100)
    answers = [day_trade_day(poor, d, n) for n, d in enumerate(days)]
    assert answers[:3] == [(200, None, None)] * 3
    assert answers[3] == (403, 40310100, "trade denied due to pattern day trading protection")
    assert poor.positions["ABC"].qty == 10  # the 4th entry is carried overnight
    rich = Exchange({"ABC": dict(STOCK)}, cash=Decimal(100_000), clock="2024-05-06T01:00:00Z")
    rich.last["ABC"] = Decimal(100)
    assert [day_trade_day(rich, d, n) for n, d in enumerate(days)] == [(200, None, None)] * 4


def test_the_running_server_plays_the_phases_over_http():
    with FakeAlpaca("k", "s", assets={"ABC": dict(STOCK)}) as fake:
        fake.exchange.clock = "2024-05-01T01:00:00Z"
        fake.bars = {"ABC": [{"t": "2024-05-01T04:00:00Z", **BAR, "v": 1e6}]}
        head = {"APCA-API-KEY-ID": "k", "APCA-API-SECRET-KEY": "s"}

        def send(path: str, payload: dict) -> requests.Response:
            return requests.post(f"{fake.url}{path}", data=json.dumps(payload), headers=head, timeout=10)

        assert send("/v2/orders", body("ABC", "buy", 10, "entry", type="market")).status_code == 200
        assert send("/_test/session", {"day": "2024-05-01", "phase": "open"}).json() == {
            "clock": "2024-05-01T19:20:00Z"}
        clock = requests.get(f"{fake.url}/v2/clock", headers=head, timeout=10).json()
        assert clock["is_open"] is True and clock["next_close"] == "2024-05-01T16:00:00-04:00"
        taken = send("/v2/orders", moc(cid="exit")).json()
        assert taken["time_in_force"] == "cls" and "auction" not in taken
        send("/_test/session", {"day": "2024-05-01", "phase": "close"})
        assert send("/v2/orders", moc(cid="late")).json() == {"code": 42210000, "message": LATE}
        got = requests.get(f"{fake.url}/v2/orders", params={"status": "closed"}, headers=head, timeout=10).json()
        assert {o["client_order_id"]: (o["status"], Decimal(o["filled_avg_price"])) for o in got} == {
            "entry": ("filled", 100), "exit": ("filled", 103)}


def test_a_planted_cutoff_changes_the_fakes_verdicts_on_the_generators_cls_orders(monkeypatch):
    """The differential generator's cls orders (:func:`tests.trade.wire_judge.cls_world`) reach both sides of
    the cutoff, on full and early-close days: a cutoff of 15 minutes (3:45 pm) turns some verdicts."""
    rng = random.Random(7)
    worlds = [cls_world(rng, i) for i in range(400)]
    plain = [post(ex, sent).accepted for ex, sent in worlds]
    for ex, sent in worlds:
        ex.orders = [o for o in ex.orders if o["client_order_id"] != sent["client_order_id"]]
    monkeypatch.setattr(market, "CLS_CUTOFF", market.pd.Timedelta(minutes=15))
    moved = [post(ex, sent).accepted for ex, sent in worlds]
    assert 20 < sum(plain) < 200
    assert sum(a != b for a, b in zip(plain, moved)) > 0


def test_a_cls_is_refused_when_the_cls_working_on_another_symbol_would_make_the_fourth_day_trade():
    """Two day trades made on Monday and Tuesday; on Wednesday ABC and XYZ are bought at the open. ABC's cls is
    the third potential day trade: taken. XYZ's would be the fourth while ABC's still works (user-protection:
    pending orders count, "If the order could potentially result in the account being flagged as a PDT, the
    order is rejected"): refused, also while ABC's cancel is pending (it may still fill), taken once the venue
    has confirmed the cancel."""
    ex = Exchange({"ABC": dict(STOCK), "XYZ": dict(STOCK)}, cash=Decimal(20_000), clock="2024-05-06T01:00:00Z")
    ex.last.update(ABC=Decimal(100), XYZ=Decimal(100))
    assert [day_trade_day(ex, d, n) for n, d in enumerate(["2024-05-06", "2024-05-07"])] == [(200, None, None)] * 2
    assert post(ex, body("ABC", "buy", 10, "in-abc", type="market")).accepted
    assert post(ex, body("XYZ", "buy", 10, "in-xyz", type="market")).accepted
    ex.session("2024-05-08", {"ABC": BAR, "XYZ": BAR}, phase="open")
    assert ex.daytrade_count() == 2
    assert reply(ex, moc(cid="out-abc")) == (200, None, None)
    xyz = iter(range(3))

    def xyz_cls():
        return reply(ex, body("XYZ", "sell", 10, f"out-xyz-{next(xyz)}", type="market", time_in_force="cls"))

    refused = (403, 40310100, "trade denied due to pattern day trading protection")
    assert xyz_cls() == refused
    abc = ex.orders[-1]
    ex.cancel(abc["id"])
    assert abc["status"] == "pending_cancel" and xyz_cls() == refused
    ex.poll(abc), ex.poll(abc)  # the venue confirms the cancel
    assert abc["status"] == "canceled" and xyz_cls() == (200, None, None)
    ex.session("2024-05-08", {"ABC": BAR, "XYZ": BAR}, phase="close")
    assert ex.day_trades == ["2024-05-06", "2024-05-07", "2024-05-08"] and ex.positions["ABC"].qty == 10
    assert "XYZ" not in ex.positions
