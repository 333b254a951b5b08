"""One pass of the loop: reconcile -> plan -> check -> submit -> record. Whether an order may go is asked of
the risk room once per order (:class:`~marketcast.trade.risk.check.RiskCheck`, one per loop, built here and
shared: entries ask it in :meth:`TradingLoop.check`, closes and take-profits in the reconciler's housekeeping,
a halt's exits in :mod:`~marketcast.trade.loop.exits`); what the loop owns, of ownership.

Crash safety comes from three rules: reconcile with the broker before deciding anything (and halt when the
two disagree, :mod:`~marketcast.trade.loop.reconcile`); every order gets a deterministic ``client_order_id``
keyed on (symbol, bar, role) and a journal intent committed before the broker call
(:mod:`~marketcast.trade.loop.orders`); and an order is only sent if neither the journal nor the broker already
has that id. Re-running a cycle after a kill, or re-planning the same bar, therefore re-derives the same
ids and sends only what is missing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from marketcast.backtest.execution import DEFAULT_EXIT
from marketcast.backtest.orders import FLAT, LONG, Costs
from marketcast.data.bars import Bars
from marketcast.data.calendar import infer_interval
from marketcast.errors import HaltedError
from marketcast.trade.interface import Broker
from marketcast.trade.risk.check import OrderContext, RiskCheck
from marketcast.trade.risk.freshness import SPACING_BARS, Freshness
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.journal.ids import ENTRY, client_order_id
from marketcast.trade.ops.monitor import Monitor
from marketcast.trade.loop.exits import HaltExits
from marketcast.trade.loop.orders import OrderDesk, entry_intent
from marketcast.trade.journal.state import request_of
from marketcast.trade.loop.ownership import Book
from marketcast.trade.loop.planner import Planner, Signal
from marketcast.trade.risk.precheck import PreCheck, unit_draw
from marketcast.trade.risk.portfolio import PortfolioConfig, allocate
from marketcast.trade.loop.quotes import quote, with_last_close
from marketcast.trade.loop.reconcile import Reconciled, Reconciler
from marketcast.trade.loop.topup import top_ups
from marketcast.trade.risk.limits import RESUME, RISK, RiskGuard, RiskLimits, day_of
from marketcast.trade.risk.protections import opening_draw
from marketcast.trade.risk.rules import round_price
from marketcast.trade.journal.state import Intent, Journal
from marketcast.trade.types import BUY, SELL, Account

log = logging.getLogger("marketcast.trade")

BarFeed = Callable[[str], Bars]
"""``feed(symbol)`` -> bars up to and including the decision bar (never later ones)."""

RESOLVE = "marketcast trade reconcile --accept-broker (with this run's --state-dir and broker flags)"


@dataclass(frozen=True)
class LoopConfig:
    symbols: tuple[str, ...]
    gates: GateConfig = GateConfig()
    portfolio: PortfolioConfig = PortfolioConfig()
    risk: RiskLimits = RiskLimits()
    freshness: Freshness = Freshness()
    add_latest: bool = False  # real bid/ask from the broker: mid as the last close, spread into costs
    quote_retries: int = 3
    quote_retry_wait_s: float = 0.5
    fee: float | None = None
    mode: str = "paper"
    cancel_wait_s: float = 10.0  # how long a cancel confirmation is awaited before a close
    resolve: str = RESOLVE  # the command that lifts a reconcile halt, as the user should type it
    resume: str = RESUME  # ... and the one that lifts a risk halt
    # hold what earlier bars left while the bar's decision is still on its side, its take-profit resting (a
    # holding replay); False: every leftover is closed at the next decision
    hold_agreeing: bool = False
    # where a position leaves (marketcast.backtest.execution): `close` exits a stock on daily bars at its entry's
    # session close by a cls order (marketcast.trade.loop.on_close), `next-open` at the next decision
    exit: str = DEFAULT_EXIT


@dataclass
class CycleReport:
    decision_ts: str
    clock: str = ""  # the market clock this cycle decided for ('' : every symbol)
    signals: list[Signal] = field(default_factory=list)
    skipped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    gated: dict[str, tuple[str, ...]] = field(default_factory=dict)  # stale data or a gate: no new exposure at all
    top_ups: list[str] = field(default_factory=list)  # held positions bought up to the bar's target (hold_agreeing)
    planned: list[Intent] = field(default_factory=list)
    kept: dict[str, Intent] = field(default_factory=dict)  # symbol -> this bar's entry already journalled
    refused: dict[str, str] = field(default_factory=dict)  # client_order_id -> why no valid order exists
    restrictions: dict[str, str] = field(default_factory=dict)  # what the account's flags forbid (Account)
    not_sent: list[tuple[Intent, tuple[str, ...]]] = field(default_factory=list, repr=False)
    submitted: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    reconciled: Reconciled = field(default_factory=Reconciled)
    quotes: dict[str, str] = field(default_factory=dict)
    foreign: dict[str, dict] = field(default_factory=dict)
    equity: float = 0.0
    buying_power: float = 0.0
    account: Account | None = None  # what plan and check saw
    asks: dict[str, float] = field(default_factory=dict)  # the ask each entry is valued at (synthetic: the close)
    bids: dict[str, float] = field(default_factory=dict)  # ... and the bid (a market sell's base price)
    risk_breach: str | None = None  # an entry beyond a notional limit (sizing should never make one)
    record: dict = field(default_factory=dict)
    planned_on: dict = field(default_factory=dict, repr=False)  # symbol -> (signal, bars, costs, learn_from)

    @property
    def cancelled(self) -> int:
        return self.reconciled.cancelled

    @property
    def filled(self) -> int:
        return self.reconciled.filled


class TradingLoop:
    """Owns no broker specifics: everything goes through :class:`Broker`, :class:`Planner`, the feed."""

    def __init__(self, broker: Broker, journal: Journal, planner: Planner, feed: BarFeed, config: LoopConfig,
                 monitor: Monitor | None = None, asset_classes: dict[str, str] | None = None) -> None:
        self.broker, self.journal, self.planner, self.feed = broker, journal, planner, feed
        self._config, self.monitor = config, monitor
        self.asset_classes = asset_classes or {}
        self.desk = OrderDesk(broker, journal, config.cancel_wait_s, admit=self._admit)
        self.reconciler = Reconciler(broker, journal, self.desk, config.resolve)
        self.reconciler.keeps = self._agrees
        self.reconciler.on_close = self._exits_on_close
        self.reconciler.leaves_at_close = self._held_to_the_close
        self._signals: dict[str, tuple[str, Signal]] = {}  # symbol -> (decision bar, its signal) (hold_agreeing)
        self.risk = RiskGuard(journal, config.risk, config.resume)
        # the loop's one set of checks, asked of every entry, close, take-profit and halt exit
        self.checks = RiskCheck(broker, PreCheck(broker, journal, self.desk), self.risk, self.desk, config.freshness,
                                config.gates)
        self.exits = HaltExits(broker, journal, self.desk, lambda: self.reconciler._read(Reconciled())[0],
                               self.reconciler.assets, self.checks)
        self.risk.keeper = self.exits  # a halt keeps the exits of what the loop holds, asked of the same checks
        self.seen: dict[str, str] = {}  # symbol -> the last bar the loop decided on (data must not go back)
        self.shadow = None  # a trade.loop.shadow.Shadow: plans on the same bars, journals, never orders

    @property
    def config(self) -> LoopConfig:
        return self._config

    @config.setter
    def config(self, config: LoopConfig) -> None:
        """A new config reaches the loop's one :class:`RiskCheck` too (its freshness and gates)."""
        self._config = config
        self.checks.freshness, self.checks.gates = config.freshness, config.gates

    # ----------------------------------------------------------- clocks
    def clock_of(self, symbol: str) -> str:
        """The market clock ``symbol`` decides on: its asset class (crypto 24/7, stock NYSE, forex 24/5)."""
        return self.asset_classes.get(symbol) or self.broker.asset(symbol).asset_class

    def clocks(self) -> dict[str, tuple[str, ...]]:
        """The configured symbols by clock: each clock has cycles of its own, on its own bars, so a crypto bar
        on a Saturday is decided on at once and a stock is never decided on at a crypto bar's time."""
        out: dict[str, tuple[str, ...]] = {}
        for s in self.config.symbols:
            out[self.clock_of(s)] = out.get(self.clock_of(s), ()) + (s,)
        return out

    # ----------------------------------------------------------- the exit rule
    def _closing_auction(self, symbol: str) -> bool:
        """Whether ``symbol``'s positions leave by a ``cls`` order at a session's close: exit rule ``close``, a
        stock, daily bars (each is its session's last; an intraday stock bar and 24/7 bars have no closing
        auction after them and exit at the next decision)."""
        if self.config.exit != "close" or self.clock_of(symbol) != "stock":
            return False
        return infer_interval(self.feed(symbol).frame.index[-SPACING_BARS:]).kind == "daily"

    def _exits_on_close(self, symbol: str) -> bool:
        """Whether ``symbol``'s entries leave at their own session's close (:meth:`_closing_auction`, not holding
        on: a held position leaves at the close of the session after the decision that turns,
        :attr:`Reconciler.leaves_at_close`)."""
        return not self.config.hold_agreeing and self._closing_auction(symbol)

    def _held_to_the_close(self, symbol: str) -> bool:
        """Holding on under exit rule ``close`` (:meth:`_closing_auction`): a position is held overnight while the
        decisions agree, its take-profit a ``gtc`` leg resting across sessions, and it leaves by a ``cls`` order
        in the session after the decision that turns (:func:`~marketcast.trade.loop.on_close.leave_at_the_close`)."""
        return self.config.hold_agreeing and self._closing_auction(symbol)

    # ----------------------------------------------------------- holding on
    def _agrees(self, symbol: str, decision_ts: str, qty: float) -> bool:
        """With ``hold_agreeing``: whether the decision on ``symbol`` at ``decision_ts`` is on the side of the
        loop's ``qty`` (then what earlier bars left is held on, not closed). Decided on the bars up to
        ``decision_ts`` only, as the cycle's plan decides (the same signal, kept for it), so a look while a
        later bar trades, or a restart, reaches the same answer."""
        if not self.config.hold_agreeing:
            return False
        side = self._signal_at(symbol, decision_ts).decision.side
        return side != FLAT and (side == LONG) == (qty > 0)

    def _signal_at(self, symbol: str, decision_ts: str) -> Signal:
        bars = self.feed(symbol)
        bars = bars.rows(0, int(bars.frame.index.searchsorted(pd.Timestamp(decision_ts), side="right")))
        bar = bars.frame.index[-1].isoformat()
        kept = self._signals.get(symbol)
        if kept is None or kept[0] != bar:
            kept = (bar, self.planner.plan(bars, self._costs(bars), self.journal.first_cycle()))
            self._signals[symbol] = kept
        return kept[1]

    def _costs(self, bars: Bars, spread: float | None = None) -> Costs:
        """What the broker charges on ``bars``' asset class (the paper broker's settings), a real quote's
        ``spread`` over its own."""
        fee = self.config.fee if self.config.fee is not None else self.broker.fee_for(bars.asset_class)
        overrides = {**self.broker.cost_overrides(bars.asset_class), **({"spread": spread} if spread is not None else {})}
        return Costs.for_asset(bars.asset_class, fee, periods_per_year=bars.periods_per_year, **overrides)

    # ----------------------------------------------------------- reconcile
    def reconcile(self, decision_ts: str, act: bool = True, now=None, clock: str = "") -> Reconciled:
        """Halted, or journal and broker disagree: :class:`HaltedError` (exit 5), nothing touched. Else
        sync; a daily loss beyond the limit trips the risk halt (``act``); then cancel/close/take-profit what
        earlier bars left (``act`` False: only logged). Also what a watch between two bars does."""
        self.desk.cancelled = set()
        self.risk.begin(day_of(now, decision_ts))
        halts = self.journal.halts.active()
        if halts:
            raise self._halted(decision_ts, halts, act)
        result = Reconciled()
        disagreements = self.reconciler.compare(decision_ts, result)
        if disagreements:
            raise self.reconciler.halt(disagreements)
        if act:
            breach = self.risk.equity_breach(self.broker.account().equity)
            if breach:
                raise self.risk.trip(breach, self.broker, self.desk, decision_ts)
        self.reconciler.housekeep(decision_ts, result, self.checks, act,
                                  lambda s: not clock or self.clock_of(s) == clock, now)
        return result

    def _halted(self, decision_ts: str, halts: list, act: bool) -> HaltedError:
        """A look while halted trades nothing new. Under risk halts alone (never while journal and broker
        disagree: then nothing is touched) it syncs with the broker and keeps the exits of what the loop holds
        (:meth:`RiskGuard.hold`); a dry run only refuses."""
        if act and all(h.source == RISK for h in halts):
            result = Reconciled()
            disagreements = self.reconciler.compare(decision_ts, result)
            if disagreements:
                return self.reconciler.halt(disagreements)
            self.risk.hold(decision_ts, halts[0])
        return HaltedError(halts[0].message())

    def _admit(self, intent: Intent) -> None:
        """Every order's last check before it goes out: the order-count limits."""
        breach = self.checks.admit(intent)
        if breach:
            self.journal.mark(intent.client_order_id, "refused", error=f"risk limit: {breach}")
            raise self.risk.trip(breach, self.broker, self.desk, intent.decision_ts)

    # ----------------------------------------------------------- plan
    def plan(self, decision_ts: str, book: Book, account: Account, now=None,
             symbols: tuple[str, ...] | None = None) -> CycleReport:
        """Signals, gates and sizing up to the orders, touching nothing (``--dry-run`` stops after check).

        A real quote's mid replaces the decision bar's close and its spread (ask / bid - 1) goes into the
        costs. A symbol whose entry for this bar is journalled keeps it (a re-plan never adds a second);
        one the loop holds or has working orders on is skipped, and so is an entry against a foreign
        position (it would trade shares the loop did not buy), or on data that is stale at ``now``, went
        back in time, or a quote too old or too wide (:mod:`~marketcast.trade.risk.freshness`).
        """
        report = CycleReport(decision_ts)
        report.equity, report.buying_power, report.account = account.equity, account.buying_power, account
        self.desk.account = account  # the figures each entry is checked against, journalled with it
        symbols = symbols or self.config.symbols
        assets = self.reconciler.assets(symbols)
        report.foreign = book.foreign(assets)
        learn_from = self.journal.first_cycle()
        wanted = self.config.add_latest and self.broker.has_quotes
        candidates, prices = [], {}
        for symbol in symbols:
            bars = self.feed(symbol)
            q = quote(self.broker, symbol, float(bars.frame["close"].iloc[-1]), self.config.add_latest,
                      self.config.quote_retries, self.config.quote_retry_wait_s)
            report.quotes[symbol] = "real" if q.source == "real" else "synthetic"
            last = float(bars.frame["close"].iloc[-1])
            report.asks[symbol], report.bids[symbol] = max(q.ask, last), min(q.bid, last)  # the far side
            if q.source == "real":
                bars = with_last_close(bars, q.mid)
            costs = self._costs(bars, q.spread if q.source == "real" else None)
            kept = self._signals.get(symbol) if q.source != "real" else None  # decided already to hold on
            signal = kept[1] if kept is not None and kept[0] == bars.frame.index[-1].isoformat() else \
                self.planner.plan(bars, costs, learn_from)
            report.signals.append(signal)
            report.planned_on[symbol] = (signal, bars, costs, learn_from)  # the shadow's, after the orders
            stale = self.checks.stale(symbol, bars, q, now, self.seen.get(symbol), wanted)
            self.seen[symbol] = max(self.seen.get(symbol, ""), bars.frame.index[-1].isoformat())
            existing = self.journal.intent(client_order_id(symbol, decision_ts, ENTRY))
            if existing is not None:
                report.kept[symbol] = existing
                continue
            conflicts = book.entry_conflicts(symbol, signal.decision.side, assets)
            reasons = self.checks.entry(signal, bars, stale, conflicts)
            report.gated[symbol] = tuple(r for r in reasons if r not in conflicts)
            if reasons:
                report.skipped[symbol] = tuple(reasons)
                continue
            d = signal.decision
            prices[symbol] = round_price(d.entry_limit if d.entry_limit is not None else signal.close,
                                         assets[symbol], BUY if d.side == LONG else SELL)
            candidates.append(signal)
        held, exposure = book.committed(assets)
        steps = {s: a.qty_step for s, a in assets.items()}
        power = {s.symbol: account.buying_power_for(assets[s.symbol].crypto) for s in candidates}
        draws = {s.symbol: unit_draw(s.decision.side == LONG, None if s.decision.entry_limit is None
                                     else prices[s.symbol], report.asks[s.symbol], assets[s.symbol].crypto)
                 for s in candidates}
        for alloc in allocate(candidates, account.equity, self.config.portfolio, exposure, held, steps, prices,
                              self.config.risk.entry_cap, power, draws):
            crypto = assets[alloc.signal.symbol].crypto
            report.planned.append(entry_intent(alloc.signal, alloc.qty, decision_ts,
                                               crypto or self._held_to_the_close(alloc.signal.symbol)))
        return report

    # ----------------------------------------------------------- check
    def check(self, report: CycleReport) -> None:
        """Each planned order on the broker's grid (:func:`~marketcast.trade.risk.rules.conform`), then asked of
        the broker's rules model (:func:`~marketcast.trade.risk.protections.refusals`) with the account and
        the working orders the broker shows now: shorts, free quantity, buying power left after the orders
        before it (crypto: the non-marginable one), wash trades (a queued close, a foreign order), pattern-day-
        trader protection, the take-profit's base price. An order the model refuses moves to ``refused`` with
        the reasons and is never sent. An entry beyond a notional risk limit is refused too and, outside a dry
        run, trips the limit (sizing keeps entries inside them)."""
        book = report.reconciled.book
        positions = book.positions
        closes = {s.symbol: s.close for s in report.signals}
        account = report.account or self.broker.account()
        report.restrictions = account.restrictions()
        if report.restrictions:  # the flags are read before each cycle: one line, an alert (cycle_alerts)
            log.warning("account restricted: %s; the orders it forbids are refused, never sent",
                        "; ".join(report.restrictions.values()))
        orders = self.broker.open_orders() if report.planned else []  # closes sent since the book was read too
        spent, valid = 0.0, []
        for intent in report.planned:
            p = positions.get(intent.symbol)
            ask = report.asks.get(intent.symbol, closes[intent.symbol])
            held = abs(book.owned.get(intent.symbol, 0.0)) * (0.0 if p is None else p.avg_entry_price)
            context = OrderContext(account, orders, p, ask, report.bids.get(intent.symbol, ask), closes[intent.symbol],
                                   spent, held)
            verdict = self.checks.order(intent, context)
            if verdict.reasons:
                report.refused[intent.client_order_id] = verdict.refusal
                report.not_sent.append((intent, verdict.reasons))
                continue
            conformed = verdict.order
            if verdict.changes:
                log.info("%s %s conformed: %s", intent.symbol, intent.client_order_id, ", ".join(verdict.changes))
            if verdict.breach:
                report.risk_breach = report.risk_breach or verdict.breach
                report.refused[intent.client_order_id] = verdict.refusal
                continue
            spent += opening_draw(request_of(conformed), 0.0 if p is None else p.qty, ask,
                                  self.broker.asset(intent.symbol).crypto)
            valid.append(conformed)
        report.planned = valid

    # ----------------------------------------------------------- submit
    def execute(self, report: CycleReport) -> None:
        for intent, reasons in report.not_sent:
            self.desk.refuse(intent, reasons)
        pending = [i for i in report.kept.values() if i.status == "pending"]  # written ahead before a kill
        for intent in pending + report.planned:
            sent = self.desk.send(intent)
            if sent.outcome == "rejected":
                report.rejected[sent.client_order_id] = sent.error or ""
            elif sent.outcome in ("submitted", "already", "unknown"):
                getattr(report, sent.outcome).append(sent.client_order_id)

    # ----------------------------------------------------------- cycle
    def run_cycle(self, decision_ts: str, dry_run: bool = False, now=None, clock: str = "") -> CycleReport:
        """Reconcile, plan, check, submit, record; ``now`` (the loop's clock) makes stale data and old quotes
        count. ``dry_run`` reconciles without changing anything at the broker, plans and checks, but sends
        nothing and records no cycle; it still brings the journal it is given up to date (the CLI hands a dry
        run a scratch copy of the state). A cycle of one market's ``clock`` (:meth:`clocks`) decides and
        housekeeps only that market's symbols; ``''`` decides for every symbol at once."""
        if not dry_run:
            self.journal.start_cycle(decision_ts, clock)
        reconciled = self.reconcile(decision_ts, act=not dry_run, now=now, clock=clock)
        symbols = self.clocks().get(clock, ()) if clock else None
        report = self.plan(decision_ts, reconciled.book, self.broker.account(), now, symbols)
        report.clock = clock
        report.reconciled = reconciled
        self.check(report)
        if dry_run:
            return report
        if report.risk_breach:
            raise self.risk.trip(report.risk_breach, self.broker, self.desk, decision_ts)
        self.execute(report)
        if self.config.hold_agreeing:  # what is held on is bought up to this bar's target, after the entries
            report.top_ups = top_ups(self, report)
        if self.shadow is not None:  # after the live orders went out: the candidate never delays or stops them
            self.shadow.cycle(report.planned_on.values(), clock)
        if self.monitor is not None:  # recorded before the cycle is done: a failed write re-runs the bar
            report.record = self.monitor.record(**self._record_fields(report, now))
        self.journal.finish_cycle(decision_ts, clock)
        return report

    def _record_fields(self, r: CycleReport, now) -> dict:
        metas = [s.forecast_meta for s in r.signals]
        latency: dict[str, float] = {}
        slowest: dict[str, float] = {}
        for s in r.signals:
            model = s.forecast_meta.get("model", self.planner.model)
            latency[model] = round(latency.get(model, 0.0) + s.forecast_latency_s, 6)
            slowest[model] = round(max(slowest.get(model, 0.0), s.forecast_latency_s), 6)
        quotes = {"real": 0, "synthetic": 0}
        for src in r.quotes.values():
            quotes[src] += 1
        fell_back = sorted({m.get("model", self.planner.model) for m in metas if m.get("fallback_reason")})
        positions = {p.symbol: p.qty for p in self.broker.positions()}
        return {
            "decision_ts": r.decision_ts, "clock": r.clock, "now": None if now is None else str(now), "mode": self.config.mode,
            "broker": self.broker.name, "endpoint": self.broker.endpoint, "forecast_latency_s": latency,
            "forecast_latency_max_s": slowest,
            "compile_mode": next((m.get("compile_mode") for m in metas if "compile_mode" in m), None),
            "compiled": any(bool(m.get("compiled")) for m in metas),
            "fallbacks_to_eager": len(fell_back), "eager_fallback_models": fell_back,
            "quotes": quotes, "quote_source": dict(r.quotes),
            "orders_submitted": len(r.submitted), "orders_already": len(r.already),
            "orders_filled": r.filled, "orders_cancelled": r.cancelled, "orders_rejected": len(r.rejected),
            "orders_refused": len(r.refused), "broker_refusals": self.journal.rejected_count(), "orders_unknown": len(r.unknown), "closes": len(r.reconciled.closes),
            "refused": dict(r.refused), "rejected": dict(r.rejected), "deferred_closes": dict(r.reconciled.deferred),
            "equity": r.equity, "positions": positions, "foreign": r.foreign,
            "unexpected": r.reconciled.book.unexpected(self.reconciler.assets(())) if r.reconciled.book else {},
            "strategies": {s.symbol: s.strategy for s in r.signals},
            "chosen": {s.symbol: {"strategy": s.strategy, "pinned": s.pinned, "return": s.metrics.get("total_return"),
                                  "sharpe": s.metrics.get("sharpe"), "max_drawdown": s.metrics.get("max_drawdown"),
                                  "size": s.size,
                                  # kelly / cvar: the picked strategy's measured skill (marketcast.backtest.sizing)
                                  **{k: s.metrics[k] for k in ("warming_up", "skill") if k in s.metrics}}
                       for s in r.signals},
            "skipped": {k: list(v) for k, v in r.skipped.items()},
            **({"account_restrictions": dict(r.restrictions)} if r.restrictions else {}),
            **({"top_ups": list(r.top_ups)} if r.top_ups else {}),
        }


