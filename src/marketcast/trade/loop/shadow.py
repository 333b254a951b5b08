"""The shadow: a candidate model that plans beside the live one on every cycle and orders nothing.

It is handed the bars and costs the live planner saw (never the broker), plans through a planner of the same
kind (the same model with other weights, or another model: ``trade run --shadow-model``), and journals both
models' decisions in ``shadow_decisions`` (one row per bar, symbol and role), each with its forecast of the next
close return at the planner's ``CLOSE_LEVELS`` quantiles. A row settles once the feed shows the next bar: its
paper P&L is the side times the close-to-close return over that bar, the backtest planner view's next-bar
return, and the return itself is kept, so ``trade status`` scores both models' CRPS and 80% coverage later
without running either model again. Each decision also journals what the backtest would charge it (``cost``:
:meth:`marketcast.backtest.orders.Costs.round_trip` of its side with the cycle's costs, 0 when flat: what the
backtest charges a decision held one bar); ``trade status`` shows P&L before costs, the promotion test after them.

``promote`` swaps the active weights, one row of ``active_model`` written in one SQLite transaction together
with its ``promotions`` record, so a SIGKILL leaves the old row or the new one, never two or none. It swaps only
when the shadow beats the live model on the chosen metric (paper P&L after costs, or the next close's quantile
CRPS) by the anytime-valid sequential test of :mod:`marketcast.trade.journal.sequential` on per-day differences:
it may be asked after every cycle without raising its false-promotion rate above alpha.
"""

from __future__ import annotations

import logging
import math

import pandas as pd

from marketcast.backtest.orders import Costs
from marketcast.data.bars import Bars
from marketcast.trade.journal.db import transaction
from marketcast.trade.journal.sequential import WARM_UP
from marketcast.trade.journal.shadow import (Comparison, Skill, Verdict, active_model, active_weights, compare,
                                             quantiles_json, record_error, shadow_model, shadow_weights, skill,
                                             swap, verdict)
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.planner import CLOSE_LEVELS, Planner, Signal

log = logging.getLogger("marketcast.trade")

__all__ = ["LIVE", "SHADOW", "Comparison", "Shadow", "Skill", "Verdict", "active_model", "active_weights", "compare",
           "promote", "settle", "shadow_model", "shadow_weights", "skill", "swap", "verdict"]

LIVE, SHADOW = "live", "shadow"


class Shadow:
    """Plans with ``planner`` (the candidate ``weights`` of the ``model`` named, None: the live ``--model``) on the
    live loop's bars; journals, never orders. ``live`` names the live model's weights in the journal (the active
    ones once a promotion made them), ``live_model`` its name.

    The candidate can never stop the live loop: anything its planning raises, a forecast that is not finite, or
    ``failed`` (why it could not be loaded) is journalled in ``shadow_errors`` for that bar, shown by ``trade
    status`` and alerted once (``alerts``, by :meth:`cycle`, edge-triggered until a cycle it decided on every
    symbol); the live decision is journalled all the same. The loop calls :meth:`cycle` after the live orders
    went out (:meth:`marketcast.trade.loop.cycle.TradingLoop.run_cycle`)."""

    def __init__(self, journal: Journal, planner: Planner | None, weights: str, live: str, model: str | None = None,
                 live_model: str | None = None, alerts=None, failed: str | None = None) -> None:
        self.journal, self.planner, self.weights, self.live = journal, planner, weights, live
        self.model, self.live_model, self.alerts, self.failed = model, live_model, alerts, failed
        self.last_error: str | None = None

    def _plan(self, bars: Bars, costs: Costs, learn_from: str | None) -> tuple[Signal | None, str | None]:
        """(the candidate's signal, None) or (None, why it has none)."""
        if self.failed is not None or self.planner is None:
            return None, self.failed or "no candidate planner"
        try:
            candidate = self.planner.plan(bars, costs, learn_from)
        except Exception as exc:  # noqa: BLE001 - whatever the candidate raises, the live loop goes on
            text = (str(exc).strip().splitlines() or [""])[0][:300]
            return None, f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        if not all(math.isfinite(q) for q in (candidate.close, *candidate.close_quantiles)):
            return None, "the forecast is not finite (NaN or inf)"
        return candidate, None

    def cycle(self, planned, clock: str = "") -> dict[str, str]:
        """:meth:`observe` each (live signal, bars, costs, learn_from) of one cycle; alert once when the candidate
        starts failing on this clock's cycles, again only after a cycle it decided on every symbol. The errors by
        symbol."""
        errors: dict[str, str] = {}
        for signal, bars, costs, learn_from in planned:
            if self.observe(signal, bars, costs, learn_from) is None:
                errors[bars.symbol] = self.last_error or ""
        if self.alerts is not None:
            first = next(iter(errors.values()), "")
            self.alerts.watch("shadow_error", f"{self.weights} {clock}".strip(), bool(errors),
                              f"shadow {self.weights} failed on {', '.join(errors)}: {first}; the live model trades "
                              f"on, the shadow's decisions are missing until it recovers", symbols=sorted(errors))
        return errors

    def observe(self, live: Signal, bars: Bars, costs: Costs, learn_from: str | None) -> Signal | None:
        """Settle what the new bars settle, then journal this bar's live and shadow decisions (a re-plan of
        the same bar keeps the first ones: the decision was made then); None when the candidate failed."""
        settle(self.journal, bars)
        candidate, error = self._plan(bars, costs, learn_from)
        ts, close = bars.frame.index[-1].isoformat(), float(bars.frame["close"].iloc[-1])
        roles = ((LIVE, self.live, self.live_model, live),) + (
            () if candidate is None else ((SHADOW, self.weights, self.model, candidate),))
        with transaction(self.journal.conn) as c:
            for role, model, name, s in roles:
                side = int(s.decision.side)
                c.execute("INSERT OR IGNORE INTO shadow_decisions (decision_ts, symbol, role, model, side, close, "
                          "quantiles, forecaster, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          (ts, bars.symbol, role, model, side, close,
                           quantiles_json(CLOSE_LEVELS, s.close_quantiles), name,
                           costs.round_trip(side) if side else 0.0))
        self.last_error = error
        if error is not None:
            log.warning("shadow %s on %s %s: %s (the live loop goes on)", self.weights, bars.symbol, ts, error)
            record_error(self.journal, ts, bars.symbol, self.weights, error)
        return candidate


