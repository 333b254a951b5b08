"""The shadow's journal records, read and written below the loop (``trade status`` reads them too): the paired
comparison of the shadow's settled decisions with the live model's, and the one active model.

``trade status``'s comparison is a one-sided paired t-test on per-decision P&L before costs
(``scipy.stats.ttest_rel(shadow, live, alternative="greater")``; Student 1908;
https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.ttest_rel.html). A promotion decides on
:func:`verdict` instead: the anytime-valid sequential test of :mod:`marketcast.trade.journal.sequential` on
per-day differences, P&L after costs. The active model is one row (``CHECK (slot = 1)``), replaced in the
transaction that journals the promotion, so a SIGKILL leaves the old row or the new one
(https://www.sqlite.org/atomiccommit.html).

Skill and calibration (:func:`skill`) score each model's journalled horizon-1 close-return quantiles against the
settled return, on the same paired bars: the quantile CRPS (:func:`marketcast.calibrate.crps.crps_quantiles`,
Gneiting & Raftery 2007) and the 80% central interval's coverage (the 0.1 and 0.9 quantiles, knots of the
planner's levels).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from marketcast.errors import StateError
from marketcast.trade.journal import sequential
from marketcast.trade.journal.db import transaction
from marketcast.trade.journal.sequential import Sequential
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


METRICS = ("pnl", "crps")  # what `trade promote --metric` may decide on


@dataclass(frozen=True)
class Verdict:
    """The test a promotion decides on (:mod:`marketcast.trade.journal.sequential`): ``n`` paired decisions,
    ``test`` on their per-day sums; ``mean_diff`` is the mean daily difference, > 0 when the shadow is better (P&L
    after costs: shadow - live; CRPS: live - shadow, lower being better); ``p`` = min(1, 1 / e-value) with a positive
    mean (else 1), an anytime-valid p-value for "the shadow is better" (what the promotions table keeps)."""

    metric: str
    n: int
    test: Sequential

    @property
    def mean_diff(self) -> float:
        return self.test.mean

    @property
    def p(self) -> float:
        return min(1.0, 1.0 / self.test.e_value) if self.test.mean > 0 else 1.0

    def line(self) -> str:
        what = ("daily P&L after costs (shadow - live)" if self.metric == "pnl"
                else "daily CRPS (live - shadow; > 0: the shadow forecasts better)")
        return f"n={self.n} paired decisions on {what}; {self.test.line()}"


def daily_differences(journal: Journal, metric: str = "pnl") -> tuple[int, np.ndarray]:
    """(paired decisions, one difference a day, oldest first): every symbol's paired decisions of one day (the
    decision bar's date) summed into one observation, since same-day decisions across symbols move together.
    P&L is after each decision's journalled cost (none for rows journalled before costs were)."""
    shadow, active = shadow_weights(journal), active_weights(journal)
    if metric == "pnl":
        rows = journal.conn.execute(
            "SELECT substr(l.decision_ts, 1, 10), (s.pnl - COALESCE(s.cost, 0)) - (l.pnl - COALESCE(l.cost, 0)) "
            "FROM shadow_decisions l JOIN shadow_decisions s ON s.decision_ts = l.decision_ts AND s.symbol = l.symbol "
            "AND s.role = 'shadow' WHERE l.role = 'live' AND l.pnl IS NOT NULL AND s.pnl IS NOT NULL AND s.model = ? "
            "AND (? IS NULL OR l.model = ?) ORDER BY l.decision_ts, l.symbol", (shadow, active, active)).fetchall()
    else:
        rows = journal.conn.execute(
            "SELECT substr(l.decision_ts, 1, 10), l.quantiles, s.quantiles, l.ret FROM shadow_decisions l JOIN "
            "shadow_decisions s ON s.decision_ts = l.decision_ts AND s.symbol = l.symbol AND s.role = 'shadow' WHERE "
            "l.role = 'live' AND l.ret IS NOT NULL AND l.quantiles IS NOT NULL AND s.quantiles IS NOT NULL AND "
            "s.model = ? AND (? IS NULL OR l.model = ?) ORDER BY l.decision_ts, l.symbol",
            (shadow, active, active)).fetchall()
        rows = [(day, scores(live, ret)[0] - scores(cand, ret)[0]) for day, live, cand, ret in rows]
    days: dict[str, float] = {}
    for day, diff in rows:
        days[day] = days.get(day, 0.0) + diff
    return len(rows), np.array(list(days.values()), dtype=float)


def verdict(journal: Journal, metric: str = "pnl", alpha: float = 0.05) -> Verdict:
    """The sequential test on ``metric`` over the paired settled decisions, one observation a day."""
    n, daily = daily_differences(journal, metric)
    return Verdict(metric, n, sequential.evaluate(daily, alpha))


def active_weights(journal: Journal) -> str | None:
    active = active_model(journal)
    return None if active is None else active[1]


def active_model(journal: Journal) -> tuple[str | None, str] | None:
    """(model name, weights) of the promoted model; the name is None for a promotion journalled before schema 3
    (the model ``trade run`` is given)."""
    rows = journal.conn.execute("SELECT model, weights FROM active_model").fetchall()
    if len(rows) > 1:  # the CHECK makes this impossible; fail closed if the file was edited by hand
        raise StateError(f"{journal.path}: {len(rows)} active models; restore the journal from a backup")
    return (rows[0][0], rows[0][1]) if rows else None


