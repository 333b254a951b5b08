"""The shadow's journal records, read and written below the loop (``trade status`` reads them too): the paired
comparison of the shadow's settled decisions with the live model's, and the one active model.

The comparison is a one-sided paired t-test on per-decision P&L (``scipy.stats.ttest_rel(shadow, live,
alternative="greater")``; Student 1908; https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.ttest_rel.html).
The active model is one row (``CHECK (slot = 1)``), replaced in the transaction that journals the promotion, so
a SIGKILL leaves the old row or the new one (https://www.sqlite.org/atomiccommit.html).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marketcast.errors import StateError
from marketcast.trade.journal.db import transaction
from marketcast.trade.journal.state import Journal, now


@dataclass(frozen=True)
class Comparison:
    """Paired settled decisions (the same bar and symbol, both models): P&L per decision and the test."""

    n: int
    live_pnl: float
    shadow_pnl: float
    mean_diff: float
    p: float

    def line(self) -> str:
        return (f"n={self.n} paired decisions, mean P&L difference (shadow - live) {self.mean_diff:+.6f}, "
                f"one-sided paired t-test p={self.p:.4g}")


def compare(journal: Journal) -> Comparison:
    """The latest shadow weights against the live model on the bars both decided on and that have settled
    (after a promotion: only bars where the live model was the active one)."""
    shadow, active = shadow_weights(journal), active_weights(journal)
    rows = journal.conn.execute(
        "SELECT l.pnl, s.pnl FROM shadow_decisions l JOIN shadow_decisions s ON s.decision_ts = l.decision_ts "
        "AND s.symbol = l.symbol AND s.role = 'shadow' WHERE l.role = 'live' AND l.pnl IS NOT NULL "
        "AND s.pnl IS NOT NULL AND s.model = ? AND (? IS NULL OR l.model = ?) ORDER BY l.decision_ts, l.symbol",
        (shadow, active, active)).fetchall()
    live = np.array([r[0] for r in rows], dtype=float)
    shadow = np.array([r[1] for r in rows], dtype=float)
    n = len(rows)
    diff = shadow - live
    p = math.nan
    if n >= 2:
        if np.allclose(diff, diff[0]):  # no spread: the t statistic is undefined; decide on the sign alone
            p = 0.0 if diff[0] > 0 else 1.0
        else:
            from scipy.stats import ttest_rel
            p = float(ttest_rel(shadow, live, alternative="greater").pvalue)
    return Comparison(n, float(live.sum()), float(shadow.sum()), float(diff.mean()) if n else 0.0, p)


def active_weights(journal: Journal) -> str | None:
    rows = journal.conn.execute("SELECT weights FROM active_model").fetchall()
    if len(rows) > 1:  # the CHECK makes this impossible; fail closed if the file was edited by hand
        raise StateError(f"{journal.path}: {len(rows)} active models; restore the journal from a backup")
    return rows[0][0] if rows else None


def shadow_weights(journal: Journal) -> str | None:
    row = journal.conn.execute("SELECT model FROM shadow_decisions WHERE role = 'shadow' "
                               "ORDER BY decision_ts DESC LIMIT 1").fetchone()
    return row[0] if row else None


def swap(journal: Journal, weights: str, result: Comparison) -> None:
    """Make ``weights`` the one active model: one row, replaced in the same transaction that journals it."""
    at = now()
    with transaction(journal.conn) as c:
        old = active_weights(journal)  # read inside the write lock: no other swap can come between
        c.execute("INSERT OR REPLACE INTO active_model (slot, weights, since) VALUES (1, ?, ?)", (weights, at))
        c.execute("INSERT INTO promotions (old, new, n_pairs, mean_diff, p, at) VALUES (?, ?, ?, ?, ?, ?)",
                  (old, weights, result.n, result.mean_diff, 0.0 if math.isnan(result.p) else result.p, at))