def describe(report: CycleReport) -> list[dict]:
    """The plan as rows (for ``--dry-run`` and the CLI table): one per symbol, with why nothing is sent."""
    rows = []
    planned = {p.symbol: p for p in report.planned}
    refused = {cid: why for cid, why in report.refused.items()}
    for s in report.signals:
        req = planned.get(s.symbol) or report.kept.get(s.symbol)
        cid = req.client_order_id if req else client_order_id(s.symbol, report.decision_ts, ENTRY)
        why = list(report.skipped.get(s.symbol, ()))
        if cid in refused:
            why.append(f"refused: {refused[cid]}")
        if s.symbol in report.kept:
            why.append(f"kept: this bar's entry is already {report.kept[s.symbol].status}")
        if s.symbol in report.foreign:
            f = report.foreign[s.symbol]
            why.append(f"foreign (untouched): position {f['position']:g}, {len(f['orders'])} order(s)")
        rows.append({
            "symbol": s.symbol, "strategy": s.strategy + (" (pinned)" if s.pinned else ""),
            "side": {1: "long", -1: "short", FLAT: "flat"}[s.decision.side],
            "entry": req.limit_price if req else s.decision.entry_limit,
            "take_profit": req.take_profit if req else s.decision.take_profit,
            "edge": s.metrics.get("edge"), "sharpe": s.metrics.get("sharpe"),
            "qty": req.qty if req else 0.0, "client_order_id": cid if (req or cid in refused) else "",
            "why_not": "; ".join(why),
        })
    return rows
