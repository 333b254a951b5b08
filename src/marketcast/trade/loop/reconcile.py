"""Bring the journal in line with the broker before deciding anything, and stop when they disagree.

:meth:`Reconciler.compare` syncs what can be synced (pending intents the broker knows, order statuses,
fills) and lists what cannot be explained; any item halts trading (fail closed, NautilusTrader's
reconciliation on start):

* the journal is bound to another broker account or endpoint (a deleted ``broker.db``, paper vs live);
* the broker has orders with the loop's id prefix that the journal does not know (a lost, reset or replaced
  journal, or a second loop on the account), however old: the first compare of a process reads the account's
  whole order history (:meth:`~marketcast.trade.interface.Broker.order_history`), later ones only what
  was submitted since the newest submission seen (less :data:`HISTORY_OVERLAP`), so a cycle costs one page;
* the journal says an order was submitted, the broker does not know it;
* the broker cannot be holding the quantity the journal says the loop owns (checked three times in a row:
  a fill landing between two reads is not a disagreement).

The broker holding *more* of a symbol the loop trades than the journal explains does not halt the loop: that
symbol alone is held (:meth:`~marketcast.trade.loop.ownership.Book.unexpected`: no entry, no close, a warning
each cycle) until :meth:`Reconciler.adopt` takes the broker's quantity.

:meth:`Reconciler.housekeep` then does what every bar needs: cancel the loop's orders of earlier bars,
close what earlier bars left (after the cancels are confirmed), and send the take-profits a broker could not
attach. Only the loop's own orders and quantities are ever touched. Each close and take-profit is first asked of
the loop's one :class:`~marketcast.trade.risk.check.RiskCheck`, handed to housekeeping
(:meth:`~marketcast.trade.risk.check.RiskCheck.exit`: the venue's grid, then its rules): the loop's own orders it
would wash-trade against are cancelled and confirmed before it goes out; a foreign order in its way, or
pattern-day-trader protection, defers it with the reason.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable

from marketcast.errors import HaltedError
from marketcast.trade.interface import Broker, BrokerError, Snapshot
from marketcast.trade.journal.ids import CLOSE, ENTRY, TAKE_PROFIT, TOP_UP, client_order_id, is_loops
from marketcast.trade.loop.orders import OrderDesk
from marketcast.trade.risk.check import RiskCheck
from marketcast.trade.risk.freshness import queued_until
from marketcast.trade.loop.on_close import close_at_the_close, leave_at_the_close
from marketcast.trade.loop.ownership import Book, dust, fee_slack, owned
from marketcast.trade.risk.rules import round_qty
from marketcast.trade.types import Asset
from marketcast.trade.journal.state import TERMINAL_INTENTS, Intent, Journal
from marketcast.trade.types import BUY, GTC, LIMIT, MARKET, SELL, Order, status_kind, utc_text, utc_time

log = logging.getLogger("marketcast.trade")
RECONCILE = "reconcile"
CHECKS = 3
HISTORY_OVERLAP = timedelta(hours=1)  # re-read before the newest submission seen: a listing may show an order late


@dataclass
class Reconciled:
    filled: int = 0  # orders that got their first entry fill
    cancelled: int = 0
    closes: list[str] = field(default_factory=list)
    take_profits: list[str] = field(default_factory=list)
    deferred: dict[str, str] = field(default_factory=dict)  # symbol -> why its close waits for the next cycle
    late: list[str] = field(default_factory=list)  # cls exits not sent: the entry's fill seen after the cutoff
    book: Book | None = None


class Reconciler:
    def __init__(self, broker: Broker, journal: Journal, desk: OrderDesk, resolve: str) -> None:
        self.broker, self.journal, self.desk, self.resolve = broker, journal, desk, resolve
        self._assets: dict[str, Asset] = {}
        self.unconfirmed: list[str] = []  # this cycle's cancels the broker has not confirmed
        self.history_from: str | None = None  # order history read from here on (None: all of it, a new process)
        self.scope: Callable[[str], bool] = lambda symbol: True  # the symbols this pass housekeeps
        self.checks: RiskCheck | None = None  # the loop's risk checks during a housekeeping pass
        self.now = None  # the loop's clock during this pass (None: a replay, at the decision bar's close)
        # whether the loop holds on to what earlier bars left of (symbol, at decision_ts, signed qty): its decision
        # there is still on that side (LoopConfig.hold_agreeing); never, by default: every leftover is closed
        self.keeps: Callable[[str, str, float], bool] = lambda symbol, decision_ts, qty: False
        # whether a symbol's entry exits at its session's close by a cls order (exit rule `close`, a stock on daily
        # bars: marketcast.trade.loop.on_close); never, by default: every position leaves at the next decision
        self.on_close: Callable[[str], bool] = lambda symbol: False
        # whether a position of a symbol held on (hold_agreeing) leaves by a cls order in the session after the
        # decision that turns, its take-profit resting until then (exit rule `close`, a stock on daily bars:
        # marketcast.trade.loop.on_close.leave_at_the_close); never, by default: it is closed at that decision
        self.leaves_at_close: Callable[[str], bool] = lambda symbol: False
        self.held_on: dict[str, float] = {}  # this pass's positions held on, with their resting exits
        self.leaving: dict[str, float] = {}  # ... and those leaving at the next session's close (leaves_at_close)

    def assets(self, symbols) -> dict[str, Asset]:
        for s in symbols:
            if s not in self._assets:
                self._assets[s] = self.broker.asset(s)
        return self._assets

    def _read(self, result: Reconciled) -> tuple[Book, dict[str, Asset], Snapshot]:
        """Positions, then orders and fills (a fill landing after the positions read is booked, so it can
        only make the broker look short of what the journal says, never hide a loss), then the book."""
        positions = self.broker.positions()
        snap = self.broker.snapshot(since=self.journal.last_fill_ts())
        result.filled += self.journal.add_fills(snap.fills)
        booked, adjustments = self.journal.booked(), self.journal.adjustments()
        traded = {b.symbol for b in booked} | set(adjustments)
        assets = self.assets(traded | {p.symbol for p in positions})
        return Book.of(owned(booked, adjustments, assets), positions, snap.working, traded, fee_slack(booked, assets),
                       self.resolve), assets, snap

    # ----------------------------------------------------------------- compare
    def compare(self, decision_ts: str, result: Reconciled) -> list[str]:
        """Sync the journal with the broker; returns every disagreement that sync cannot explain."""
        account = self.broker.account()
        self.desk.account = account  # the figures journalled with this pass's closes and take-profits
        meta = self.journal.meta()
        if meta.get("account_id", account.id) != account.id:
            return [f"the journal was written for account {meta['account_id']} at {meta.get('endpoint', '?')}, "
                    f"the broker is account {account.id} at {self.broker.endpoint}"]
        if "account_id" not in meta:
            self.journal.set_meta(account_id=account.id, endpoint=self.broker.endpoint)
        book, assets, snap = self._read(result)
        seen = {o.client_order_id: o for o in snap.recent + snap.working}
        out = self._statuses(decision_ts, seen)
        known = self.journal.intent_ids()
        unknown = sorted({cid for cid in seen if is_loops(cid) and cid not in known} | self._unknown_in_history(known))
        if unknown:
            out.append(f"the broker has {len(unknown)} order(s) placed by a marketcast loop that this journal does "
                       f"not know ({', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}): the journal was "
                       f"lost or reset")
        for _ in range(CHECKS - 1):
            if not book.mismatches(assets) and not book.unexpected(assets):
                break
            book, assets, snap = self._read(result)
        result.book = book
        for line in book.unexpected(assets).values():
            log.warning("%s", line)
        for c in self.journal.cancels("pending"):  # a kill after the cancel call: the order is gone now
            if c["order_id"] not in {o.id for o in snap.working}:
                self.journal.mark_cancel(c["order_id"], "done")
        return out + book.mismatches(assets)

    def _unknown_in_history(self, known: set[str]) -> set[str]:
        """The loop's orders (by their id prefix) in the account's order history that the journal does not
        know: all of the history on a process's first compare, then from :attr:`history_from`, which moves up
        only while nothing is unknown (a halt is re-checked in full)."""
        history = self.broker.order_history(self.history_from)
        unknown = {o.client_order_id for o in history if is_loops(o.client_order_id) and o.client_order_id not in known}
        stamps = [utc_time(o.submitted_at) for o in history if o.submitted_at]
        if not unknown and stamps:
            self.history_from = (max(stamps) - HISTORY_OVERLAP).isoformat()
        return unknown

    def _statuses(self, decision_ts: str, seen: dict[str, Order]) -> list[str]:
        """Pending intents the broker has become ``submitted`` (those of a passed bar it never got:
        ``abandoned``); submitted ones get the broker's status (``rejected`` after acceptance is booked as
        such); a submitted one the broker does not know is a disagreement."""
        lost, statuses = [], {}
        for intent in self.journal.intents():
            cid = intent.client_order_id
            if intent.status not in ("pending", "submitted"):
                continue
            order = seen.get(cid)
            if order is None and (intent.status == "pending" or intent.broker_status is None
                                  or status_kind(intent.broker_status) != "terminal"):
                order = self.broker.order_by_client_id(cid)
            if order is None:
                if intent.status == "submitted" and intent.broker_status is not None and \
                        status_kind(intent.broker_status) == "terminal":
                    continue  # finished long ago, out of the recent listing
                if intent.status == "submitted":
                    lost.append(cid)
                elif intent.decision_ts < decision_ts:
                    self.journal.mark(cid, "abandoned", error="bar passed before submit")
                    log.info("%s %s abandoned: its bar passed before it was sent", intent.symbol, cid)
                continue
            if order.status == "rejected":
                self.journal.mark(cid, "rejected", order.id, error="rejected by the broker after it accepted the order",
                                  broker_status="rejected")
                log.warning("%s %s: rejected by the broker after acceptance", intent.symbol, cid)
            elif intent.status == "pending":
                self.journal.mark(cid, "submitted", order.id, broker_status=order.status)
            else:
                statuses[cid] = order.status
        self.journal.set_broker_status(statuses)
        if lost:
            return [f"the journal says {len(lost)} order(s) were submitted that the broker does not know "
                    f"({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''})"]
        return []

    def halt(self, disagreements: list[str]) -> HaltedError:
        """Record the halt (once) and return the error that ends the cycle (exit code 5)."""
        extra = f" (and {len(disagreements) - 1} more, see trade status)" if len(disagreements) > 1 else ""
        halt = self.journal.halts.add(RECONCILE, f"journal and broker disagree: {disagreements[0]}{extra}",
                                      self.resolve, {"disagreements": disagreements})
        return HaltedError(halt.message())

    def adopt(self) -> list[str]:
        """``trade reconcile --accept-broker``: make the journal agree with the broker and lift the reconcile
        halt. Orders of another account, and submitted orders the broker does not know, become ``lost``; the
        loop's orders the journal does not know are adopted (they are the loop's by their prefix, and the
        next cycle cancels them as stale); each quantity the broker cannot be holding is set to what it can
        hold, and a symbol held for an unexpected quantity (a split, an outside trade) gets the broker's whole
        quantity, which the loop then owns and closes (adjustments, never a trade). Returns what changed."""
        changes = []
        account, meta = self.broker.account(), self.journal.meta()
        rebound = meta.get("account_id") not in (None, account.id)
        if rebound or "account_id" not in meta:
            self.journal.set_meta(account_id=account.id, endpoint=self.broker.endpoint)
            changes.append(f"journal bound to account {account.id} at {self.broker.endpoint}"
                           + (f" (was {meta['account_id']})" if rebound else ""))
        snap = self.broker.snapshot()
        seen = {o.client_order_id: o for o in self.broker.order_history() + snap.working}
        for i in self.journal.intents():
            settled = i.broker_status is not None and status_kind(i.broker_status) == "terminal"
            if i.status in ("pending", "submitted") and not settled and (rebound or (
                    seen.get(i.client_order_id) or self.broker.order_by_client_id(i.client_order_id)) is None):
                self.journal.mark(i.client_order_id, "lost", error="the broker did not know it (accepted by "
                                                                   "trade reconcile --accept-broker)")
                changes.append(f"{i.client_order_id} ({i.symbol}) marked lost")
        known = self.journal.intent_ids()
        for cid, o in sorted(seen.items()):
            if is_loops(cid) and cid not in known:
                self.journal.record_intent(Intent(cid, utc_text(o.submitted_at) if o.submitted_at else "", "adopted",
                                                  o.symbol, o.side, o.qty,
                                                  o.type, o.limit_price, o.take_profit, o.time_in_force, "submitted",
                                                  o.id, kind="adopted", broker_status=o.status))
                changes.append(f"{cid} ({o.symbol} {o.side} {o.qty:g}, {o.status}) adopted from the broker")
        self.journal.add_fills(snap.fills)
        book, assets, _ = self._read(Reconciled())
        extra = book.unexpected(assets)
        for symbol in sorted(set(book.owned) | set(extra)):
            qty, held = book.owned.get(symbol, 0.0), book.broker_qty(symbol)
            if rebound:
                target = 0.0
            elif symbol in extra:  # a split or an outside trade: the user says the broker's quantity is the loop's
                target = held
            else:
                target = min(qty, max(held, 0.0)) if qty > 0 else max(qty, min(held, 0.0))
            if abs(target - qty) > 1e-12:
                self.journal.adjust(symbol, target - qty, "trade reconcile --accept-broker")
                changes.append(f"{symbol}: the loop's quantity {qty:g} -> {target:g} (the broker holds {held:g})")
        if self.journal.halts.lift(RECONCILE, "trade reconcile --accept-broker"):
            changes.append("reconcile halt lifted")
        return changes

    # ----------------------------------------------------------------- housekeep
    def housekeep(self, decision_ts: str, result: Reconciled, checks: RiskCheck, act: bool = True,
                  scope: Callable[[str], bool] = lambda symbol: True, now=None) -> None:
        """Cancel the loop's orders of earlier bars, close what earlier bars left, send separate take-profits,
        for the symbols in ``scope`` (those of the clock whose bar ``decision_ts`` is: another market's orders
        keep to their own bars), each close and take-profit asked of ``checks`` first. With ``act`` False (a dry
        run) nothing at the broker changes; what would be done is logged. ``now`` (the loop's clock) tells an
        exit sent outside its market's session."""
        self.unconfirmed, self.scope, self.now, self.checks = [], scope, now, checks
        intents = {i.client_order_id: i for i in self.journal.intents()}
        self.held_on = self._held_on(decision_ts, result, intents)
        self.leaving = self._leaving(decision_ts, result)
        stale = [o for o in result.book.own_orders if scope(o.symbol)
                 and (root := intents.get(o.root_client_order_id)) is not None and root.decision_ts < decision_ts
                 and not self._resting_exit(o, intents)]
        for order in stale:
            if order.status != "pending_cancel":  # one asked for earlier is only awaited
                result.cancelled += self.desk.cancel(order, decision_ts, "its bar has passed", act)
        if act and stale:  # what is confirmed gone no longer counts (a leg may have filled instead: booked)
            self.unconfirmed = self.desk.await_cancels(
                [o.id for o in stale if o.status == "pending_cancel" or o.id in self.desk.cancelled])
            result.book = self._read(result)[0]
        elif not act:  # dry run: as if every cancel went through
            result.book.own_orders = [o for o in result.book.own_orders if o.id not in self.desk.cancelled]
        self._close_leftovers(decision_ts, result, act)
        if act:
            close_at_the_close(self, decision_ts, result)
            leave_at_the_close(self, decision_ts, result)
            self._take_profits(decision_ts, result)

    def _held_on(self, decision_ts: str, result: Reconciled, intents: dict[str, Intent]) -> dict[str, float]:
        """What earlier bars left that the loop holds on to at ``decision_ts`` (:attr:`keeps`): not closed, its
        resting take-profit kept working (a ``gtc`` order lives on until it fills or the decision turns). A
        symbol whose close of this bar is journalled already (a restart) is not held on."""
        leftover = owned(self.journal.booked(), self.journal.adjustments(), self._assets, before=decision_ts)
        held_back = result.book.unexpected(self._assets)
        return {s: q for s, q in sorted(leftover.items())
                if self.scope(s) and abs(q) >= dust(self._assets.get(s)) and s not in held_back
                and client_order_id(s, decision_ts, CLOSE) not in intents and self.keeps(s, decision_ts, q)}

    def _leaving(self, decision_ts: str, result: Reconciled) -> dict[str, float]:
        """What earlier bars left that the decision at ``decision_ts`` no longer holds on to, of the symbols that
        leave at the next session's close (:attr:`leaves_at_close`): not closed at market, its take-profit kept
        working until the ``cls`` order goes out (:func:`~marketcast.trade.loop.on_close.leave_at_the_close`)."""
        leftover = owned(self.journal.booked(), self.journal.adjustments(), self._assets, before=decision_ts)
        held_back = result.book.unexpected(self._assets)
        return {s: q for s, q in sorted(leftover.items())
                if self.scope(s) and abs(q) >= dust(self._assets.get(s)) and s not in held_back
                and s not in self.held_on and self.leaves_at_close(s)}

    def _resting_exit(self, order: Order, intents: dict[str, Intent]) -> bool:
        """Whether ``order`` is the take-profit of a position held on, or leaving at the next close (a leg, or
        one sent apart): it rests."""
        held = self.held_on.get(order.symbol, self.leaving.get(order.symbol))
        if held is None or (order.side == SELL) != (held > 0):
            return False
        own = intents.get(order.client_order_id)
        return order.parent_client_order_id is not None or (own is not None and own.kind == TAKE_PROFIT)

    def _close_leftovers(self, decision_ts: str, result: Reconciled, act: bool) -> None:
        """What earlier bars left (a take-profit that did not trade) is closed at market, as the backtest
        closes at the bar's close, once the cancels of its orders are confirmed: only the quantity the journal
        says the loop owns, never more than the position has free. The id is (symbol, bar, close), so a
        restart re-finds the close instead of sending a second one."""
        assets = self._assets
        leftover = owned(self.journal.booked(), self.journal.adjustments(), assets, before=decision_ts)
        for symbol, qty in sorted(leftover.items()):
            if not self.scope(symbol):
                continue
            asset = assets[symbol]
            if abs(qty) < dust(asset):
                continue
            if symbol in self.held_on:
                log.info("%s: the decision at %s is still on the side of the loop's %g: held on", symbol, decision_ts,
                         qty)
                continue
            if symbol in self.leaving:  # a cls order in the next session (on_close.leave_at_the_close)
                continue
            if symbol in (held_back := result.book.unexpected(assets)):  # the split's or outside trade's symbol
                result.deferred[symbol] = held_back[symbol]
                continue
            cid = client_order_id(symbol, decision_ts, CLOSE)
            if not act:
                log.info("dry run: would close the loop's leftover %s %g with %s", symbol, qty, cid)
                continue
            existing = self.journal.intent(cid)
            if existing is not None:  # this bar's close is journalled: finish it if a kill left it unsent
                self._submit(existing, result.closes, result) if existing.status == "pending" else \
                    result.closes.append(cid)
                continue
            waiting = [o for o in result.book.own_orders if o.symbol == symbol and o.id in self.unconfirmed]
            if waiting:
                result.deferred[symbol] = f"cancel of {waiting[0].client_order_id} not confirmed yet"
                log.warning("%s: close deferred: %s", symbol, result.deferred[symbol])
                continue
            position = next((p for p in self.broker.positions() if p.symbol == symbol), None)
            free = 0.0 if position is None else position.available
            size = round_qty(min(abs(qty), free), asset.qty_step)
            if size <= 0:
                result.deferred[symbol] = f"the loop owns {qty:g} but the position has {free:g} free"
                log.warning("%s: %s", symbol, result.deferred[symbol])
                continue
            intent = Intent(cid, decision_ts, "close", symbol, SELL if qty > 0 else BUY, size, MARKET, None, None,
                            "gtc" if asset.crypto else "day", kind=CLOSE)
            self._submit(intent, result.closes, result)

    def _take_profits(self, decision_ts: str, result: Reconciled) -> None:
        """The take-profits of this bar's entries that the broker could not attach (Alpaca crypto): a limit
        order per new fill level, for what the fills left in the position after the broker's fee, down to
        the asset's increment; its id is (symbol, bar, take_profit@filled qty), so a restart re-finds it."""
        intents = self.journal.intents()
        for t in intents:  # written ahead before a kill, never sent: send it now
            if t.kind == TAKE_PROFIT and t.status == "pending" and t.decision_ts == decision_ts and self.scope(t.symbol):
                self._submit(t, result.take_profits, result)
        for i in intents:
            if i.kind == TOP_UP:
                self._whole_take_profit(i, decision_ts, result)
                continue
            if (i.kind != ENTRY or i.take_profit is None or i.status != "submitted" or i.decision_ts != decision_ts
                    or not self.scope(i.symbol) or self.broker.attaches_take_profit(i.symbol)):
                continue
            asset = self.assets([i.symbol])[i.symbol]
            filled = self.journal.filled_qty(i.client_order_id)
            covered = sum(t.qty for t in intents if t.kind == TAKE_PROFIT and t.symbol == i.symbol
                          and t.decision_ts == decision_ts and t.status not in TERMINAL_INTENTS)
            position = next((p for p in self.broker.positions() if p.symbol == i.symbol), None)
            free = 0.0 if position is None else position.available
            qty = round_qty(min(asset.received(filled) - covered, free), asset.qty_step)
            if qty <= 0 or qty < (asset.min_order_size or 0.0):
                continue
            cid = client_order_id(i.symbol, decision_ts, f"{TAKE_PROFIT}@{filled!r}")
            side = SELL if i.side == BUY else BUY
            self._submit(Intent(cid, decision_ts, TAKE_PROFIT, i.symbol, side, qty, LIMIT, i.take_profit, None,
                                i.time_in_force, kind=TAKE_PROFIT), result.take_profits, result)

    def _whole_take_profit(self, top_up: Intent, decision_ts: str, result: Reconciled) -> None:
        """A filled top-up's take-profit (:mod:`~marketcast.trade.loop.topup`): the loop's resting one was
        cancelled before it, so this one covers the whole free position, at the top-up's take-profit (its
        decision's: a stock's is not on the order), ``gtc`` so it rests as the cancelled one did; its id is
        (symbol, bar, take_profit@top_up@filled qty), so a restart re-finds it and a later fill level covers
        only what is new."""
        take_profit = json.loads(top_up.decision)["take_profit"] if top_up.decision else None
        if (take_profit is None or top_up.status != "submitted" or top_up.decision_ts != decision_ts
                or not self.scope(top_up.symbol)):
            return
        asset = self.assets([top_up.symbol])[top_up.symbol]
        filled = self.journal.filled_qty(top_up.client_order_id, TOP_UP)
        position = next((p for p in self.broker.positions() if p.symbol == top_up.symbol), None)
        qty = round_qty(0.0 if position is None or filled <= 0 else position.available, asset.qty_step)
        if qty <= 0 or qty < (asset.min_order_size or 0.0):
            return
        cid = client_order_id(top_up.symbol, decision_ts, f"{TAKE_PROFIT}@{TOP_UP}@{filled!r}")
        if self.journal.intent(cid) is not None:
            return
        side = SELL if top_up.side == BUY else BUY
        self._submit(Intent(cid, decision_ts, TAKE_PROFIT, top_up.symbol, side, qty, LIMIT, take_profit, None, GTC,
                            kind=TAKE_PROFIT), result.take_profits, result)

    def _submit(self, intent: Intent, sent: list[str], result: Reconciled) -> None:
        """Send a close or take-profit once the risk checks say the broker would take it: one off the venue's
        grid is refused; the loop's own orders it would wash against are cancelled and confirmed first; anything
        else in the way (a foreign order, pattern-day-trader protection) defers it to a later pass, with the
        reason."""
        try:
            verdict = self.checks.exit(intent)
            if verdict.waits:
                result.deferred[intent.symbol] = verdict.waits
                log.warning("%s: %s %s deferred: %s", intent.symbol, intent.kind, intent.client_order_id,
                            verdict.waits)
                return
            outcome = self.desk.send(verdict.order) if verdict.order is not None else \
                self.desk.refuse(intent, verdict.reasons)
        except BrokerError as exc:
            log.warning("%s: %s %s failed: %s", intent.symbol, intent.kind, intent.client_order_id, exc)
            return
        if outcome.outcome in ("submitted", "already"):
            sent.append(intent.client_order_id)
        queued = queued_until(self.assets([intent.symbol])[intent.symbol].asset_class, self.now, intent.decision_ts)
        log.info("%s: %s %s for %g: %s%s", intent.symbol, intent.kind, intent.client_order_id, intent.qty,
                 outcome.outcome, f"; queued to the next open at {queued}" if queued and outcome.outcome ==
                 "submitted" else "")
