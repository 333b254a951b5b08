"""The risk room's one entry point: the loop asks :class:`RiskCheck` whether each entry may go and it runs the
checks in the order they apply (NautilusTrader's pre-trade risk engine, LEAN's ``CanSubmitOrder``).

Per symbol, before sizing (:meth:`RiskCheck.entry`): fresh data and a usable quote
(:mod:`~marketcast.trade.risk.freshness`), the entry :mod:`~marketcast.trade.risk.gates`, and what the loop's book
says against an entry. Per order, once it is sized (:meth:`RiskCheck.order`): the venue's grid
(:func:`~marketcast.trade.risk.rules.conform`), then the venue's rules and protections with what the broker
shows now (:mod:`~marketcast.trade.risk.precheck`), then the notional risk limits
(:mod:`~marketcast.trade.risk.limits`). Per exit or close (:meth:`RiskCheck.exit`: a leftover close, a take-profit
sent apart, what a halt keeps or flattens): the venue's grid, then (halted) what the account can carry with no
buying power, then the venue's rules and protections with what the broker shows now
(:meth:`~marketcast.trade.risk.precheck.PreCheck.clear`, which cancels the loop's own orders an exit would wash
against); no notional limit, as an exit reduces. At the send itself (:meth:`RiskCheck.admit`): the order-count
limits. The portfolio caps (:mod:`~marketcast.trade.risk.portfolio`) size the entries between the first two.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from marketcast.data.bars import Bars
from marketcast.trade.interface import Broker
from marketcast.trade.journal.state import Intent, request_of
from marketcast.trade.risk.freshness import Freshness, quote_reasons, stale_reason, went_back
from marketcast.trade.risk.gates import GateConfig, check_entry, dollar_volume
from marketcast.trade.risk.limits import RiskGuard
from marketcast.trade.journal.ids import is_loops
from marketcast.trade.risk.precheck import PreCheck, describe
from marketcast.trade.risk.protections import wash_trades
from marketcast.trade.risk.rules import account_violations
from marketcast.trade.types import Account, Order, Position, Quote

if TYPE_CHECKING:  # the loop passes its signals and its desk in; risk never imports the loop
    from marketcast.trade.loop.orders import OrderDesk
    from marketcast.trade.loop.planner import Signal

log = logging.getLogger("marketcast.trade")


@dataclass(frozen=True)
class OrderContext:
    """What one sized entry meets: the account and working orders the broker shows now, the position, the
    quote's far sides, what the entries checked before it draw, and what the loop holds of the symbol."""

    account: Account
    orders: list[Order]
    position: Position | None
    ask: float
    bid: float
    close: float  # the decision bar's close: a market entry's price for the notional limits
    spent: float = 0.0
    held: float = 0.0  # notional the loop already carries on the symbol


@dataclass(frozen=True)
class Verdict:
    """``order`` on the venue's grid when it may go (``changes``: what conforming changed); else the
    ``reasons`` the venue would refuse it, or the notional limit it would ``breach``, or (an exit) why it
    ``waits`` for a later look (refused by nothing the loop cannot clear in time: a foreign order in the way,
    pattern-day-trader protection, a cancel not confirmed yet)."""

    order: Intent | None
    reasons: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()
    breach: str | None = None
    waits: str | None = None

    @property
    def refusal(self) -> str | None:
        """Why the order is not sent, as journalled and shown (None: it may go)."""
        if self.reasons:
            return "; ".join(self.reasons)
        return f"risk limit: {self.breach}" if self.breach else None


