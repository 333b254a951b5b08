"""Risk limits, and the halted state a breach puts the loop in (NautilusTrader's risk engine: checks before
every order, and a trading state that a breach turns to halted).

Limits (0 turns one off):

* ``max_daily_loss``: equity below the day's starting equity by this fraction. The day is the UTC date of the
  loop's clock (of the decision bar when it has none, as in a replay); its starting equity is the last equity
  the loop saw on an earlier day, or its first reading today.
* ``max_orders_per_cycle``, ``max_orders_per_day``: orders sent (entries, closes, take-profits), counted before
  each one goes out; an order re-sent after a crash is not counted twice.
* ``max_notional_per_order``, ``max_notional_per_symbol`` (account currency): entries. Sizing already stays
  inside them (:func:`~marketcast.trade.risk.portfolio.allocate`); this is the last line of defence.

When one trips, :meth:`RiskGuard.trip` records the halt in the journal (source ``risk``) first, so nothing new
goes out even if what follows fails, then stops new entries but keeps the exits of what the loop holds (its
``keeper``, :mod:`~marketcast.trade.loop.exits`: entries cancelled, take-profit legs kept or re-placed; with
``flatten_on_halt`` everything cancelled and the loop's quantities closed at market), lists each position with
its exits in the halt's details, and returns the :class:`~marketcast.errors.HaltedError` that ends the cycle
(exit 5). Every later look refuses to trade but keeps those exits (:meth:`RiskGuard.hold`) until ``marketcast
trade resume`` lifts the halt, which also restarts the day's loss count from the next equity reading (else the
same loss would trip again at once).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from marketcast.errors import HaltedError
from marketcast.trade.interface import Broker, BrokerError
from marketcast.trade.journal.db import transaction
from marketcast.trade.journal.ids import is_loops
from marketcast.trade.journal.state import Intent, Journal, now

if TYPE_CHECKING:  # the loop passes its desk and its exit keeper in; policy never imports the loop
    from marketcast.trade.journal.halts import Halt
    from marketcast.trade.loop.exits import HaltExits
    from marketcast.trade.loop.orders import OrderDesk

log = logging.getLogger("marketcast.trade")

SCHEMA = """
CREATE TABLE IF NOT EXISTS equity_days (day TEXT PRIMARY KEY, start REAL NOT NULL, last REAL NOT NULL,
    at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sends (client_order_id TEXT PRIMARY KEY, day TEXT NOT NULL, at TEXT NOT NULL);
"""
RISK = "risk"
RESUME = "marketcast trade resume --state-dir STATE"


def day_of(now, decision_ts: str) -> str:
    """The risk day (YYYY-MM-DD, UTC) of the loop's clock ``now``, else of the decision bar."""
    t = pd.Timestamp(now if now is not None else decision_ts)
    return (t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class RiskLimits:
    max_daily_loss: float = 0.05  # fraction of the day's starting equity
    max_orders_per_cycle: int = 20
    max_orders_per_day: int = 100
    max_notional_per_order: float = 0.0  # account currency; 0: no limit
    max_notional_per_symbol: float = 0.0
    flatten_on_halt: bool = False  # a halt closes the loop's quantities at market instead of keeping their exits

    @property
    def entry_cap(self) -> float | None:
        """The most one entry may be worth under the notional limits (None: no limit)."""
        caps = [c for c in (self.max_notional_per_order, self.max_notional_per_symbol) if c > 0]
        return min(caps) if caps else None


class RiskGuard:
    """The limits of one loop over its journal (tables ``equity_days`` and ``sends``)."""

    def __init__(self, journal: Journal, limits: RiskLimits, resolve: str = RESUME,
                 keeper: HaltExits | None = None) -> None:
        self.journal, self.limits, self.resolve, self.keeper = journal, limits, resolve, keeper
        journal.conn.executescript(SCHEMA)
        self.day = ""
        self.sent_in_cycle = 0

    def begin(self, day: str) -> None:
        """A new cycle (or watch) on ``day`` (YYYY-MM-DD)."""
        self.day, self.sent_in_cycle = day, 0

    # ----------------------------------------------------------------- checks
    def equity_breach(self, equity: float) -> str | None:
        """Record this equity reading; the reason the daily loss limit trips, if it does."""
        with transaction(self.journal.conn) as c:
            row = c.execute("SELECT start FROM equity_days WHERE day=?", (self.day,)).fetchone()
            if row is None:
                prev = c.execute("SELECT last FROM equity_days WHERE day < ? ORDER BY day DESC LIMIT 1",
                                 (self.day,)).fetchone()
                start = equity if prev is None else float(prev[0])
                c.execute("INSERT INTO equity_days VALUES (?,?,?,?)", (self.day, start, equity, now()))
            else:
                start = float(row[0])
                c.execute("UPDATE equity_days SET last=?, at=? WHERE day=?", (equity, now(), self.day))
        limit = self.limits.max_daily_loss
        loss = 1.0 - equity / start if start > 0 else 0.0
        if limit > 0 and loss >= limit:
            return (f"daily loss {loss:.2%} of the day's starting equity {start:,.2f} (now {equity:,.2f}) reached "
                    f"the limit max_daily_loss {limit:.2%} on {self.day}")
        return None

    def order_breach(self, intent: Intent) -> str | None:
        """Count ``intent`` as sent (before its POST); the reason an order limit trips, if it does."""
        c = self.journal.conn
        if c.execute("SELECT 1 FROM sends WHERE client_order_id=?", (intent.client_order_id,)).fetchone():
            return None  # re-sent after a crash: counted when it was first admitted
        today = c.execute("SELECT COUNT(*) FROM sends WHERE day=?", (self.day,)).fetchone()[0]
        per_cycle, per_day = self.limits.max_orders_per_cycle, self.limits.max_orders_per_day
        if per_cycle > 0 and self.sent_in_cycle + 1 > per_cycle:
            return (f"{intent.client_order_id} would be order {self.sent_in_cycle + 1} of this cycle: "
                    f"max_orders_per_cycle {per_cycle}")
        if per_day > 0 and today + 1 > per_day:
            return f"{intent.client_order_id} would be order {today + 1} on {self.day}: max_orders_per_day {per_day}"
        with transaction(c) as tx:
            tx.execute("INSERT INTO sends VALUES (?,?,?)", (intent.client_order_id, self.day, now()))
        self.sent_in_cycle += 1
        return None

    def notional_breach(self, intent: Intent, price: float, on_symbol: float) -> str | None:
        """The reason an entry worth ``qty x price`` (with ``on_symbol`` already committed there) trips a notional
        limit, if it does."""
        notional = intent.qty * price
        per_order, per_symbol = self.limits.max_notional_per_order, self.limits.max_notional_per_symbol
        if per_order > 0 and notional > per_order + 1e-9:
            return (f"{intent.symbol} entry {intent.client_order_id} is worth {notional:,.2f}: "
                    f"max_notional_per_order {per_order:,.2f}")
        if per_symbol > 0 and notional + on_symbol > per_symbol + 1e-9:
            return (f"{intent.symbol} would carry {notional + on_symbol:,.2f} with entry {intent.client_order_id}: "
                    f"max_notional_per_symbol {per_symbol:,.2f}")
        return None

    # ----------------------------------------------------------------- the halted state
    def trip(self, reason: str, broker: Broker, desk: OrderDesk, decision_ts: str) -> HaltedError:
        """Record the halt, then stop entries and keep exits (or flatten); the error to raise."""
        halt = self.journal.halts.add(RISK, f"risk limit: {reason}", self.resolve)
        log.error("risk limit tripped: %s; no new entry until %s", reason, self.resolve)
        if self.keeper is None:  # a guard without the loop (nothing to keep exits with): cancel all, fail closed
            own = [o for o in broker.open_orders() if is_loops(o.root_client_order_id)]
            for order in own:
                if order.status != "pending_cancel":
                    desk.cancel(order, decision_ts, halt.reason, act=True)
            still = desk.await_cancels([o.id for o in own]) if own else []
            self.journal.halts.update(halt.id, {"cancelled": [o.client_order_id for o in own], "unconfirmed": still})
        else:
            self.hold(decision_ts, halt)
        return HaltedError(halt.message())

    def hold(self, decision_ts: str, halt: Halt) -> None:
        """What a risk halt does at its trip and at each look while it lasts: cancel entries, keep or re-place
        the exits of what the loop holds (``flatten_on_halt``: close it), and record each position with its
        exits in the halt's details. A broker error is logged and recorded: the halt stands, the next look
        tries again."""
        if self.keeper is None:
            return
        before = halt.details
        try:
            found = self.keeper.enforce(decision_ts, halt.reason, self.limits.flatten_on_halt)
        except BrokerError as exc:
            log.error("risk halt: could not see to the loop's exits: %s; the next look tries again", exc)
            found = {"error": str(exc)}
        merged = {k: v for k, v in before.items() if k != "error"}
        for key in ("cancelled", "sent"):  # what the halt did, over all its looks
            merged[key] = merged.get(key, []) + [c for c in found.pop(key, []) if c not in merged.get(key, [])]
        self.journal.halts.update(halt.id, {**merged, **found, "looked_at": decision_ts})
        now = next((h for h in self.journal.halts.active() if h.id == halt.id), None)
        for line in now.positions() if now is not None else []:
            log.warning("risk halt: %s", line)


def lift(journal: Journal, by: str) -> int:
    """``trade resume``: lift every risk halt and restart the day's loss count; returns how many were lifted."""
    journal.conn.executescript(SCHEMA)
    lifted = journal.halts.lift(RISK, by)
    with transaction(journal.conn) as c:
        c.execute("DELETE FROM equity_days")
    return lifted
