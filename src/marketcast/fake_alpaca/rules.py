"""What the fake Alpaca refuses, read from Alpaca's pages alone (the loop's rules model in
``marketcast.trade.risk`` is never consulted: the differential test, ``tests/trade/test_fake_differential.py``,
compares the two). Every function takes the order's JSON body as ``POST /v2/orders`` receives it and the
account's facts as plain values, and raises :class:`Refused` with an HTTP status, Alpaca's error code and a
message; where a page gives the wording it is Alpaca's, else it says so.

The pages, and what each gives:

* **Orders** (https://docs.alpaca.markets/docs/orders-at-alpaca):
  - "Sub-penny increments for limit orders": a limit price of $1.00 or more takes at most 2 decimals, below
    $1.00 at most 4; else 422 ``{"code": 42210000, "message": "invalid limit_price 290.123. sub-penny increment
    does not fulfill minimum pricing criteria"}``. The page shows ``limit_price``; a take-profit leg's price is
    held to the same grid (``take_profit.limit_price`` as users report the message).
  - "Buying Power": an opening buy is valued at its limit price times quantity (a market buy at the far side
    of the NBBO, the ask, in the core session); an opening short at "MAX(order's limit price, 3% above the
    current ask price) * order quantity", a market short at "(3% above the current ask price) * order
    quantity"; "available buying power is reduced by your existing open buy long and sell short orders";
    "sell long and buy to cover orders do not replenish" it until they execute.
  - "Threshold on stop price of stop-loss orders" and Alpaca staff on forum.alpaca.markets/t/13049: an
    OTO/bracket's base price is the entry's limit (else the ask for a buy, the bid for a sell), and its
    ``take_profit.limit_price`` must be at least a cent beyond it (the messages are the ones users report).
  - "Time in Force": ``day`` orders not filled end at the close (played in :meth:`Exchange.session`).
    The page does not give a lifetime for ``gtc``; see :data:`GTC_DAYS`.
  - "Time in Force", ``cls``: "Use this TIF with a market/limit order type to submit "market on close" (MOC)
    and "limit on close" (LOC) orders. This order is eligible to execute only in the market closing auction.
    Any unfilled orders after the close will be cancelled. CLS orders submitted after 3:50pm but before 7:00pm
    ET will be rejected. CLS orders submitted after 7:00pm will be queued and routed to the following day's
    closing auction" (the timing, early closes included: :func:`marketcast.fake_alpaca.market.closing_auction`).
    Crypto: "Alpaca supports the following Time-In-Force designations: gtc, and ioc. OPG, fok, day, and CLS are
    not supported" (same section). Bracket orders: "time_in_force must be "day" or "gtc"", and OTO orders: "the
    rest of requirements are the same as the bracket orders" (same page, "Bracket Orders", "OTO Orders"). The
    refusal's wording: Alpaca answers an ``opg`` order out of its window with "opg orders must be submitted after
    7:00pm and before 9:28am" (as users report it, QuantConnect/Lean#8374); the fake answers a late ``cls`` order
    the same way with its own window (:func:`on_close`), a 422 ``42210000`` like the other order refusals.
* **Crypto orders and trading** (https://docs.alpaca.markets/docs/crypto-orders,
  https://docs.alpaca.markets/docs/crypto-trading): ``time_in_force`` ``gtc`` or ``ioc``; no multi-leg
  (OTO/bracket) orders; quantities and prices on the asset's ``min_order_size``, ``min_trade_increment``,
  ``price_increment``; crypto cannot be sold short; "Cryptocurrencies are non-marginable ... orders are
  evaluated against non_marginable_buying_power".
* **The crypto market-order collar** (Alpaca support, "Why do I see a discrepancy between the notional value
  requested and the order value ultimately filled?",
  https://alpaca.markets/support/why-do-i-see-a-discrepancy-between-the-notional-value-requested-and-the-order-value-ultimately-filled):
  "Alpaca implements an automatic 2% price collar on all crypto market orders, converting them into limit
  orders ... based on the last available ask price (for buys) ... plus ... the 2% collar" ("a market buy order
  placed at a 9.90 bid x 10.00 ask will have limit of 10.20"). A market buy is therefore valued at the
  collared limit, ask x 1.02, against ``non_marginable_buying_power``. (An earlier text of the same page said
  "most market orders ... a 5% price collar", without naming crypto: :data:`COLLAR` is the current figure.)
* **Margin and short selling** (https://docs.alpaca.markets/docs/margin-and-short-selling): "In order to trade
  on margin or sell short, you must have $2,000 or more account equity. Accounts with less than $2,000 will
  not have access to these features and will be restricted to 1x buying power"; crypto is not marginable.
  The refusal's wording is the fake's (the page gives none).
* **User protection** (https://docs.alpaca.markets/docs/user-protection):
  - "Preventing Wash Trades at Alpaca": a new order that could fill against the account's own opposite-side
    order on the symbol is 403 ``{"code": 40310000, "message": "potential wash trade detected. use complex
    orders"}``; the table: against a market or stop order "always rejected", limit/stop_limit against
    limit/stop_limit "rejected if buy limit price >= sell limit price"; the legs of one complex order and
    trailing stops are exempt; "it does apply to crypto". Not on the page, read conservatively here: an
    order still ``held`` (a take-profit leg waiting for its entry) or ``pending_cancel`` may still trade, so it
    counts, and a new OTO order's take-profit leg is checked as well as its entry.
  - "Pattern Day Trader (PDT) Protection at Alpaca": when "the previous day's closing account equity is less
    than $25,000", an order that could be a 4th day trade in 5 business days is 403 ``{"code": 40310100,
    "message": "trade denied due to pattern day trading protection"}``; "a pair of buy and sell orders is
    counted as a potential day trade" regardless of their order; "If the order could potentially result in the
    account being flagged as a PDT, the order is rejected", so the fake adds the potential day trades pending on
    the account's other symbols (a working order closing a position opened today, or a working buy and sell;
    users report unfilled bracket orders counted so, forum.alpaca.markets/t/12560) to those made; an account
    flagged PDT under $25,000 may not day trade at all; crypto is not evaluated. An account that does not
    report ``daytrade_count`` (Alpaca deprecated the PDT fields in 2026) is not evaluated.
* **The account's flags** (``GET /v2/account``; the account entity as alpaca-py's ``TradeAccount`` documents
  it, ``alpaca/trading/models.py``): ``account_blocked`` ("the account activity by user is prohibited"),
  ``trading_blocked`` and ``trade_suspended_by_user`` ("the account is not allowed to place orders"),
  ``shorting_enabled`` ("whether or not the account is permitted to short"), ``crypto_status`` ("The status of
  the account in regards to trading crypto", an account status: ``ACTIVE`` trades, ``INACTIVE``,
  ``SUBMITTED``, ... do not). The pages give no refusal wording: the messages are the fake's.
* **Limit price far from the market**: Alpaca's pages are silent on a band for limit prices (the one band they
  document is the market-order collar above). The fake refuses no limit for its distance from the quote, and
  values it at its limit, as "Buying Power" says.
* **GTC lifetime**: Alpaca's pages are silent on an automatic cancel of ``gtc`` orders; the issue this fake was
  rewritten for names 90 days, the common US broker practice (e.g. moomoo: "After 90 days, any unfilled GTC
  orders will be cancelled"). The fake expires a ``gtc`` order :data:`GTC_DAYS` days after its submission.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable

CENT, SUB_PENNY, ONE = Decimal("0.01"), Decimal("0.0001"), Decimal(1)
COLLAR = Decimal("0.02")  # crypto market orders become limits at ask x (1 + COLLAR)
SHORT_MARKUP = Decimal("0.03")  # a short is valued at least 3 % above the ask
MARGIN_FLOOR = Decimal(2_000)  # margin and shorting need this much equity
PDT_EQUITY = Decimal(25_000)  # PDT protection applies below this previous-close equity
PDT_TRADES = 3  # day trades in 5 business days after which one more is refused
GTC_DAYS = 90
MAX_CLIENT_ID = 48
WORKS = ("limit", "stop_limit")  # carry a limit price: cross only if buy >= sell
WASH = "potential wash trade detected. use complex orders"
PDT = "trade denied due to pattern day trading protection"


class Refused(Exception):
    """Alpaca's answer to an order it will not take: HTTP status, error code, message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def D(x) -> Decimal:  # noqa: N802 - the fake's one way to read a number
    return Decimal(str(x))


