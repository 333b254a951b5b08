"""The Alpaca adapter and alpaca-py, for real, against a local fake of Alpaca's REST API: request shapes,
errors, retries, statuses, assets, pagination (the loop over it: test_alpaca_loop.py)."""

from __future__ import annotations

import time

import pytest

from marketcast.errors import AuthError
from marketcast.trade.test_kit.alpaca_env import KEY, adapter, order
from marketcast.trade.venues.alpaca import AlpacaBroker
from marketcast.trade.interface import BrokerError, BrokerUnavailable, DuplicateOrder, OrderRejected, submit_once
from marketcast.trade.venues.endpoints import Endpoint



def test_account_positions_quotes_bars_assets_and_order_lifecycle(fake):
    b = adapter(fake)
    account = b.account()
    assert (account.equity, account.cash, account.buying_power, account.id) == (
        100_000.0, 100_000.0, 200_000.0, fake.exchange.account_id)  # a 2x margin account, flat
    fake.hold("AAPL", -5, 180.0)
    assert [(p.symbol, p.qty, p.avg_entry_price) for p in b.positions()] == [("AAPL", -5.0, 180.0)]
    q = b.latest_quote("AAPL")
    assert (q.bid, q.ask, q.source) == (189.90, 190.10, "real") and q.spread == pytest.approx(190.10 / 189.90 - 1)
    fake.page_size = 7  # the server pages its bars: alpaca-py must follow next_page_token
    bars = b.latest_bars("AAPL", 50)
    assert len(bars) == 50 and bars[-1].close == fake.bars["AAPL"][-1]["c"]
    assert sum(1 for m, p, _ in fake.requests if p == "/v2/stocks/bars") > 50 / 7  # every page fetched
    btc = b.asset("BTCUSD")
    assert (btc.crypto, btc.min_order_size, btc.min_trade_increment, btc.price_increment, btc.fee_in_asset) == (
        True, 0.0001, 0.0001, 1.0, 0.0025)
    assert b.asset("BTCUSD") is btc and [p for _, p, _ in fake.requests].count("/v2/assets/BTCUSD") == 1  # cached
    del fake.exchange.positions["AAPL"]

    placed = b.submit(order())
    method, path, body = fake.requests[-1]
    assert (method, path) == ("POST", "/v2/orders")
    assert body == {"symbol": "AAPL", "qty": 10, "side": "buy", "type": "limit", "time_in_force": "day",
                    "order_class": "oto", "take_profit": {"limit_price": 192.25}, "limit_price": 188.5,
                    "client_order_id": "mc-000000000000000000000001"}
    assert (placed.status, placed.take_profit, placed.limit_price) == ("accepted", 192.25, 188.5)
    assert b.order_by_client_id(placed.client_order_id).id == placed.id
    assert b.order_by_client_id("mc-unknown") is None  # 404 -> None
    assert [o.id for o in b.open_orders()] == [placed.id]  # the held leg is not working yet
    assert b.account().buying_power == pytest.approx(200_000 - 10 * 188.5)  # an open order draws on it
    b.cancel(placed.id)
    assert b.order(placed.id).status == "pending_cancel"  # asynchronous: the venue confirms later
    assert b.open_orders()[0].status == "pending_cancel"  # still working (it could fill) ...
    assert b.order(placed.id).status == "canceled"  # ... until the confirmation arrives
    assert b.open_orders() == [] and [o.status for o in b.orders()] == ["canceled", "canceled"]  # the leg too


