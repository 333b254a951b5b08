"""Plain data passed between the loop and any broker, so decision code never sees a broker's own types."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

BUY, SELL = "buy", "sell"
LIMIT, MARKET = "limit", "market"
# The times in force the loop sends (https://docs.alpaca.markets/docs/orders-at-alpaca, "Time in Force"): ``day``
# ends at the close, ``gtc`` works on, ``ioc`` fills at once or not at all, ``cls`` is a market-on-close order,
# "eligible to execute only in the market closing auction" (stocks only; its cutoff:
# marketcast.trade.risk.freshness.cls_cutoff).
DAY, GTC, IOC, CLS = "day", "gtc", "ioc", "cls"
TIMES_IN_FORCE = (DAY, GTC, IOC, CLS)
FINEST_QTY = Decimal("0.000000001")  # Alpaca takes qty with up to 9 decimals
PENNY, SUB_PENNY = Decimal("0.01"), Decimal("0.0001")

# Every order status Alpaca documents (https://docs.alpaca.markets/docs/orders-at-alpaca, "Order Lifecycle"),
# sorted by what the loop must do about it. An order that is still *working* may trade (pending_cancel
# included: the cancel is a request, not a fact), counts against the caps and blocks another entry;
# ``held`` is a bracket/OTO leg waiting for its parent; a *terminal* order never changes again.
WORKING_STATUSES = ("new", "accepted", "pending_new", "accepted_for_bidding", "partially_filled", "pending_cancel",
                    "pending_replace", "done_for_day", "stopped", "suspended", "calculated")
HELD_STATUSES = ("held",)
TERMINAL_STATUSES = ("filled", "canceled", "expired", "replaced", "rejected")
OPEN_STATUSES = WORKING_STATUSES  # kept for the paper broker's SQL


def status_kind(status: str) -> str:
    """``working`` | ``held`` | ``terminal``; a status nobody documented is an error, never a guess."""
    if status in WORKING_STATUSES:
        return "working"
    if status in HELD_STATUSES:
        return "held"
    if status in TERMINAL_STATUSES:
        return "terminal"
    raise ValueError(f"unknown order status {status!r}")


@dataclass(frozen=True)
class Account:
    """``buying_power`` is what marginable orders (stocks) may draw; ``non_marginable_buying_power`` what
    crypto may (Alpaca: crypto is not marginable and is bought with cash,
    https://docs.alpaca.markets/docs/crypto-trading, "Margin and Short Selling"); None where the broker does
    not tell them apart (then it is ``buying_power``)."""

    equity: float
    cash: float
    buying_power: float
    id: str = ""  # the broker's account id: the journal is bound to one account
    non_marginable_buying_power: float | None = None
    # Pattern-day-trader protection's inputs (alpaca-py ``TradeAccount``): equity at the previous close, day
    # trades in the last 5 business days, the PDT flag. None where the broker does not report them (Alpaca
    # removed them on 2026-07-06 with FINRA's intraday margin rule; then the protection is not evaluated).
    last_equity: float | None = None
    daytrade_count: int | None = None
    pattern_day_trader: bool | None = None
    # What the account may do at all (alpaca-py ``TradeAccount``: ``account_blocked`` "the account activity by
    # user is prohibited", ``trading_blocked`` / ``trade_suspended_by_user`` "not allowed to place orders",
    # ``shorting_enabled``, ``crypto_status``: the account's status for crypto, ACTIVE when it may trade it;
    # None where the broker does not report it).
    account_blocked: bool = False
    trading_blocked: bool = False
    trade_suspended_by_user: bool = False
    shorting_enabled: bool = True
    crypto_status: str | None = None

    def restrictions(self) -> dict[str, str]:
        """What the account's flags forbid now: ``all`` (no order at all), ``short`` (no opening short),
        ``crypto`` (no crypto order) -> why, in the flag's words."""
        out = {}
        for flag in ("account_blocked", "trading_blocked", "trade_suspended_by_user"):
            if getattr(self, flag):
                out.setdefault("all", f"the broker reports {flag}: the account may not place orders")
        if not self.shorting_enabled:
            out["short"] = "the broker reports shorting_enabled false: no short selling"
        if self.crypto_status is not None and self.crypto_status != "ACTIVE":
            out["crypto"] = f"the broker reports crypto_status {self.crypto_status}: no crypto orders"
        return out

    def buying_power_for(self, crypto: bool) -> float:
        """What an opening order of this kind may draw on."""
        if crypto and self.non_marginable_buying_power is not None:
            return self.non_marginable_buying_power
        return self.buying_power


@dataclass(frozen=True)
class Position:
    """``qty`` is signed: negative is short. ``qty_available`` is what open orders do not hold."""

    symbol: str
    qty: float
    avg_entry_price: float
    qty_available: float | None = None

    @property
    def market_value(self) -> float:
        return self.qty * self.avg_entry_price

    @property
    def available(self) -> float:
        """How much of the position orders may still close: a long's ``qty_available`` (never below 0: open
        sells beyond the position leave nothing free), a short's as a size."""
        if self.qty_available is None:
            return abs(self.qty)
        return max(0.0, self.qty_available) if self.qty > 0 else abs(self.qty_available)


@dataclass(frozen=True)
class OrderRequest:
    """One order as the loop wants it. ``take_profit`` attaches an exit at the opposite price (MaxDiff);
    the paper broker settles entry, take-profit and the close-out at the bar's close together, exactly
    as :func:`marketcast.backtest.fills.settle` does."""

    symbol: str
    side: str  # "buy" | "sell"
    qty: float
    client_order_id: str
    type: str = LIMIT  # "limit" | "market"
    limit_price: float | None = None
    take_profit: float | None = None
    time_in_force: str = DAY  # stocks: day | gtc | cls (market-on-close); crypto: gtc | ioc

    def __post_init__(self) -> None:
        if self.side not in (BUY, SELL):
            raise ValueError(f"side must be buy or sell, got {self.side!r}")
        if self.time_in_force not in TIMES_IN_FORCE:
            raise ValueError(f"time_in_force must be one of {', '.join(TIMES_IN_FORCE)}, got {self.time_in_force!r}")
        if self.type not in (LIMIT, MARKET):
            raise ValueError(f"type must be limit or market, got {self.type!r}")
        if self.type == LIMIT and self.limit_price is None:
            raise ValueError("a limit order needs limit_price")
        if not self.qty > 0:
            raise ValueError(f"qty must be > 0, got {self.qty}")


@dataclass(frozen=True)
class Order:
    """An order as the broker reports it. A take-profit leg has its own (broker-made) client id and names its
    parent's in ``parent_client_order_id``: ownership follows the parent."""

    id: str
    client_order_id: str
    symbol: str
    side: str
    qty: float
    type: str
    status: str
    limit_price: float | None = None
    take_profit: float | None = None
    filled_qty: float = 0.0
    filled_avg_price: float | None = None
    submitted_at: str | None = None
    time_in_force: str = "day"
    parent_client_order_id: str | None = None

    @property
    def is_open(self) -> bool:
        return status_kind(self.status) == "working"

    @property
    def is_terminal(self) -> bool:
        return status_kind(self.status) == "terminal"

    @property
    def root_client_order_id(self) -> str:
        return self.parent_client_order_id or self.client_order_id


@dataclass(frozen=True)
class Quote:
    """Best bid/ask; ``source`` is ``real`` (from the broker's feed) or ``synthetic`` (bid = ask = close)."""

    symbol: str
    bid: float
    ask: float
    timestamp: str | None = None
    source: str = "real"

    @property
    def mid(self) -> float:
        return (self.bid + self.ask) / 2.0

    @property
    def spread(self) -> float:
        """Relative spread ``ask / bid - 1`` (0 for a synthetic quote)."""
        return self.ask / self.bid - 1.0 if self.bid > 0 else 0.0


@dataclass(frozen=True)
class Fill:
    """One execution. ``fee`` is in account currency.

    A broker that reports fills only as order state (Alpaca's orders carry a cumulative filled quantity and
    an average price, not executions) sets ``cum_qty``: then ``qty`` = ``cum_qty`` and ``price`` is the
    average over it, ``order_id`` names the order or leg, and the journal records the increment since the
    last snapshot of that order, once per new ``cum_qty`` (``fill_id`` is ``order_id@cum_qty``).
    """

    fill_id: str
    client_order_id: str
    symbol: str
    side: str
    qty: float
    price: float
    fee: float
    timestamp: str
    kind: str = "entry"  # entry | take_profit | close
    order_id: str | None = None
    cum_qty: float | None = None


@dataclass(frozen=True)
class MarketClock:
    """A broker's clock: now, and the stock market's state (Alpaca ``GET /v2/clock``)."""

    now: str
    is_open: bool
    next_open: str | None = None
    next_close: str | None = None


@dataclass
class BarRow:
    """One OHLCV bar with its timestamp (ISO, UTC), as brokers return latest bars."""

    timestamp: str
    open: float
    high: float
    low: float
    close: float
    volume: float = 0.0
    extra: dict = field(default_factory=dict)


@lru_cache(maxsize=65_536)
def utc_time(ts: str):
    """An ISO time as a UTC ``pd.Timestamp`` (naive = UTC), to compare times as times: Alpaca writes
    ``2024-01-02T15:30:00.123456789Z`` (nanoseconds, ``Z``; some fields microseconds, or none), pandas and the
    journal ``...+00:00``, and as text ``...:00Z`` sorts after ``...:00.5Z`` (``Z`` > ``.``). Cached: the
    journal's times repeat every cycle."""
    import pandas as pd

    t = pd.Timestamp(ts)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def utc_text(ts: str) -> str:
    """``ts`` in one spelling (pandas' UTC ISO form, ``+00:00``), so two spellings of a time are one key."""
    return utc_time(ts).isoformat()


@dataclass(frozen=True)
class Asset:
    """What the broker says about one symbol (Alpaca's asset entity). ``fee_in_asset`` is the fraction of a
    bought quantity the broker may keep as its fee (Alpaca crypto); the paper broker charges fees in cash."""

    symbol: str
    asset_class: str = "stock"
    tradable: bool = True
    fractionable: bool = False
    shortable: bool = True
    easy_to_borrow: bool = True
    min_order_size: float | None = None
    min_trade_increment: float | None = None
    price_increment: float | None = None
    fee_in_asset: float = 0.0

    @property
    def crypto(self) -> bool:
        return self.asset_class == "crypto"

    def tick(self, price: float) -> Decimal | None:
        """The price grid at ``price``: the asset's increment for crypto (None: not known, any price), the
        penny rule for stocks."""
        if self.crypto:
            return None if self.price_increment is None else dec(self.price_increment)
        return PENNY if price >= 1.0 else SUB_PENNY

    @property
    def qty_step(self) -> Decimal:
        """The quantity grid of the orders the loop sends: whole shares for stocks (its entries carry an OTO
        take-profit, and fractional orders must be simple), the trade increment for crypto."""
        if self.crypto:
            return dec(self.min_trade_increment) if self.min_trade_increment else FINEST_QTY
        return Decimal(1)

    def received(self, qty: float) -> float:
        """What a buy of ``qty`` leaves in the position at worst, after a fee taken from the asset."""
        return qty * (1.0 - self.fee_in_asset)


def dec(x: float) -> Decimal:
    """A float as the decimal it prints as (``repr`` is the shortest round-trip), so 4599.86 stays 4599.86."""
    return Decimal(repr(float(x)))
