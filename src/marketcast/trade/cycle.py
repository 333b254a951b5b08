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
from marketcast.trade.ids import PREFIX, client_order_id
from marketcast.trade.monitor import Monitor
from marketcast.trade.planner import Planner, Signal
from marketcast.trade.portfolio import Allocation, PortfolioConfig, allocate
from marketcast.trade.state import Intent, Journal, decision_json
from marketcast.trade.types import BUY, LIMIT, MARKET, SELL, OrderRequest, Quote

log = logging.getLogger("marketcast.trade")

BarFeed = Callable[[str], Bars]
"""``feed(symbol)`` -> bars up to and including the decision bar (never later ones)."""


@dataclass(frozen=True)
class LoopConfig:
    symbols: tuple[str, ...]
    gates: GateConfig = GateConfig()
    portfolio: PortfolioConfig = PortfolioConfig()
    add_latest: bool = False  # real bid/ask from the broker instead of bid = ask = close
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


class TradingLoop:
    """Owns no broker specifics: everything goes through :class:`Broker`, :class:`Planner`, the feed."""

    def __init__(self, broker: Broker, journal: Journal, planner: Planner, feed: BarFeed, config: LoopConfig,
                 monitor: Monitor | None = None, asset_classes: dict[str, str] | None = None) -> None:
        self.broker, self.journal, self.planner, self.feed = broker, journal, planner, feed
        self.config, self.monitor = config, monitor
        self.asset_classes = asset_classes or {}

    # ----------------------------------------------------------- reconcile
    def reconcile(self, decision_ts: str) -> tuple[int, int]:
        """Bring the journal in line with the broker before deciding; returns (new fills, cancelled).

        Pending intents the broker knows become ``submitted``; pending intents of an earlier bar that
        the broker never got are ``abandoned`` (their bar is gone); fills are copied; orders still open
        from an earlier bar are cancelled (every order lives one bar).
        """
        for intent in self.journal.pending():
            order = self.broker.order_by_client_id(intent.client_order_id)
            if order is not None:
                self.journal.mark(intent.client_order_id, "submitted", order.id)
            elif intent.decision_ts < decision_ts:
                self.journal.mark(intent.client_order_id, "abandoned", error="bar passed before submit")
        new_fills = self.journal.add_fills(self.broker.fills(since=self.journal.last_fill_ts()))
        cancelled = 0
        for order in self.broker.open_orders():
            intent = self.journal.intent(order.client_order_id)
            if order.client_order_id.startswith(PREFIX) and intent is not None and intent.decision_ts < decision_ts:
                self.broker.cancel(order.id)
                cancelled += 1
        cancelled += self._close_leftovers(decision_ts)
        return new_fills, cancelled

    def _close_leftovers(self, decision_ts: str) -> int:
        """A position left from an earlier bar (a live take-profit that did not trade) is closed at market,
        as the backtest closes at the bar's close: cancel its working orders (the take-profit leg), then
        send one market order whose id is derived from (close, symbol, bar, side), so a restart re-finds
        it. The paper broker never has such positions (it settles entry and exit in the same bar)."""
        ours = {i.symbol for i in self.journal.intents() if i.status == "submitted" and i.decision_ts < decision_ts}
        cancelled = 0
        for p in self.broker.positions():
            if p.symbol not in ours or p.symbol not in self.config.symbols or p.qty == 0:
                continue
            side = SELL if p.qty > 0 else BUY
            req = OrderRequest(p.symbol, side, abs(p.qty), client_order_id("close", p.symbol, decision_ts, side),
                               type=MARKET, time_in_force="gtc" if self.asset_classes.get(p.symbol) == "crypto"
                               else "day")
            for order in self.broker.open_orders():
                if order.symbol == p.symbol and order.client_order_id != req.client_order_id:
                    self.broker.cancel(order.id)
                    cancelled += 1
            try:
                _, new = submit_once(self.broker, req)
                if new:
                    log.info("%s: closed leftover position %g with %s", p.symbol, p.qty, req.client_order_id)
            except BrokerError as exc:
                log.warning("%s: could not close leftover position: %s", p.symbol, exc)
        return cancelled

    # ----------------------------------------------------------- quotes
    def quote(self, symbol: str, close: float) -> Quote | None:
        if not self.config.add_latest:
            log.info("%s: synthetic quote bid = ask = last close %.4f (ADD_LATEST off)", symbol, close)
            return Quote(symbol, close, close, source="synthetic")
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
        return None

    # ----------------------------------------------------------- plan
    def plan(self, decision_ts: str) -> CycleReport:
        """Everything up to the orders, without touching the broker's orders (``--dry-run`` stops here)."""
        report = CycleReport(decision_ts)
        account = self.broker.account()
        report.equity = account.equity
        candidates: list[Signal] = []
        crypto = frozenset(s for s in self.config.symbols if self.asset_classes.get(s) == "crypto")
        for symbol in self.config.symbols:
            bars = self.feed(symbol)
            close = float(bars.frame["close"].iloc[-1])
            q = self.quote(symbol, close)
            report.quotes[symbol] = "none" if q is None else ("synthetic" if q.source == "synthetic" else "real")
            spread = q.spread if q is not None and q.source != "synthetic" else 0.0
            costs = Costs.for_asset(bars.asset_class, self.config.fee, spread)
            signal = self.planner.plan(bars, costs)
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
            if intent is not None and intent.decision_ts == decision_ts:
                continue  # this cycle's own order from before a restart: re-derived, not extra
            held.add(o.symbol)
            exposure += o.qty * (o.limit_price or 0.0)
        return frozenset(held), exposure

    # ----------------------------------------------------------- orders
    def execute(self, report: CycleReport) -> None:
        for planned in report.planned:
            req, sig = planned.request, planned.signal
            d = sig.decision
            stored = self.journal.record_intent(Intent(
                req.client_order_id, sig.decision_ts, sig.strategy, req.symbol, req.side, req.qty, req.type,
                req.limit_price, req.take_profit, req.time_in_force,
                decision=decision_json(d.side, d.entry_limit, d.take_profit)))
            if stored.status != "pending":
                report.already.append(req.client_order_id)
                continue
            req = OrderRequest(stored.symbol, stored.side, stored.qty, stored.client_order_id, stored.type,
                               stored.limit_price, stored.take_profit, stored.time_in_force)
            try:
                existing = self.broker.order_by_client_id(req.client_order_id)
                if existing is not None:
                    self.journal.mark(req.client_order_id, "submitted", existing.id)
                    report.already.append(req.client_order_id)
                    continue
                self.journal.mark_attempt(req.client_order_id)
                order, new = submit_once(self.broker, req)
                self.journal.mark(req.client_order_id, "submitted", order.id)
                (report.submitted if new else report.already).append(req.client_order_id)
            except OrderRejected as exc:
                self.journal.mark(req.client_order_id, "rejected", error=str(exc))
                report.rejected[req.client_order_id] = str(exc)
                log.warning("%s rejected: %s", req.client_order_id, exc)
            except BrokerUnavailable as exc:
                report.unknown.append(req.client_order_id)  # stays pending; reconcile asks the broker
                log.warning("%s outcome unknown, will reconcile: %s", req.client_order_id, exc)

    # ----------------------------------------------------------- cycle
    def run_cycle(self, decision_ts: str, dry_run: bool = False) -> CycleReport:
        if dry_run:
            return self.plan(decision_ts)
        self.journal.start_cycle(decision_ts)
        filled, cancelled = self.reconcile(decision_ts)
        report = self.plan(decision_ts)
        report.filled, report.cancelled = filled, cancelled
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
        quotes = {"real": 0, "synthetic": 0, "none": 0}
        for src in r.quotes.values():
            quotes[src] += 1
        positions = {p.symbol: p.qty for p in self.broker.positions()}
        return {
            "decision_ts": r.decision_ts, "mode": self.config.mode, "broker": self.broker.name,
            "forecast_latency_s": latency,
            "compile_mode": next((m.get("compile_mode") for m in metas if "compile_mode" in m), None),
            "compiled": any(bool(m.get("compiled")) for m in metas),
            "fallbacks_to_eager": sum(1 for m in metas if m.get("fallback_reason")),
            "quotes": quotes, "orders_submitted": len(r.submitted), "orders_already": len(r.already),
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