def on_grid(value: Decimal, step: Decimal) -> bool:
    return (value / step) % 1 == 0


@dataclass(frozen=True)
class Flags:
    """The account entity's trading flags."""

    account_blocked: bool = False
    trading_blocked: bool = False
    trade_suspended_by_user: bool = False
    shorting_enabled: bool = True
    crypto_status: str = "ACTIVE"


@dataclass(frozen=True)
class Working:
    """One of the account's orders or legs not yet terminal, as the wash-trade table reads it: ``group`` is the
    complex order it belongs to (its legs never wash against each other)."""

    symbol: str
    side: str
    type: str
    limit: Decimal | None
    status: str
    group: str


# ------------------------------------------------------------------ flags
def flags(body: dict, crypto: bool, opens_short: bool, f: Flags) -> None:
    """The account entity's flags: a blocked account places nothing, shorts need ``shorting_enabled``, crypto
    needs ``crypto_status`` ACTIVE."""
    if f.account_blocked:
        raise Refused(403, 40310000, "account is blocked: account_blocked is true")
    if f.trading_blocked or f.trade_suspended_by_user:
        which = "trading_blocked" if f.trading_blocked else "trade_suspended_by_user"
        raise Refused(403, 40310000, f"account is not allowed to place orders: {which} is true")
    if crypto and f.crypto_status != "ACTIVE":
        raise Refused(403, 40310000, f"crypto trading is not active on this account (crypto_status "
                                     f"{f.crypto_status})")
    if opens_short and not f.shorting_enabled:
        raise Refused(403, 40310000, "short selling is not enabled on this account: shorting_enabled is false")