def test_the_fake_refuses_what_alpaca_refuses_with_alpacas_status_and_message(fake):
    b = adapter(fake)
    cases = [
        (order("mc-r1", limit_price=4599.86633772055), 422, "invalid limit_price 4599.86633772055. sub-penny"),
        (order("mc-r2", take_profit=192.255), 422, "invalid take_profit.limit_price 192.255. sub-penny"),
        (order("mc-r3", qty=1.5), 422, "fractional orders must be simple day orders"),
        (order("mc-r4", symbol="BTCUSD", qty=0.25, limit_price=59_000.0, take_profit=None), 422,
         "invalid crypto time_in_force day"),
        (order("mc-r5", symbol="BTCUSD", qty=0.00015, limit_price=59_000.0, take_profit=None, time_in_force="gtc"),
         422, "must be >= 0.0001 and a multiple of 0.0001"),
        (order("mc-r6", symbol="BTCUSD", qty=0.25, limit_price=59_000.5, take_profit=None, time_in_force="gtc"),
         422, "not a multiple of price_increment"),
        (order("mc-r7", symbol="BTCUSD", side="sell", qty=0.25, limit_price=61_000.0, take_profit=None,
               time_in_force="gtc"), 403, "cannot be sold short"),
        (order("mc-r8", qty=2000, limit_price=188.5, take_profit=None), 403, "insufficient buying power"),
    ]
    for request, status, message in cases:
        with pytest.raises(OrderRejected, match=rf"HTTP {status}.*{message}"):
            b.submit(request)
    assert [r[:2] for r in fake.rejections] == [(422, 42210000), (422, 42210000), (422, 42210000), (422, 42210000),
                                                (422, 40010001), (422, 42210000), (403, 40310000), (403, 40310000)]
    assert fake.orders == []


def test_a_sell_against_shares_held_by_another_order_is_refused_until_its_cancel_is_confirmed(fake):
    b = adapter(fake)
    fake.hold("AAPL", 100, 150.0)
    user = b.submit(order("user-gtc-sell", side="sell", qty=100, limit_price=250.0, take_profit=None,
                          time_in_force="gtc"))
    assert b.positions()[0].qty_available == 0.0
    with pytest.raises(OrderRejected, match=r"HTTP 403.*insufficient qty available for order \(requested: 10, "
                                            r"available: 0\)"):
        b.submit(order("mc-close", side="sell", qty=10, type="market", limit_price=None, take_profit=None))
    b.cancel(user.id)
    with pytest.raises(OrderRejected, match="insufficient qty available"):  # pending_cancel still holds them
        b.submit(order("mc-close-2", side="sell", qty=10, type="market", limit_price=None, take_profit=None))
    assert b.order(user.id).status == "pending_cancel" and b.order(user.id).status == "canceled"
    assert b.submit(order("mc-close-3", side="sell", qty=10, type="market", limit_price=None,
                          take_profit=None)).status == "accepted"


def test_every_documented_status_maps_and_an_undocumented_one_is_an_error(fake):
    from marketcast.trade.types import HELD_STATUSES, TERMINAL_STATUSES, WORKING_STATUSES

    documented = {"new", "partially_filled", "filled", "done_for_day", "canceled", "expired", "replaced",
                  "pending_cancel", "pending_replace", "accepted", "pending_new", "accepted_for_bidding", "stopped",
                  "rejected", "suspended", "calculated", "held"}  # orders-at-alpaca, "Order Lifecycle"
    assert set(WORKING_STATUSES) | set(TERMINAL_STATUSES) | set(HELD_STATUSES) == documented
    b = adapter(fake)
    placed = b.submit(order(take_profit=None))
    for status in documented:
        fake.order(placed.client_order_id)["status"] = status
        assert b.order(placed.id).status == status
    fake.order(placed.client_order_id)["status"] = "exploded"
    with pytest.raises(BrokerError, match="'exploded', which Alpaca does not document"):
        b.order(placed.id)


def test_401_is_an_auth_error(fake):
    bad = AlpacaBroker(KEY, "wrong-secret", endpoint=Endpoint(fake.url, "paper", custom=True), data_url=fake.url)
    with pytest.raises(AuthError, match="HTTP 401") as err:
        bad.account()
    assert err.value.exit_code == 4


