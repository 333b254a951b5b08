"""One pass of the loop: reconcile -> bars -> quotes -> plan -> gates -> portfolio -> orders -> record.

Crash safety comes from three rules: reconcile with the broker before deciding anything; every order
gets a deterministic ``client_order_id`` and a journal intent committed before the broker call; and an
order is only sent if neither the journal nor the broker already has that id. Re-running a cycle after a
kill therefore re-derives the same plan and sends only what is missing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from marketcast.backtest.orders import FLAT, LONG, Costs
from marketcast.data.bars import Bars
from marketcast.trade.broker import Broker, BrokerError, BrokerUnavailable, OrderRejected, submit_once
from marketcast.trade.gates import GateConfig, check_entry, dollar_volume
from marketcast.trade.ids import client_order_id
from marketcast.trade.monitor import Monitor
from marketcast.trade.planner import Planner, Signal
from marketcast.trade.portfolio import Allocation, PortfolioConfig, allocate
from marketcast.trade.state import Intent, Journal, decision_json
from marketcast.trade.types import BUY, LIMIT, MARKET, SELL, Order, OrderRequest, Quote

log = logging.getLogger("marketcast.trade")

BarFeed = Callable[[str], Bars]
"""``feed(symbol)`` -> bars up to and including the decision bar (never later ones)."""


@dataclass(frozen=True)
class LoopConfig:
    symbols: tuple[str, ...]
    gates: GateConfig = GateConfig()
    portfolio: PortfolioConfig = PortfolioConfig()
    add_latest: bool = False  # real bid/ask from the broker: mid as the last close, spread into costs
    quote_retries: int = 3
    quote_retry_wait_s: float = 0.5
    fee: float | None = None
    mode: str = "paper"


@dataclass
class PlannedOrder:
    signal: Signal
    request: OrderRequest
    gate_reasons: tuple[str, ...] = ()


@dataclass
class CycleReport:
    decision_ts: str
    signals: list[Signal] = field(default_factory=list)
    skipped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    planned: list[PlannedOrder] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    cancelled: int = 0
    filled: int = 0
    quotes: dict[str, str] = field(default_factory=dict)
    equity: float = 0.0
    record: dict = field(default_factory=dict)


def order_request(alloc: Allocation, strategy: str, decision_ts: str, crypto: bool) -> OrderRequest:
    """MaxDiff order: limit entry (market if no limit) with the take-profit attached, living one bar."""
    d = alloc.signal.decision
    side = BUY if d.side == LONG else SELL
    return OrderRequest(
        symbol=alloc.signal.symbol, side=side, qty=alloc.qty,
        client_order_id=client_order_id(strategy, alloc.signal.symbol, decision_ts, side),
        type=LIMIT if d.entry_limit is not None else MARKET, limit_price=d.entry_limit,
        take_profit=d.take_profit, time_in_force="gtc" if crypto else "day",
    )


def with_last_close(bars: Bars, price: float) -> Bars:
    """``bars`` with the decision bar's close replaced by ``price`` (a real quote's mid: ADD_LATEST), its
    high/low widened to contain it, so the forecast and the decision start from the live price."""
    frame = bars.frame.copy()
    t = frame.index[-1]
    frame.loc[t, ["close", "high", "low"]] = [price, max(frame.at[t, "high"], price), min(frame.at[t, "low"], price)]
    return Bars(bars.symbol, frame, bars.asset_class, bars.source)


class TradingLoop:
    """Owns no broker specifics: everything goes through :class:`Broker`, :class:`Planner`, the feed."""

    def __init__(self, broker: Broker, journal: Journal, planner: Planner, feed: BarFeed, config: LoopConfig,
                 monitor: Monitor | None = None, asset_classes: dict[str, str] | None = None) -> None:
        self.broker, self.journal, self.planner, self.feed = broker, journal, planner, feed
        self.config, self.monitor = config, monitor
        self.asset_classes = asset_classes or {}
        self._cancelled: set[str] = set()  # order ids this cycle's reconcile cancelled (or, dry, would cancel)

    # ----------------------------------------------------------- reconcile
    def reconcile(self, decision_ts: str, act: bool = True) -> tuple[int, int]:
        """Bring the journal in line with the broker before deciding; returns (orders newly filled, cancelled).

        Pending intents the broker knows become ``submitted``; pending intents of an earlier bar that
        the broker never got are ``abandoned`` (their bar is gone); fills are copied; orders still open
        from an earlier bar are cancelled (every order lives one bar); leftover positions are closed and
        take-profits the broker could not attach are sent. With ``act`` False (a dry run) nothing at the
        broker changes: the cancels and closes it would send are only counted and logged.
        """
        self._cancelled = set()
        for intent in self.journal.pending():
            order = self.broker.order_by_client_id(intent.client_order_id)
            if order is not None:
                self.journal.mark(intent.client_order_id, "submitted", order.id)
            elif intent.decision_ts < decision_ts:
                self.journal.mark(intent.client_order_id, "abandoned", error="bar passed before submit")
        open_orders = self.broker.open_orders()
        still_open = {o.id for o in open_orders}
        for c in self.journal.cancels("pending"):  # a kill after the cancel call: the order is gone now
            if c["order_id"] not in still_open:
                self.journal.mark_cancel(c["order_id"], "done")
        new_fills = self.journal.add_fills(self.broker.fills(since=self.journal.last_fill_ts()))
        cancelled = 0
        for order in open_orders:
            intent = self.journal.intent(order.client_order_id)
            if intent is not None and intent.decision_ts < decision_ts:
                cancelled += self._cancel(order, decision_ts, "its bar has passed", act)
        cancelled += self._close_leftovers(decision_ts, act)
        if act:
            self._take_profits(decision_ts)
        return new_fills, cancelled

    def _cancel(self, order: Order, decision_ts: str, reason: str, act: bool) -> int:
        """Cancel write-ahead (a ``pending`` row committed before the call, ``done``/``failed`` after);
        returns 1 if cancelled (or, dry, would be)."""
        if order.id in self._cancelled:
            return 0
        if not act:
            log.info("dry run: would cancel %s (%s): %s", order.client_order_id, order.symbol, reason)
            self._cancelled.add(order.id)
            return 1
        self.journal.record_cancel(order.id, order.client_order_id, order.symbol, decision_ts, reason)
        try:
            self.broker.cancel(order.id)
        except BrokerError as exc:
            self.journal.mark_cancel(order.id, "failed", str(exc))
            log.warning("%s: could not cancel %s: %s", order.symbol, order.client_order_id, exc)
            return 0
        self.journal.mark_cancel(order.id, "done")
        self._cancelled.add(order.id)
        return 1

    def _close_leftovers(self, decision_ts: str, act: bool) -> int:
        """A position left from an earlier bar (a live take-profit that did not trade) is closed at market,
        as the backtest closes at the bar's close: cancel its working orders (the take-profit leg), then
        send one market order whose id is derived from (close, symbol, bar, side) and journalled like an
        entry, so a restart re-finds it instead of closing twice. Returns the orders cancelled. The paper
        broker never has such positions (it settles entry and exit in the same bar)."""
        ours = {i.symbol for i in self.journal.intents() if i.status == "submitted" and i.decision_ts < decision_ts}
        cancelled = 0
        for p in self.broker.positions():
            if p.symbol not in ours or p.symbol not in self.config.symbols or p.qty == 0:
                continue
            side = SELL if p.qty > 0 else BUY
            cid = client_order_id("close", p.symbol, decision_ts, side)
            for order in self.broker.open_orders():
                if order.symbol == p.symbol and order.client_order_id != cid:
                    cancelled += self._cancel(order, decision_ts, "closing the leftover position", act)
            if not act:
                log.info("dry run: would close leftover %s position %g with %s", p.symbol, p.qty, cid)
                continue
            tif = "gtc" if self.asset_classes.get(p.symbol) == "crypto" else "day"
            try:
                outcome, _ = self._send(Intent(cid, decision_ts, "close", p.symbol, side, abs(p.qty), MARKET,
                                               None, None, tif, kind="close"))
            except BrokerError as exc:
                log.warning("%s: could not close leftover position: %s", p.symbol, exc)
                continue
            if outcome == "submitted":
                log.info("%s: closed leftover position %g with %s", p.symbol, p.qty, cid)
        return cancelled

    def _take_profits(self, decision_ts: str) -> None:
        """Send the take-profits of this bar's entries that the broker could not attach (Alpaca crypto).

        Each is a limit order at the entry's take-profit price for the filled quantity not yet covered,
        sent once the reconcile sees the fill, one per new fill level; its id comes from (take_profit,
        symbol, bar@filled qty, side), so a restart re-finds it. Like the entry, it lives until the next bar,
        whose reconcile cancels it and closes what is left at market.
        """
        intents = self.journal.intents()
        for t in intents:  # written ahead before a kill, never sent: send it now
            if t.kind == "take_profit" and t.status == "pending" and t.decision_ts == decision_ts:
                self._send(t)
        for i in intents:
            if (i.kind != "entry" or i.take_profit is None or i.status != "submitted"
                    or i.decision_ts != decision_ts or self.broker.attaches_take_profit(i.symbol)):
                continue
            filled = self.journal.filled_qty(i.client_order_id)
            covered = sum(t.qty for t in intents if t.kind == "take_profit" and t.symbol == i.symbol
                          and t.decision_ts == decision_ts and t.status not in ("rejected", "abandoned"))
            qty = round(filled - covered, 9)
            if qty <= 0:
                continue
            side = SELL if i.side == BUY else BUY
            cid = client_order_id("take_profit", i.symbol, f"{decision_ts}@{filled!r}", side)
            outcome, _ = self._send(Intent(cid, decision_ts, "take_profit", i.symbol, side, qty, LIMIT,
                                           i.take_profit, None, i.time_in_force, kind="take_profit"))
            log.info("%s: take-profit %s for %g at %g: %s", i.symbol, cid, qty, i.take_profit, outcome)

    # ----------------------------------------------------------- quotes
    def quote(self, symbol: str, close: float) -> Quote:
        """ADD_LATEST off: synthetic bid = ask = last close. On: the broker's quote, tried ``quote_retries``
        times; if none is usable the synthetic quote again (logged), so the cycle still decides."""
        synthetic = Quote(symbol, close, close, source="synthetic")
        if not self.config.add_latest:
            log.info("%s: synthetic quote bid = ask = last close %.4f (ADD_LATEST off)", symbol, close)
            return synthetic
        for attempt in range(1, self.config.quote_retries + 1):
            try:
                q = self.broker.latest_quote(symbol)
                if q is not None and q.bid > 0 and q.ask >= q.bid:
                    return q
                log.warning("%s: no usable quote (attempt %d/%d)", symbol, attempt, self.config.quote_retries)
            except BrokerError as exc:
                log.warning("%s: quote failed (attempt %d/%d): %s", symbol, attempt, self.config.quote_retries, exc)
            if attempt < self.config.quote_retries:
                time.sleep(self.config.quote_retry_wait_s)
        log.warning("%s: no quote after %d attempts; synthetic quote bid = ask = last close %.4f", symbol,
                    self.config.quote_retries, close)
        return synthetic

    # ----------------------------------------------------------- plan
    def plan(self, decision_ts: str) -> CycleReport:
        """Everything up to the orders, without touching the broker's orders (``--dry-run`` stops here).

        A real quote's mid replaces the decision bar's close and its spread (ask / bid - 1) goes into the
        costs; a synthetic quote leaves the bar as it is.
        """
        report = CycleReport(decision_ts)
        account = self.broker.account()
        report.equity = account.equity
        candidates: list[Signal] = []
        crypto = frozenset(s for s in self.config.symbols if self.asset_classes.get(s) == "crypto")
        learn_from = self.journal.first_cycle()
        for symbol in self.config.symbols:
            bars = self.feed(symbol)
            q = self.quote(symbol, float(bars.frame["close"].iloc[-1]))
            report.quotes[symbol] = "real" if q.source == "real" else "synthetic"
            if q.source == "real":
                bars = with_last_close(bars, q.mid)
            costs = Costs.for_asset(bars.asset_class, self.config.fee, q.spread)
            signal = self.planner.plan(bars, costs, learn_from)
            report.signals.append(signal)
            vol = bars.frame["volume"].to_numpy() if "volume" in bars.frame else np.zeros(len(bars))
            gate = check_entry(signal, q, dollar_volume(bars.frame["close"].to_numpy(), vol), self.config.gates)
            if gate.passed:
                candidates.append(signal)
            else:
                report.skipped[symbol] = gate.reasons
        held, exposure = self._held(decision_ts)
        for alloc in allocate(candidates, account.equity, self.config.portfolio, exposure, held, crypto):
            req = order_request(alloc, alloc.signal.strategy, alloc.signal.decision_ts, alloc.signal.symbol in crypto)
            report.planned.append(PlannedOrder(alloc.signal, req))
        return report

    def _held(self, decision_ts: str) -> tuple[frozenset[str], float]:
        """Symbols and gross exposure already committed: positions plus open orders of other bars."""
        held, exposure = set(), 0.0
        for p in self.broker.positions():
            held.add(p.symbol)
            exposure += abs(p.qty * p.avg_entry_price)
        for o in self.broker.open_orders():
            intent = self.journal.intent(o.client_order_id)
            if o.id in self._cancelled or (intent is not None and intent.decision_ts == decision_ts):
                continue  # being cancelled, or this cycle's own order from before a restart (re-derived)
            held.add(o.symbol)
            exposure += o.qty * (o.limit_price or 0.0)
        return frozenset(held), exposure

    # ----------------------------------------------------------- orders
    def _send(self, intent: Intent) -> tuple[str, str | None]:
        """Submit write-ahead: the intent is committed before the broker call and marked after it, and an id
        the journal or the broker already has is never sent again. Returns (outcome, error), outcome one of
        submitted | already | rejected | unknown (stays pending; the next reconcile asks the broker)."""
        stored = self.journal.record_intent(intent)
        if stored.status != "pending":
            return "already", None
        cid = stored.client_order_id
        req = OrderRequest(stored.symbol, stored.side, stored.qty, cid, stored.type, stored.limit_price,
                           stored.take_profit, stored.time_in_force)
        try:
            existing = self.broker.order_by_client_id(cid)
            if existing is not None:
                self.journal.mark(cid, "submitted", existing.id)
                return "already", None
            self.journal.mark_attempt(cid)
            order, new = submit_once(self.broker, req)
        except OrderRejected as exc:
            self.journal.mark(cid, "rejected", error=str(exc))
            log.warning("%s rejected: %s", cid, exc)
            return "rejected", str(exc)
        except BrokerUnavailable as exc:
            log.warning("%s outcome unknown, will reconcile: %s", cid, exc)
            return "unknown", str(exc)
        self.journal.mark(cid, "submitted", order.id)
        return ("submitted" if new else "already"), None

    def execute(self, report: CycleReport) -> None:
        for planned in report.planned:
            req, sig = planned.request, planned.signal
            d = sig.decision
            outcome, error = self._send(Intent(
                req.client_order_id, sig.decision_ts, sig.strategy, req.symbol, req.side, req.qty, req.type,
                req.limit_price, req.take_profit, req.time_in_force,
                decision=decision_json(d.side, d.entry_limit, d.take_profit)))
            if outcome == "rejected":
                report.rejected[req.client_order_id] = error or ""
            else:
                {"submitted": report.submitted, "already": report.already,
                 "unknown": report.unknown}[outcome].append(req.client_order_id)

    # ----------------------------------------------------------- cycle
    def run_cycle(self, decision_ts: str, dry_run: bool = False) -> CycleReport:
        """Reconcile, plan, send, record. ``dry_run`` reconciles without changing anything at the broker and
        plans, but sends nothing and records no cycle; it still brings the journal it is given up to date
        (the CLI hands a dry run a scratch copy of the state)."""
        if not dry_run:
            self.journal.start_cycle(decision_ts)
        filled, cancelled = self.reconcile(decision_ts, act=not dry_run)
        report = self.plan(decision_ts)
        report.filled, report.cancelled = filled, cancelled
        if dry_run:
            return report
        self.execute(report)
        self.journal.finish_cycle(decision_ts)
        if self.monitor is not None:
            report.record = self.monitor.record(**self._record_fields(report))
        return report

    def _record_fields(self, r: CycleReport) -> dict:
        metas = [s.forecast_meta for s in r.signals]
        latency: dict[str, float] = {}
        for s in r.signals:
            model = s.forecast_meta.get("model", self.planner.model)
            latency[model] = round(latency.get(model, 0.0) + s.forecast_latency_s, 6)
        quotes = {"real": 0, "synthetic": 0}
        for src in r.quotes.values():
            quotes[src] += 1
        fell_back = sorted({m.get("model", self.planner.model) for m in metas if m.get("fallback_reason")})
        positions = {p.symbol: p.qty for p in self.broker.positions()}
        return {
            "decision_ts": r.decision_ts, "mode": self.config.mode, "broker": self.broker.name,
            "forecast_latency_s": latency,
            "compile_mode": next((m.get("compile_mode") for m in metas if "compile_mode" in m), None),
            "compiled": any(bool(m.get("compiled")) for m in metas),
            "fallbacks_to_eager": len(fell_back), "eager_fallback_models": fell_back,
            "quotes": quotes, "quote_source": dict(r.quotes),
            "orders_submitted": len(r.submitted), "orders_already": len(r.already),
            "orders_filled": r.filled,
            "orders_cancelled": r.cancelled, "orders_rejected": len(r.rejected), "orders_unknown": len(r.unknown),
            "equity": r.equity, "positions": positions,
            "strategies": {s.symbol: s.strategy for s in r.signals},
            "skipped": {k: list(v) for k, v in r.skipped.items()},
        }


def describe(report: CycleReport) -> list[dict]:
    """The plan as rows (for ``--dry-run`` and the CLI table)."""
    rows = []
    planned = {p.signal.symbol: p.request for p in report.planned}
    for s in report.signals:
        req = planned.get(s.symbol)
        rows.append({
            "symbol": s.symbol, "strategy": s.strategy, "side": {1: "long", -1: "short", FLAT: "flat"}[s.decision.side],
            "entry": s.decision.entry_limit, "take_profit": s.decision.take_profit,
            "edge": s.metrics.get("edge"), "sharpe": s.metrics.get("sharpe"),
            "qty": req.qty if req else 0.0, "client_order_id": req.client_order_id if req else "",
            "why_not": "; ".join(report.skipped.get(s.symbol, ())),
        })
    return rows


