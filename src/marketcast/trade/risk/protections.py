"""Would this venue accept this order? One answer, shared by the paper broker, the fake Alpaca and the loop's
own pre-check (LEAN's brokerage model ``CanSubmitOrder``): :func:`refusals`.

:mod:`~marketcast.trade.risk.rules` judges the order's shape and what the position and buying power allow;
this module adds what the account's other orders and its history decide, each as Alpaca documents it:

* **Wash trades** (https://docs.alpaca.markets/docs/user-protection, "Preventing Wash Trades at Alpaca"): an
  order that "could potentially interact" with the account's own opposite-side order on the same symbol is
  refused with 403 ``{"code": 40310000, "message": "potential wash trade detected. use complex orders"}``
  (the code and message as users report them: forum.alpaca.markets/t/13817). The page's table
  ("Existing Order | New Order | Reject Condition"): against a market or stop order on either side "always
  rejected"; limit and stop_limit against limit and stop_limit "rejected if buy limit price >= sell limit
  price". "These complex orders [bracket, OCO] and trailing stop orders are exceptions": the legs of one
  complex order never wash against each other, a trailing stop never washes. It "does apply to crypto".
  Not documented, read conservatively: a ``held`` leg (an OTO/bracket take-profit waiting for its entry)
  and a ``pending_cancel`` order count as existing orders (both may still trade); the take-profit leg of a
  new OTO order is checked as well as its entry; a new complex order is not exempt from the account's other
  orders.
* **Pattern-day-trader protection** (user-protection, "Pattern Day Trader (PDT) Protection at Alpaca",
  "Alpaca's Order Rejection"): the platform "checks the PDT rule condition every time an order is submitted"
  and "if the order could potentially result in the account being flagged as a PDT, the order is rejected";
  it applies when "the previous day's closing account equity is less than $25,000"; the refusal is 403
  ``{"code": 40310100, "message": "trade denied due to pattern day trading protection"}``. A day trade is a
  position opened and closed the same day; "In addition to the filled orders, the system also takes into
  consideration pending orders in the account. In this case, regardless of the order of pending orders, a pair
  of buy and sell orders is counted as a potential day trade. This is because orders that are active (pending)
  in the marketplace may fill in random orders." So a new order is a potential day trade when it would close a
  position opened today, carries a take-profit leg (an OTO entry: a pair by itself), or meets a working
  opposite order on its symbol (a working OTO entry's held leg is one). Read conservatively, "could
  potentially result" counts the potential day trades already pending on the account's *other* symbols too
  (:func:`pending_day_trades`: a working order that would close a position opened today, or a pending pair):
  each may fill before the close, so the new one is refused once the day trades made in 5 business days and
  those pending reach 3 (Alpaca staff and users on forum.alpaca.markets/t/12560: orders that close same-day
  positions, and unfilled bracket orders, counted as day trades, the 4th order "denied"). An account flagged
  PDT under $25,000 is "restricted from placing any new day trades". Crypto is exempt ("crypto orders are not
  evaluated by PDT protection logic"). Alpaca removed ``daytrade_count`` and ``pattern_day_trader`` from the
  account on 2026-07-06 (changelog 2026-06-03 "Pattern day trading and DTBP fields ... are deprecated"; FINRA's
  revised Rule 4210): an account that does not report them is not evaluated.
* **Market on close** (orders-at-alpaca, "Time in Force", ``cls``): "CLS orders submitted after 3:50pm but
  before 7:00pm ET will be rejected" (the window, early closes included, is
  :func:`~marketcast.trade.risk.freshness.cls_rejected_at`'s); judged by the broker's clock (``Standing.now``;
  a broker without one, the paper venue, judges a ``cls`` by its own bar). Crypto takes no ``cls`` and a
  bracket or OTO order takes ``day`` or ``gtc`` only (same page): :func:`~marketcast.trade.risk.rules.violations`.
* **OTO/bracket take-profit price** (orders-at-alpaca, "Threshold on stop price of stop-loss orders": the
  base price "is the limit price of the entry order, for bracket or OTO orders if the entry type is limit",
  else "the current market price"; the take-profit side as Alpaca's staff state it, forum.alpaca.markets/t/
  13049: base is the entry's limit, or the ask for a market buy and the bid for a market sell): a buy's
  ``take_profit.limit_price`` must be at least base + $0.01, a sell's at most base - $0.01, else 422
  ``{"code": 42210000, "message": "take_profit.limit_price must be >= base_price + 0.01"}`` (``<= base_price -
  0.01`` for a sell). Crypto has no OTO orders (crypto-orders), so it is not evaluated there.
* **Margin for shorts** (https://docs.alpaca.markets/docs/margin-and-short-selling): "In order to trade on
  margin or sell short, you must have $2,000 or more account equity"; the refusal's wording is ours. (Below
  it the account is "restricted to 1x buying power": the broker's ``buying_power`` says so already.)
* **The account's flags** (``GET /v2/account``, alpaca-py ``TradeAccount``): ``account_blocked``,
  ``trading_blocked`` and ``trade_suspended_by_user`` refuse every order, ``shorting_enabled`` false every
  opening short, a ``crypto_status`` other than ``ACTIVE`` every crypto order
  (:meth:`~marketcast.trade.types.Account.restrictions`); Alpaca documents no wording, the reasons are ours.
* **GTC lifetime**: Alpaca's pages give none; a ``gtc`` order the broker still reports as working is counted
  as working whatever its age (it may still trade until the broker says otherwise; the fake Alpaca ends them
  after 90 days, and the loop reads the status the broker reports).
* **Limit price far from the quote**: Alpaca's pages document no band for limit prices (only the collar on
  crypto market orders, :func:`~marketcast.trade.risk.rules.opening_value`), so none is refused for its
  distance; it is valued at its limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

from marketcast.trade.risk.freshness import cls_rejected_at
from marketcast.trade.risk.rules import account_violations, opening_value, opposite, violations

from marketcast.trade.types import Asset, dec
from marketcast.trade.types import BUY, CLS, LIMIT, SELL, Account, Order, OrderRequest, status_kind

PDT_EQUITY = 25_000.0  # the protection applies below this previous-close equity
PDT_LIMIT = 3  # day trades already made in 5 business days: one more would flag the account
SHORT_EQUITY = 2_000.0  # margin and short selling need at least this equity
LIMITED = ("limit", "stop_limit")  # carry a limit price: interact with another limited order only if they cross
EXEMPT = ("trailing_stop",)


@dataclass(frozen=True)
class Refusal:
    """One reason the venue refuses an order, with the HTTP status and code Alpaca answers it with."""

    rule: str  # account_flags | shape | cls_cutoff | take_profit_price | account | short_equity | wash_trade |
    #            pattern_day_trader
    status: int
    code: int
    message: str

    def __str__(self) -> str:
        return self.message


WASH_MESSAGE = "potential wash trade detected. use complex orders"
PDT_MESSAGE = "trade denied due to pattern day trading protection"


@dataclass(frozen=True)
class Standing:
    """The account as one order meets it: the account's figures, the symbol's position (signed) and what of it
    is free, every working or held order of the account (any symbol), the quote (``ask`` values buys and
    shorts; ``bid`` is a market sell's base price), whether the position was opened today, what earlier
    orders of the same pass will draw from buying power that the account does not show yet, the positions of
    any symbol opened today (key -> signed quantity; read where PDT protection applies), the broker's clock
    (``now``, ISO; None: the broker keeps none) and which of the orders' symbols are crypto."""

    account: Account
    ask: float  # what a market buy fills at and a short is valued from: never guessed
    position_qty: float = 0.0
    available_qty: float = 0.0
    orders: Sequence[Order] = ()
    bid: float | None = None
    opened_today: bool = False
    spent: float = 0.0
    today: Mapping[str, float] = field(default_factory=dict)
    now: str | None = None
    crypto: frozenset[str] = frozenset()  # keys of the crypto symbols among ``orders``: PDT protection skips them


def key(symbol: str) -> str:
    return symbol.replace("/", "").upper()


# ------------------------------------------------------------------ wash trades
def _legs(side: str, type_: str, limit: float | None, take_profit: float | None) -> Iterator[tuple]:
    yield side, type_, limit
    if take_profit is not None:  # the take-profit leg: a limit on the other side
        yield opposite(side), LIMIT, take_profit


def interact(a: tuple, b: tuple) -> bool:
    """Whether two (side, type, limit) orders could fill against each other, by Alpaca's table."""
    (a_side, a_type, a_limit), (b_side, b_type, b_limit) = a, b
    if a_side == b_side or a_type in EXEMPT or b_type in EXEMPT:
        return False
    if a_type in LIMITED and b_type in LIMITED and a_limit is not None and b_limit is not None:
        buy, sell = (a_limit, b_limit) if a_side == BUY else (b_limit, a_limit)
        return dec(buy) >= dec(sell)
    return True  # a market or stop order on either side: always


def washes(request: OrderRequest, order: Order) -> bool:
    """Whether ``request`` could interact with the account's ``order`` (a leg of the same complex order never
    does; a terminal order no longer can)."""
    if key(order.symbol) != key(request.symbol) or status_kind(order.status) == "terminal":
        return False
    if order.root_client_order_id == request.client_order_id:
        return False
    mine = list(_legs(request.side, request.type, request.limit_price, request.take_profit))
    theirs = list(_legs(order.side, order.type, order.limit_price, order.take_profit))
    return any(interact(a, b) for a in mine for b in theirs)


def wash_trades(request: OrderRequest, orders: Iterable[Order]) -> list[Order]:
    """The account's orders ``request`` could fill against: any one makes Alpaca refuse it."""
    return [o for o in orders if washes(request, o)]


# ------------------------------------------------------------------ pattern day trader
def closes(request: OrderRequest, position_qty: float) -> bool:
    """Whether ``request`` reduces the position (a sell of a long, a buy of a short)."""
    return (request.side == SELL and position_qty > 0) or (request.side == BUY and position_qty < 0)


def pending_day_trades(orders: Iterable[Order], today: Mapping[str, float], crypto: frozenset[str]) -> set[str]:
    """The stock symbols (keys) on which the account's working orders hold a potential day trade: one would
    close a position opened today (``today``: key -> signed quantity), or they pair a buy and a sell (an OTO
    order with its take-profit leg is a pair by itself). Each counts once (FINRA's examples: a symbol's buys
    then sells in a day are one day trade); ``crypto`` symbols are not evaluated."""
    sides: dict[str, set[str]] = {}
    for o in orders:
        if status_kind(o.status) != "terminal" and key(o.symbol) not in crypto:
            sides.setdefault(key(o.symbol), set()).update((o.side, opposite(o.side)) if o.take_profit is not None
                                                           else (o.side,))
    closing = {k: SELL if qty > 0 else BUY for k, qty in today.items() if qty}
    return {k for k, s in sides.items() if len(s) == 2 or closing.get(k) in s}


def day_trades_apply(account: Account) -> bool:
    """Whether PDT protection evaluates the account's orders: it reports ``daytrade_count`` and its previous
    close's equity (its equity without one) is under $25,000."""
    if account.daytrade_count is None:
        return False
    return (account.last_equity if account.last_equity is not None else account.equity) < PDT_EQUITY


def day_trade(request: OrderRequest, asset: Asset, standing: Standing) -> Refusal | None:
    """Alpaca's PDT protection: under $25,000 of previous-close equity, an order that could complete a day
    trade is refused once the day trades made in 5 business days and those pending on the account's other
    symbols (:func:`pending_day_trades`) reach 3, or the account is flagged PDT (module docstring)."""
    account = standing.account
    if asset.crypto or not day_trades_apply(account):
        return None
    pair = ((standing.opened_today and closes(request, standing.position_qty)) or request.take_profit is not None
            or any(key(o.symbol) == key(request.symbol) and status_kind(o.status) != "terminal"
                   and (o.side == opposite(request.side) or o.take_profit is not None) for o in standing.orders))
    if not pair:
        return None
    others = pending_day_trades(standing.orders, standing.today, standing.crypto) - {key(request.symbol)}
    if account.daytrade_count + len(others) >= PDT_LIMIT or account.pattern_day_trader:
        return Refusal("pattern_day_trader", 403, 40310100, PDT_MESSAGE)
    return None


def on_close(request: OrderRequest, now: str | None) -> Refusal | None:
    """A ``cls`` order sent at the broker's ``now`` after the session's cutoff and before 7:00 pm New York
    time (module docstring); None without a clock."""
    if request.time_in_force != CLS or now is None:
        return None
    cutoff = cls_rejected_at(now)
    if cutoff is None:
        return None
    at = cutoff.tz_convert("America/New_York").strftime("%I:%M %p").lstrip("0").lower()
    return Refusal("cls_cutoff", 422, 42210000, f"cls orders are rejected from {at} until 7:00 pm ET (sent at "
                                                f"{now})")


# ------------------------------------------------------------------ OTO take-profit
def take_profit_price(request: OrderRequest, asset: Asset, ask: float, bid: float | None) -> Refusal | None:
    """An OTO entry's take-profit at least a cent beyond its base price (the entry's limit, or the quote's far
    side for a market entry)."""
    if request.take_profit is None or asset.crypto:
        return None
    if request.limit_price is not None:
        base = request.limit_price
    else:
        base = ask if request.side == BUY else (bid if bid is not None else ask)
    cent = dec(0.01)
    if request.side == BUY and dec(request.take_profit) < dec(base) + cent:
        return Refusal("take_profit_price", 422, 42210000, "take_profit.limit_price must be >= base_price + 0.01")
    if request.side == SELL and dec(request.take_profit) > dec(base) - cent:
        return Refusal("take_profit_price", 422, 42210000, "take_profit.limit_price must be <= base_price - 0.01")
    return None


# ------------------------------------------------------------------ the account's flags
def flag_refusals(request: OrderRequest, asset: Asset, account: Account, position_qty: float) -> list[Refusal]:
    """What the account's flags forbid of ``request``: everything (blocked), an opening short, crypto."""
    barred = account.restrictions()
    out = [barred["all"]] if "all" in barred else []
    if "crypto" in barred and asset.crypto:
        out.append(barred["crypto"])
    if "short" in barred and request.side == SELL and position_qty <= 0:
        out.append(barred["short"])
    return [Refusal("account_flags", 403, 40310000, r) for r in out]


# ------------------------------------------------------------------ the one answer
def refusals(request: OrderRequest, asset: Asset, standing: Standing) -> list[Refusal]:
    """Every reason the venue would refuse ``request`` now (empty: it accepts it): the order's shape, a ``cls``
    order's cutoff, the take-profit's base price, what the account can carry (crypto on non-marginable buying
    power, shorts valued 3 % over the ask, crypto market buys at the collar), the $2,000 for shorts, wash trades
    and pattern-day-trader protection; first what the account's flags forbid."""
    out = flag_refusals(request, asset, standing.account, standing.position_qty)
    out += [Refusal("shape", 422, 42210000, r) for r in violations(request, asset)]
    late = on_close(request, standing.now)
    if late is not None:
        out.append(late)
    tp = take_profit_price(request, asset, standing.ask, standing.bid)
    if tp is not None:
        out.append(tp)
    account = standing.account
    power = account.buying_power_for(asset.crypto) - standing.spent
    out += [Refusal("account", 403, 40310000, r) for r in account_violations(
        request, asset, standing.position_qty, standing.available_qty, power, standing.ask)]
    if request.side == SELL and standing.position_qty <= 0 and not asset.crypto and account.equity < SHORT_EQUITY:
        out.append(Refusal("short_equity", 403, 40310000, f"account equity {account.equity:,.2f} is below the "
                                                          f"$2,000 margin and short selling need"))
    if wash_trades(request, standing.orders):
        out.append(Refusal("wash_trade", 403, 40310000, WASH_MESSAGE))
    pdt = day_trade(request, asset, standing)
    if pdt is not None:
        out.append(pdt)
    return out


def opening_draw(request: OrderRequest, position_qty: float, ask: float, crypto: bool = False) -> float:
    """What ``request`` takes from buying power (0 for an order that reduces the position)."""
    return 0.0 if closes(request, position_qty) else opening_value(request, ask, crypto)