@pytest.mark.parametrize("status, message", [(403, "insufficient buying power"), (422, "qty must be > 0")])
def test_rejected_order_raises_order_rejected_once(fake, status, message):
    fake.fail("POST", "/v2/orders", status=status, body={"code": 40310000, "message": message}, times=5)
    with pytest.raises(OrderRejected, match=message):
        adapter(fake).submit(order())
    assert fake.posts("mc-000000000000000000000001") == 1  # a rejection is not retried


def test_duplicate_client_order_id_counts_as_already_submitted(fake):
    b = adapter(fake)
    first = b.submit(order())
    with pytest.raises(DuplicateOrder):
        b.submit(order())  # the fake answers 422 "client_order_id must be unique", as Alpaca does
    again, new = submit_once(b, order())
    assert not new and again.id == first.id
    assert fake.posts(first.client_order_id) == 2 and len(fake.orders) == 1


def test_429_honours_retry_after_instead_of_alpaca_pys_fixed_3s(fake):
    fake.fail("GET", "/v2/account", status=429, body={"message": "too many requests"}, retry_after="1")
    started = time.perf_counter()
    assert adapter(fake).account().equity == 100_000.0
    elapsed = time.perf_counter() - started
    assert 0.9 <= elapsed < 2.5  # one Retry-After wait; alpaca-py alone would sleep 3 s per retry
    assert [p for m, p, _ in fake.requests] == ["/v2/account", "/v2/account"]


def test_429_waits_for_x_ratelimit_reset_when_it_is_later_than_retry_after(fake):
    reset = time.time() + 1.5  # Alpaca: epoch seconds when the window resets
    fake.fail("GET", "/v2/account", status=429, body={"message": "too many requests"}, retry_after="0",
              rate_limit_reset=f"{reset:.3f}")
    started = time.perf_counter()
    assert adapter(fake).account().equity == 100_000.0
    assert time.time() >= reset - 0.05 and time.perf_counter() - started < 10  # waited for the reset, not 0 s
    fake.fail("GET", "/v2/account", status=429, body={"message": "too many requests"},
              rate_limit_reset=f"{time.time() + 100:.0f}")
    started = time.perf_counter()
    assert adapter(fake, max_retry_wait_s=0.5).account().cash == 100_000.0  # a far reset is capped
    assert 0.45 <= time.perf_counter() - started < 10  # capped at 0.5 s, not the 100 s to the reset


def test_429_that_persists_gives_broker_unavailable_after_retries(fake):
    fake.fail("GET", "/v2/account", status=429, body={"message": "too many requests"}, retry_after="0", times=10)
    with pytest.raises(BrokerUnavailable, match="HTTP 429 after 2 retries"):
        adapter(fake).account()
    assert len(fake.requests) == 3


def test_5xx_retries_reads_but_never_blindly_reposts_an_order(fake):
    fake.fail("GET", "/v2/positions", status=503, body={"message": "unavailable"}, times=2)
    assert adapter(fake).positions() == []
    assert len(fake.requests) == 3
    fake.fail("POST", "/v2/orders", status=502, body={"message": "bad gateway"}, times=5)
    with pytest.raises(BrokerUnavailable, match="HTTP 502"):
        adapter(fake).submit(order())
    assert fake.posts("mc-000000000000000000000001") == 1


def test_timeout_is_enforced_and_a_lost_submit_reply_is_reconciled_not_resent(fake):
    """1 s, not less: the retry must beat it on a loaded machine; the server stalls 3 s, so a wait for its reply
    would show."""
    fake.fail("GET", "/v2/account", sleep_s=3.0)
    started = time.perf_counter()
    assert adapter(fake, timeout_s=1.0).account().cash == 100_000.0  # first try times out, the retry works
    assert time.perf_counter() - started < 2.9
    fake.fail("POST", "/v2/orders", after_processing=True, sleep_s=3.0)
    b = adapter(fake, timeout_s=1.0)
    with pytest.raises(BrokerUnavailable, match="timed out"):
        b.submit(order())  # the server took the order but the reply never came
    found, new = submit_once(b, order())  # what reconcile does: ask by client_order_id first
    assert not new and found.client_order_id == "mc-000000000000000000000001"
    assert fake.posts("mc-000000000000000000000001") == 1 and len(fake.orders) == 1