def shadow_weights(journal: Journal) -> str | None:
    row = journal.conn.execute("SELECT model FROM shadow_decisions WHERE role = 'shadow' "
                               "ORDER BY decision_ts DESC LIMIT 1").fetchone()
    return row[0] if row else None


def shadow_model(journal: Journal) -> str | None:
    """The latest shadow's model name (None: journalled before schema 3, the live ``--model``)."""
    row = journal.conn.execute("SELECT forecaster FROM shadow_decisions WHERE role = 'shadow' "
                               "ORDER BY decision_ts DESC LIMIT 1").fetchone()
    return row[0] if row else None


def swap(journal: Journal, weights: str, result: Comparison | Verdict, model: str | None = None) -> None:
    """Make ``weights`` (of ``model``) the one active model: one row, replaced in the same transaction that
    journals it."""
    at = now()
    with transaction(journal.conn) as c:
        old = active_weights(journal)  # read inside the write lock: no other swap can come between
        c.execute("INSERT OR REPLACE INTO active_model (slot, weights, since, model) VALUES (1, ?, ?, ?)",
                  (weights, at, model))
        c.execute("INSERT INTO promotions (old, new, n_pairs, mean_diff, p, at) VALUES (?, ?, ?, ?, ?, ?)",
                  (old, weights, result.n, result.mean_diff, 0.0 if math.isnan(result.p) else result.p, at))


@dataclass(frozen=True)
class Skill:
    """Both models' forecasts of the next close on the paired settled bars where each journalled its quantiles:
    mean CRPS (lower is better), 80% central-interval coverage, and the one-sided paired t-test's p that the
    shadow's CRPS is lower (NaN below 2 pairs)."""

    n: int
    live_crps: float
    shadow_crps: float
    live_coverage: float
    shadow_coverage: float
    p: float


def quantiles_json(levels, values) -> str | None:
    """The journal's compact form of one forecast: its levels and quantiles (None when there are none)."""
    if not len(values):
        return None
    return json.dumps({"levels": [round(float(x), 6) for x in levels], "values": [float(v) for v in values]})


def scores(quantiles: str, observed: float, interval: float = 0.8) -> tuple[float, bool]:
    """(quantile CRPS, inside the central ``interval``) of one journalled forecast against the settled return;
    the bounds are read at (1 - interval) / 2 and (1 + interval) / 2, linear between the levels (exact at a knot)."""
    from marketcast.calibrate.crps import crps_quantiles

    q = json.loads(quantiles)
    levels, values = np.asarray(q["levels"], dtype=float), np.asarray(q["values"], dtype=float)
    low, high = np.interp([(1 - interval) / 2, (1 + interval) / 2], levels, values)
    return float(crps_quantiles(values, levels, observed, axis=-1)), bool(low <= observed <= high)


def skill(journal: Journal) -> Skill:
    """:class:`Skill` on the bars :func:`compare` pairs (the latest shadow weights, the active live model)."""
    shadow, active = shadow_weights(journal), active_weights(journal)
    rows = journal.conn.execute(
        "SELECT l.quantiles, s.quantiles, l.ret FROM shadow_decisions l JOIN shadow_decisions s "
        "ON s.decision_ts = l.decision_ts AND s.symbol = l.symbol AND s.role = 'shadow' WHERE l.role = 'live' "
        "AND l.ret IS NOT NULL AND l.quantiles IS NOT NULL AND s.quantiles IS NOT NULL AND s.model = ? "
        "AND (? IS NULL OR l.model = ?) ORDER BY l.decision_ts, l.symbol", (shadow, active, active)).fetchall()
    if not rows:
        return Skill(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    live = np.array([scores(r[0], r[2]) for r in rows], dtype=float)  # [n, (crps, covered)]
    cand = np.array([scores(r[1], r[2]) for r in rows], dtype=float)
    diff = live[:, 0] - cand[:, 0]  # > 0: the shadow's CRPS is lower
    p = math.nan
    if len(rows) >= 2:
        if np.allclose(diff, diff[0]):
            p = 0.0 if diff[0] > 0 else 1.0
        else:
            from scipy.stats import ttest_rel
            p = float(ttest_rel(live[:, 0], cand[:, 0], alternative="greater").pvalue)
    return Skill(len(rows), float(live[:, 0].mean()), float(cand[:, 0].mean()), float(live[:, 1].mean()),
                 float(cand[:, 1].mean()), p)


def record_error(journal: Journal, decision_ts: str, symbol: str, model: str, error: str) -> None:
    """Journal that the shadow could not decide on this bar (the first error of a bar is kept)."""
    with transaction(journal.conn) as c:
        c.execute("INSERT OR IGNORE INTO shadow_errors (decision_ts, symbol, model, error, at) VALUES "
                  "(?, ?, ?, ?, ?)", (decision_ts, symbol, model, error, now()))


def errors(journal: Journal) -> dict | None:
    """The bars the shadow failed on: how many, and the latest one's bar, symbol, model and error."""
    count = journal.conn.execute("SELECT COUNT(*) FROM shadow_errors").fetchone()[0]
    if not count:
        return None
    ts, symbol, model, error = journal.conn.execute(
        "SELECT decision_ts, symbol, model, error FROM shadow_errors ORDER BY rowid DESC LIMIT 1").fetchone()
    return {"bars": count, "last_bar": ts, "symbol": symbol, "model": model, "error": error}