# ------------------------------------------------------------------ the order's shape
def prices(body: dict, asset: dict) -> None:
    """Every price of the order on its grid: pennies from $1.00, 1/100 of a cent below (stocks); the asset's
    ``price_increment`` (crypto)."""
    named = [("limit_price", body.get("limit_price"))]
    if body.get("take_profit"):
        named.append(("take_profit.limit_price", body["take_profit"].get("limit_price")))
    for name, text in named:
        if text is None:
            continue
        p = D(text)
        if p <= 0:
            raise Refused(422, 40010001, f"{name} must be > 0")
        if asset["class"] == "crypto":
            step = D(asset["price_increment"])
            if not on_grid(p, step):
                raise Refused(422, 42210000, f"invalid {name} {text}: not a multiple of price_increment {step}")
        elif not on_grid(p, CENT if p >= ONE else SUB_PENNY):
            raise Refused(422, 42210000, f"invalid {name} {text}. sub-penny increment does not fulfill minimum "
                                         f"pricing criteria")


def shape(body: dict, asset: dict) -> None:
    """Type, time in force, order class and quantity as the asset allows them."""
    qty, tif, kind = D(body["qty"]), body["time_in_force"], body.get("order_class") or "simple"
    if body["type"] not in ("limit", "market"):
        raise Refused(422, 42210000, f"the fake takes limit and market orders only, not {body['type']}")
    if body["type"] == "limit" and body.get("limit_price") is None:
        raise Refused(422, 40010001, "limit_price is required for limit orders")
    if qty <= 0:
        raise Refused(422, 40010001, "qty must be > 0")
    if asset["class"] == "crypto":
        if tif not in ("gtc", "ioc"):
            raise Refused(422, 42210000, f"invalid crypto time_in_force {tif}")
        if kind != "simple":
            raise Refused(422, 42210000, f"crypto orders not allowed for advanced order_class: {kind}")
        if qty < D(asset["min_order_size"]) or not on_grid(qty, D(asset["min_trade_increment"])):
            raise Refused(422, 40010001, f"qty {body['qty']} must be >= {asset['min_order_size']} and a multiple "
                                         f"of {asset['min_trade_increment']}")
    elif kind != "simple" and tif not in ("day", "gtc"):
        raise Refused(422, 42210000, f"invalid time_in_force {tif} for order_class {kind}: day or gtc only")
    elif not on_grid(qty, ONE):
        if not asset["fractionable"]:
            raise Refused(422, 40010001, "requested asset is not fractionable")
        if kind != "simple" or tif != "day":
            raise Refused(422, 42210000, "fractional orders must be simple day orders")
        if not on_grid(qty, Decimal("0.000000001")):
            raise Refused(422, 40010001, "qty takes at most 9 decimals")


def on_close(auction: str | None, cutoff) -> None:
    """A ``cls`` order sent after the closing auction's cutoff and before 7:00 pm New York time is rejected
    (``auction`` None; ``cutoff`` the session's, 3:50 pm or 10 minutes before an early close)."""
    if auction is None:
        at = cutoff.tz_convert("America/New_York").strftime("%I:%M%p").lstrip("0").lower()
        raise Refused(422, 42210000, f"cls orders must be submitted after 7:00pm and before {at}")


def take_profit_base(body: dict, bid: Decimal, ask: Decimal) -> None:
    """An OTO take-profit at least a cent beyond its base: the entry's limit, else the ask (buy) or bid (sell)."""
    if not body.get("take_profit"):
        return
    tp = D(body["take_profit"]["limit_price"])
    limit = body.get("limit_price")
    if body["side"] == "buy":
        base = D(limit) if limit is not None else ask
        if tp < base + CENT:
            raise Refused(422, 42210000, "take_profit.limit_price must be >= base_price + 0.01")
    else:
        base = D(limit) if limit is not None else bid
        if tp > base - CENT:
            raise Refused(422, 42210000, "take_profit.limit_price must be <= base_price - 0.01")


# ------------------------------------------------------------------ what the account can carry
def value(side: str, type_: str, qty: Decimal, limit: Decimal | None, ask: Decimal, crypto: bool) -> Decimal:
    """An opening order's value against buying power: a buy at its limit (a market buy at the ask; crypto at
    the collared limit, ask x 1.02), a short at the greater of its limit and 3 % above the ask."""
    if side == "buy":
        if limit is not None:
            return qty * limit
        return qty * ask * (ONE + COLLAR) if crypto else qty * ask
    floor = ask * (ONE + SHORT_MARKUP)
    return qty * (floor if limit is None else max(limit, floor))