class RiskCheck:
    """May this order go? One loop's checks, in order, over its broker, pre-check and risk limits."""

    def __init__(self, broker: Broker, precheck: PreCheck, limits: RiskGuard, desk: OrderDesk,
                 freshness: Freshness, gates: GateConfig) -> None:
        self.broker, self.precheck, self.limits, self.desk = broker, precheck, limits, desk
        self.freshness, self.gates = freshness, gates

    def stale(self, symbol: str, bars: Bars, q: Quote, now, seen: str | None, wanted: bool) -> list[str]:
        """Why ``bars`` and the quote ``q`` cannot carry a new entry at ``now`` (each logged): stale, gone back
        in time past ``seen``, a quote missing though ``wanted``, too old or too wide."""
        stale = [r for r in (stale_reason(bars, now, self.freshness) if now is not None else None,
                             went_back(bars.frame.index[-1], seen)) if r]
        stale += quote_reasons(q, now, self.freshness, wanted, self.gates.require_quote)
        for reason in stale:
            log.warning("%s: no new entry: %s", symbol, reason)
        return stale

    def entry(self, signal: Signal, bars: Bars, stale: list[str], conflicts: list[str]) -> list[str]:
        """Every reason ``signal`` may not become an entry: ``stale`` data, the gates, the book's ``conflicts``."""
        vol = bars.frame["volume"].to_numpy() if "volume" in bars.frame else np.zeros(len(bars))
        gate = check_entry(signal, dollar_volume(bars.frame["close"].to_numpy(), vol), self.gates)
        return stale + list(gate.reasons) + conflicts

    def order(self, intent: Intent, context: OrderContext) -> Verdict:
        """The sized entry ``intent`` on the venue's grid, asked of the venue's rules and protections, then of
        the notional limits."""
        conformed, check = self.desk.conformed(intent)
        reasons = list(check.reasons)
        if conformed is not None:
            standing = self.precheck.standing(intent.symbol, context.account, context.orders, context.position,
                                              context.ask, context.spent, context.bid)
            reasons = [str(r) for r in self.precheck.refusals(self.precheck.as_sent(conformed),
                                                               self.broker.asset(intent.symbol), standing)]
        if reasons:
            return Verdict(None, tuple(reasons))
        price = conformed.limit_price or context.close
        return Verdict(conformed, (), tuple(check.changes), self.limits.notional_breach(conformed, price, context.held))

    def top_up(self, intent: Intent, context: OrderContext) -> Verdict:
        """The top-up ``intent`` of a held position (:mod:`~marketcast.trade.loop.topup`) as an entry is asked
        (grid, rules and protections, notional limits with what the loop holds there), except that a wash trade
        against the loop's *own* working orders (its resting take-profit) is no refusal: the loop cancels those
        and sees the cancels confirmed before it sends (:meth:`send_clear`). One against a foreign order waits."""
        conformed, check = self.desk.conformed(intent)
        if conformed is None:
            return Verdict(None, tuple(check.reasons))
        request = self.precheck.as_sent(conformed)
        standing = self.precheck.standing(intent.symbol, context.account, context.orders, context.position,
                                          context.ask, context.spent, context.bid)
        refused = self.precheck.refusals(request, self.broker.asset(intent.symbol), standing)
        reasons = [str(r) for r in refused if r.rule != "wash_trade"]
        if reasons:
            return Verdict(None, tuple(reasons))
        foreign = [o for o in wash_trades(request, context.orders) if not is_loops(o.root_client_order_id)]
        if foreign:
            return Verdict(None, (), tuple(check.changes), None, f"potential wash trade against {describe(foreign[0])}, "
                                                                  f"which the loop did not place (left untouched)")
        price = conformed.limit_price or context.close
        return Verdict(conformed, (), tuple(check.changes), self.limits.notional_breach(conformed, price, context.held))

    def send_clear(self, intent: Intent, ask: float) -> str | None:
        """Cancel the loop's own orders ``intent`` would wash against and see the cancels confirmed (None: it may
        go now), as for an exit (:meth:`~marketcast.trade.risk.precheck.PreCheck.clear`), valued at ``ask``."""
        return self.precheck.clear(intent, intent.decision_ts, ask)

    def exit(self, intent: Intent, position: Position | None = None, halted: bool = False) -> Verdict:
        """The exit or close ``intent`` on the venue's grid; ``halted``, refused where it would open anything
        (a halted loop draws no buying power; ``position``: what the loop's book holds of the symbol); then
        cleared by the venue's rules and protections, read afresh (the loop's own orders it would wash against
        cancelled and confirmed first). No notional limit: an exit only reduces."""
        conformed, check = self.desk.conformed(intent)
        reasons = list(check.reasons)
        if conformed is not None and halted:
            reasons = account_violations(request_of(conformed), self.broker.asset(intent.symbol),
                                         0.0 if position is None else position.qty,
                                         0.0 if position is None else position.available, 0.0,
                                         conformed.limit_price or 0.0)
        if reasons:
            return Verdict(None, tuple(reasons))
        waits = self.precheck.clear(conformed, conformed.decision_ts)
        return Verdict(None if waits else conformed, (), tuple(check.changes), None, waits)

    def admit(self, intent: Intent) -> str | None:
        """At the send: the order-count limit ``intent`` would trip, if it would (counted as sent otherwise)."""
        return self.limits.order_breach(intent)
