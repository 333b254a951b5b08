"""The shadow: a candidate model that plans beside the live one on every cycle and orders nothing.

It is handed the bars and costs the live planner saw (never the broker), plans through a planner of the same
kind, and journals both models' decisions in ``shadow_decisions`` (one row per bar, symbol and role). A row
settles once the feed shows the next bar: its paper P&L is the side times the close-to-close return over that
bar, the backtest planner view's next-bar return (costs and limit fills are left out, for both models alike;
CRPS is not scored because the planner does not hand its samples out).

``promote`` swaps the active weights, one row of ``active_model`` written in one SQLite transaction together
with its ``promotions`` record, so a SIGKILL leaves the old row or the new one, never two or none. It swaps only
when the shadow beats the live model on paired per-decision P&L by a one-sided paired t-test
(``scipy.stats.ttest_rel(..., alternative="greater")``; Student 1908, scipy docs
https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.ttest_rel.html).
"""

from __future__ import annotations

import pandas as pd

from marketcast.backtest.orders import Costs
from marketcast.data.bars import Bars
from marketcast.trade.journal.db import transaction
from marketcast.trade.journal.shadow import Comparison, active_weights, compare, shadow_weights, swap
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.planner import Planner, Signal

__all__ = ["LIVE", "SHADOW", "Comparison", "Shadow", "active_weights", "compare", "promote", "settle",
           "shadow_weights", "swap"]

LIVE, SHADOW = "live", "shadow"


class Shadow:
    """Plans with ``planner`` (the candidate ``weights``) on the live loop's bars; journals, never orders.
    ``live`` names the live model's weights in the journal (the active ones once a promotion made them)."""

    def __init__(self, journal: Journal, planner: Planner, weights: str, live: str) -> None:
        self.journal, self.planner, self.weights, self.live = journal, planner, weights, live

    def observe(self, live: Signal, bars: Bars, costs: Costs, learn_from: str | None) -> Signal:
        """Settle what the new bars settle, then journal this bar's live and shadow decisions (a re-plan of
        the same bar keeps the first ones: the decision was made then)."""
        settle(self.journal, bars)
        candidate = self.planner.plan(bars, costs, learn_from)
        ts, close = bars.frame.index[-1].isoformat(), float(bars.frame["close"].iloc[-1])
        with transaction(self.journal.conn) as c:
            for role, model, s in ((LIVE, self.live, live), (SHADOW, self.weights, candidate)):
                c.execute("INSERT OR IGNORE INTO shadow_decisions (decision_ts, symbol, role, model, side, close) "
                          "VALUES (?, ?, ?, ?, ?, ?)", (ts, bars.symbol, role, model, int(s.decision.side), close))
        return candidate


def settle(journal: Journal, bars: Bars) -> int:
    """P&L of every unsettled decision on ``bars.symbol`` whose next bar is in ``bars``: side * (c[t+1]/c[t] - 1)."""
    rows = journal.conn.execute("SELECT decision_ts, role, side, close FROM shadow_decisions WHERE symbol = ? "
                                "AND pnl IS NULL", (bars.symbol,)).fetchall()
    index, closes = bars.frame.index, bars.frame["close"].to_numpy(dtype=float)
    done = []
    for ts, role, side, close in rows:
        i = int(index.searchsorted(pd.Timestamp(ts)))
        if i >= len(index) or index[i].isoformat() != ts or i + 1 >= len(index):
            continue
        done.append((side * (closes[i + 1] / close - 1.0), index[i + 1].isoformat(), ts, bars.symbol, role))
    if done:
        with transaction(journal.conn) as c:
            c.executemany("UPDATE shadow_decisions SET pnl = ?, settled_ts = ? WHERE decision_ts = ? AND symbol = ? "
                          "AND role = ?", done)
    return len(done)


def promote(journal: Journal, min_decisions: int = 60, alpha: float = 0.05) -> tuple[bool, str, Comparison]:
    """Swap to the shadow's weights when it has ``min_decisions`` paired settled decisions and beats the live
    model with p < ``alpha``; otherwise (False, why not with the statistics)."""
    result = compare(journal)
    weights = shadow_weights(journal)
    if weights is None:
        return False, "not promoted: no shadow decisions in this journal (run `trade run --shadow WEIGHTS`)", result
    if result.n < min_decisions:
        return False, f"not promoted: {result.n} of {min_decisions} decisions needed; {result.line()}", result
    if not (result.mean_diff > 0 and result.p < alpha):
        return False, f"not promoted: the shadow does not beat the live model (p >= {alpha:g}); {result.line()}", result
    swap(journal, weights, result)
    return True, f"promoted {weights}: {result.line()}", result