def carry(body: dict, asset: dict, held: Decimal, free: Decimal, equity: Decimal, power: Decimal,
          ask: Decimal) -> None:
    """What the position and buying power allow: no crypto short, a short only of a shortable, easy-to-borrow
    asset with $2,000 of equity, no sale beyond what a long position has free, an opening order within
    ``power`` (crypto: the non-marginable buying power)."""
    side, qty, crypto = body["side"], D(body["qty"]), asset["class"] == "crypto"
    if side == "sell" and held > 0 and qty > free:
        raise Refused(403, 40310000, f"insufficient qty available for order (requested: {qty.normalize():f}, "
                                     f"available: {free.normalize():f})")
    if side == "sell" and held <= 0:
        if crypto:
            raise Refused(403, 40310000, "crypto cannot be sold short")
        if not asset["shortable"] or not asset["easy_to_borrow"]:
            raise Refused(403, 40310000, f"asset {body['symbol']} cannot be sold short")
        if equity < MARGIN_FLOOR:
            raise Refused(403, 40310000, f"account equity {equity:.2f} is under the $2,000 that short selling needs")
    opening = (side == "buy" and held >= 0) or (side == "sell" and held <= 0)
    if opening:
        limit = None if body.get("limit_price") is None else D(body["limit_price"])
        need = value(side, body["type"], qty, limit, ask, crypto)
        if need > power:
            raise Refused(403, 40310000, f"insufficient buying power (required: {need:.2f}, available: "
                                         f"{power:.2f})")


# ------------------------------------------------------------------ the account's other orders
def legs(body: dict, group: str) -> list[Working]:
    """The new order as the wash table reads it: its entry, and its take-profit leg (the other side)."""
    out = [Working(body["symbol"], body["side"], body["type"], None if body.get("limit_price") is None
                   else D(body["limit_price"]), "new", group)]
    if body.get("take_profit"):
        out.append(Working(body["symbol"], "sell" if body["side"] == "buy" else "buy", "limit",
                           D(body["take_profit"]["limit_price"]), "held", group))
    return out


def crosses(a: Working, b: Working) -> bool:
    """The wash table: a market or stop on either side always; two limited orders when buy >= sell."""
    if a.side == b.side or a.group == b.group or "trailing_stop" in (a.type, b.type):
        return False
    if a.type in WORKS and b.type in WORKS:
        buy, sell = (a.limit, b.limit) if a.side == "buy" else (b.limit, a.limit)
        return buy >= sell
    return True


def wash(new: list[Working], existing: Iterable[Working], key) -> None:
    for theirs in existing:
        if any(key(mine.symbol) == key(theirs.symbol) and crosses(mine, theirs) for mine in new):
            raise Refused(403, 40310000, WASH)


def pending(working: Iterable[Working], opened_today: dict[str, Decimal], key) -> set[str]:
    """The symbols whose working orders are a potential day trade before any of them fills: a buy and a sell
    both working (a held take-profit leg and its entry among them: "regardless of the order of pending orders,
    a pair of buy and sell orders is counted as a potential day trade"), or an order that would close a
    position opened today (``opened_today``: symbol -> signed quantity; the opening fill and the working close
    are the pair)."""
    sides: dict[str, set[str]] = {}
    for w in working:
        sides.setdefault(key(w.symbol), set()).add(w.side)
    out = set()
    for sym, have in sides.items():
        qty = opened_today.get(sym, Decimal(0))
        if have == {"buy", "sell"} or (qty > 0 and "sell" in have) or (qty < 0 and "buy" in have):
            out.add(sym)
    return out


def day_trade(body: dict, crypto: bool, held: Decimal, opened_today: bool, opposite_working: bool,
              reported: bool, last_equity: Decimal, count: int, flagged: bool, elsewhere: int = 0) -> None:
    """PDT protection: under $25,000 of previous-close equity, a potential day trade is refused once the day
    trades made in 5 business days and the potential ones pending on other symbols (``elsewhere``,
    :func:`pending`) reach 3, or at once on an account flagged PDT. "If the order could potentially result in
    the account being flagged as a PDT, the order is rejected": any pending one may fill before the close."""
    if crypto or not reported or last_equity >= PDT_EQUITY:
        return
    closes_today = opened_today and ((body["side"] == "sell" and held > 0) or (body["side"] == "buy" and held < 0))
    potential = closes_today or bool(body.get("take_profit")) or opposite_working
    if potential and (count + elsewhere >= PDT_TRADES or flagged):
        raise Refused(403, 40310100, PDT)
