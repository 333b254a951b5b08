"""What the loop needs from a broker, and the errors it must tell apart.

The cycle, gates and portfolio code only ever see :class:`Broker`; the embedded paper broker and the
Alpaca adapter implement it (NautilusTrader's split of strategy and execution client).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from marketcast.errors import ExitCode, MarketcastError
from marketcast.trade.types import Asset
from marketcast.trade.types import Account, BarRow, Fill, MarketClock, Order, OrderRequest, Position, Quote


class BrokerError(MarketcastError):
    """The broker could not do what was asked, or answered what the loop cannot use; the message never contains
    credentials. Exit 6 with ``--once`` (the broker, not the user's input, is at fault); a continuous loop backs
    off and tries again. The rejections and duplicates below never end a run: the loop handles them per order."""

    exit_code = ExitCode.UNAVAILABLE


class OrderRejected(BrokerError):
    """The broker refused the order (403/422): retrying the same order will not help."""


class DuplicateOrder(BrokerError):
    """An order with this ``client_order_id`` already exists: the submit already happened."""


class BrokerUnavailable(BrokerError):
    """Rate-limited, 5xx or timed out after retries: the outcome of a submit is unknown until reconciled."""

    exit_code = ExitCode.UNAVAILABLE


@dataclass(frozen=True)
class Snapshot:
    """What a reconcile reads about orders in one go: the working ones, the recent ones of every status, and
    the fills since a time."""

    working: list[Order]
    recent: list[Order]
    fills: list[Fill]


class Broker(ABC):
    """Account, positions, orders, quotes and bars of one trading account."""

    name: str = "broker"
    endpoint: str = ""  # where orders go, as records and ``trade status`` show it
    has_quotes: bool = True  # a live bid/ask feed (ADD_LATEST defaults to on); the paper broker has none

    @abstractmethod
    def account(self) -> Account: ...

    @abstractmethod
    def asset(self, symbol: str) -> Asset:
        """What the broker accepts for ``symbol`` (increments, sizes, shortable): the rules model's input."""

    @abstractmethod
    def positions(self) -> list[Position]: ...

    @abstractmethod
    def open_orders(self) -> list[Order]:
        """Every working order, take-profit legs included (each naming its parent's client id)."""

    @abstractmethod
    def orders(self, limit: int = 100) -> list[Order]:
        """Recent orders of every status, newest last (for reconciling after a restart)."""

    @abstractmethod
    def order_history(self, since: str | None = None) -> list[Order]:
        """Every order submitted at or after ``since`` (an ISO time; None: every order the account ever had),
        oldest first, each take-profit leg after its parent: how a lost or replaced journal is found however
        old the loop's orders are. A broker that pages must walk every page, or raise :class:`BrokerError`:
        a partial history is never returned."""

    @abstractmethod
    def order(self, order_id: str) -> Order | None:
        """One order by the broker's id (None if unknown): how a cancel is confirmed."""

    @abstractmethod
    def order_by_client_id(self, client_order_id: str) -> Order | None: ...

    @abstractmethod
    def submit(self, request: OrderRequest) -> Order:
        """Submit; raises :class:`DuplicateOrder` if ``client_order_id`` was used before."""

    @abstractmethod
    def cancel(self, order_id: str) -> None:
        """Ask to cancel; the order may stay ``pending_cancel`` (still able to fill) for a while."""

    @abstractmethod
    def fills(self, since: str | None = None) -> list[Fill]: ...

    @abstractmethod
    def latest_quote(self, symbol: str) -> Quote | None: ...

    @abstractmethod
    def latest_bars(self, symbol: str, limit: int) -> list[BarRow]: ...

    def market_clock(self) -> MarketClock | None:
        """The broker's own clock (Alpaca's ``GET /v2/clock``), or None: the loop keeps time itself."""
        return None

    def fee_for(self, asset_class: str) -> float | None:
        """The fee per side this broker charges on ``asset_class`` when it differs from the asset class's
        default (:data:`marketcast.backtest.costs.DEFAULT_COSTS`), for the loop's cost assumption; None: the default."""
        return None

    def cost_overrides(self, asset_class: str) -> dict:
        """What this broker charges on ``asset_class`` beyond the fee, where it differs from the asset class's
        default: ``spread`` (the spread its *synthetic* quotes are made with), ``slippage``, ``borrow_rate``
        (:meth:`marketcast.backtest.costs.Costs.for_asset`'s arguments; None or missing: the default). The loop
        plans with these, so the paper broker charges what the planner assumed."""
        return {}

    def snapshot(self, since: str | None = None) -> Snapshot:
        """:meth:`open_orders`, :meth:`orders` and :meth:`fills` together (a broker may read them at once)."""
        return Snapshot(self.open_orders(), self.orders(), self.fills(since))

    def attaches_take_profit(self, symbol: str) -> bool:
        """Whether :meth:`submit` attaches ``take_profit`` to the entry; if not (Alpaca crypto has no
        OTO/bracket orders) the loop sends the take-profit itself once it sees the entry fill."""
        return True

    def takes_cls(self, symbol: str) -> bool:
        """Whether a ``cls`` (market-on-close) order for ``symbol`` can reach a closing auction now, the clock's
        cutoff aside (the loop checks that: :func:`marketcast.trade.risk.freshness.cls_cutoff`). Alpaca: a stock."""
        return True


def submit_once(broker: Broker, request: OrderRequest, looked_up: bool = False) -> tuple[Order, bool]:
    """Submit unless the broker already has this ``client_order_id`` (``looked_up``: the caller just asked);
    returns (order, newly_submitted).

    A duplicate-id rejection means an earlier attempt (maybe one whose reply was lost) got through.
    """
    existing = None if looked_up else broker.order_by_client_id(request.client_order_id)
    if existing is not None:
        return existing, False
    try:
        return broker.submit(request), True
    except DuplicateOrder:
        order = broker.order_by_client_id(request.client_order_id)
        if order is None:
            raise BrokerError(
                f"broker reports {request.client_order_id} as a duplicate but cannot find it"
            ) from None
        return order, False