def test_the_fake_lists_orders_with_alpacas_filters(fake):
    from datetime import datetime, timezone

    from alpaca.trading.enums import OrderSide, QueryOrderStatus
    from alpaca.trading.requests import GetOrdersRequest

    b = adapter(fake)
    for n, at in enumerate(["2024-05-01T14:00:00Z", "2024-05-01T15:00:00Z", "2024-05-01T16:00:00Z"]):
        fake.exchange.clock = at
        b.submit(order(f"mc-list-{n}", qty=1 + n, take_profit=None, side="buy"))
    fake.fill("mc-list-0", 1, 188.5, at="2024-05-01T17:00:00Z")

    def listed(**kw) -> list[str]:
        return [o["client_order_id"] for o in b.trading.get_orders(GetOrdersRequest(**kw))]

    assert listed() == ["mc-list-2", "mc-list-1"]  # default: open, newest first
    assert listed(status=QueryOrderStatus.CLOSED) == ["mc-list-0"]
    assert listed(status=QueryOrderStatus.ALL, direction="asc") == ["mc-list-0", "mc-list-1", "mc-list-2"]
    t = lambda h: datetime(2024, 5, 1, h, tzinfo=timezone.utc)  # noqa: E731
    assert listed(status=QueryOrderStatus.ALL, after=t(14), until=t(16)) == ["mc-list-1"]  # both exclusive
    assert listed(status=QueryOrderStatus.ALL, limit=1) == ["mc-list-2"]
    assert listed(status=QueryOrderStatus.ALL, side=OrderSide.SELL, symbols=["AAPL"]) == []
    with pytest.raises(Exception, match="between 1 and 500"):
        listed(limit=501)


def test_the_fake_plays_a_session_cash_average_price_and_day_expiry(fake):
    b = adapter(fake)
    fake.bars["AAPL"].append({"t": "2024-05-02T04:00:00Z", "o": 190.0, "h": 194.0, "l": 187.0, "c": 193.0, "v": 1e6})
    fake.hold("AAPL", 10, 180.0)
    b.submit(order("mc-day", qty=10, limit_price=188.0, take_profit=193.5))  # fills at 188; its leg: close < 193.5
    b.submit(order("mc-miss", qty=5, limit_price=150.0, take_profit=None))  # never reached: expires at the close
    b.submit(order("mc-gtc", qty=5, limit_price=150.0, take_profit=None, time_in_force="gtc"))
    fake.session("2024-05-02")
    assert [fake.order(c)["status"] for c in ("mc-day", "mc-miss", "mc-gtc")] == ["filled", "expired", "new"]
    assert fake.order("mc-day")["legs"][0]["status"] == "expired"  # the day leg ends with the session
    [p] = b.positions()
    assert (p.qty, p.avg_entry_price) == (20.0, 184.0)  # (10 * 180 + 10 * 188) / 20
    assert b.account().cash == 100_000 - 10 * 188.0
    assert fake.exchange.clock == "2024-05-02T21:00:00Z"
    # a limit, not a market sell: mc-gtc's buy at 150 is still working, and a market sell against it would be a
    # potential wash trade (refused); a sell limit at 195 cannot cross a buy at 150
    b.submit(order("mc-sell", side="sell", qty=5, limit_price=195.0, take_profit=None))
    fake.bars["AAPL"].append({"t": "2024-05-03T04:00:00Z", "o": 195.0, "h": 196.0, "l": 194.0, "c": 195.5, "v": 1e6})
    fake.session("2024-05-03")
    [p] = b.positions()
    assert (p.qty, p.avg_entry_price) == (15.0, 184.0) and b.account().cash == 100_000 - 1880.0 + 5 * 195.0