def settle(journal: Journal, bars: Bars) -> int:
    """P&L of every unsettled decision on ``bars.symbol`` whose next bar is in ``bars``: side * (c[t+1]/c[t] - 1),
    and that return itself (what the journalled quantiles are scored against)."""
    rows = journal.conn.execute("SELECT decision_ts, role, side, close FROM shadow_decisions WHERE symbol = ? "
                                "AND pnl IS NULL", (bars.symbol,)).fetchall()
    index, closes = bars.frame.index, bars.frame["close"].to_numpy(dtype=float)
    done = []
    for ts, role, side, close in rows:
        i = int(index.searchsorted(pd.Timestamp(ts)))
        if i >= len(index) or index[i].isoformat() != ts or i + 1 >= len(index):
            continue
        ret = closes[i + 1] / close - 1.0
        done.append((side * ret, ret, index[i + 1].isoformat(), ts, bars.symbol, role))
    if done:
        with transaction(journal.conn) as c:
            c.executemany("UPDATE shadow_decisions SET pnl = ?, ret = ?, settled_ts = ? WHERE decision_ts = ? "
                          "AND symbol = ? AND role = ?", done)
    return len(done)


def promote(journal: Journal, min_decisions: int = 60, alpha: float = 0.05,
            metric: str = "pnl") -> tuple[bool, str, Verdict]:
    """Swap to the shadow's weights when it has ``min_decisions`` paired settled decisions and beats the live
    model on ``metric`` (``pnl``: daily paper P&L after costs; ``crps``: the next close's quantile CRPS) by the
    sequential test at level ``alpha`` (:mod:`marketcast.trade.journal.sequential`); otherwise (False, why not
    with the statistics). Safe to call after every cycle."""
    result = verdict(journal, metric, alpha)
    weights = shadow_weights(journal)
    if weights is None:
        return False, "not promoted: no shadow decisions in this journal (run `trade run --shadow WEIGHTS`)", result
    if result.n < min_decisions:
        return False, f"not promoted: {result.n} of {min_decisions} decisions needed; {result.line()}", result
    if not result.test.bet_days:
        return False, (f"not promoted: the test has not bet yet (its first {WARM_UP} days only estimate the "
                       f"downside, then it waits for a losing day and a positive mean); {result.line()}"), result
    if not result.test.passes:
        return False, (f"not promoted: the shadow does not beat the live model on {metric} (e-value below "
                       f"{result.test.threshold:g} = 1/alpha, or a mean difference <= 0); {result.line()}"), result
    swap(journal, weights, result, shadow_model(journal))
    return True, f"promoted {weights}: {result.line()}", result
