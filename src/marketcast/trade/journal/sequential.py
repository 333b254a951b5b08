"""The promotion test: an anytime-valid sequential t-test on per-day differences, safe to check after every cycle.

A fixed-alpha t-test checked again after every decision rejects a true null far more often than alpha (optional
stopping). This test's evidence is an *e-process*: the scale-invariant normal-mixture Bayes factor of the
one-sample t-test, the effect size ``delta = mu / sigma`` drawn from ``N(0, g)`` and the scale from the right
Haar prior ``1 / sigma``, in closed form (Rouder et al. 2009, Psychon. Bull. Rev. 16, eq. 1 with a normal prior;
Gönen et al. 2005, Am. Stat. 59)::

    E_n = (1 + n g) ** -0.5 * ((1 + t**2 / nu) / (1 + t**2 / (nu (1 + n g)))) ** (n / 2),   nu = n - 1

Under the null (mean zero, any variance) it is a nonnegative martingale with mean 1 in the filtration of the
scale-invariant data (Lai 1976, "On confidence sequences", Ann. Statist. 4; Pérez-Ortiz, Lardy, de Heide &
Grünwald 2024, "E-statistics, group invariance and anytime-valid testing", Ann. Statist. 52), so by Ville's
inequality ``P(sup_n E_n >= 1 / alpha) <= alpha``: stopping whenever it crosses keeps the error rate. Inverting
it in ``mu`` gives Lai's confidence sequence for the mean, valid at every n at once (Howard, Ramdas, McAuliffe &
Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49, Sec. 3). The
promotion is one-sided: the shadow must cross the threshold *and* have a positive mean (a subset of the two-sided
rejections, so its error rate is at most alpha).

One observation is one day: all symbols' decisions of a day summed, since same-day decisions across symbols move
together and are not independent. Every function takes numpy arrays of running sums, so the command (one run) and
the simulation in the tests (thousands of runs at once) call the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NAME = "sequential t-test (normal-mixture e-value; Lai 1976)"
PRIOR_G = 0.1  # the effect size's prior variance: tuned to daily effects of ~0.3 standard deviations


@dataclass(frozen=True)
class Sequential:
    """One day-level test: ``n`` days, the mean daily difference and its confidence-sequence interval, the
    e-value against ``threshold`` (1 / alpha); ``passes`` when the e-value crossed it with a positive mean."""

    n: int
    mean: float
    low: float
    high: float
    e_value: float
    threshold: float

    @property
    def passes(self) -> bool:
        return bool(decide(self.e_value, self.mean, self.threshold))

    def as_json(self) -> dict:
        """The test's fields for ``trade promote --json`` (an unbounded interval end is null)."""
        end = lambda x: x if np.isfinite(x) else None
        return {"test": NAME, "days": self.n, "interval": [end(self.low), end(self.high)],
                "e_value": self.e_value, "threshold": self.threshold}

    def line(self) -> str:
        return (f"{NAME}: n={self.n} days, mean daily difference {self.mean:+.6f} "
                f"[{self.low:+.6f}, {self.high:+.6f}], e-value {self.e_value:.4g} vs threshold {self.threshold:g}")


def e_value(n, total, squares, g: float = PRIOR_G):
    """The e-value after ``n`` days with running ``total`` and sum of ``squares`` (arrays broadcast); 1 below two
    days or with no spread (nothing is learnt from them)."""
    n, total, squares = (np.asarray(x, dtype=float) for x in (n, total, squares))
    t2, nu = _t_squared(n, total, squares)
    c = 1.0 + n * g
    with np.errstate(divide="ignore", invalid="ignore"):
        log_e = -0.5 * np.log(c) + 0.5 * n * (np.log1p(t2 / nu) - np.log1p(t2 / (nu * c)))
    return np.where(np.isfinite(log_e) & (n >= 2), np.exp(np.minimum(log_e, 700.0)), 1.0)


def decide(evidence, mean, threshold):
    """The promotion rule, the one place it lives: the e-value reached the threshold (1 / alpha) and the mean
    difference is positive."""
    return (np.asarray(evidence) >= threshold) & (np.asarray(mean) > 0)


def crossed(n, total, squares, alpha: float, g: float = PRIOR_G):
    """:func:`decide` from running sums (what the simulation in the tests calls on many runs at once)."""
    return decide(e_value(n, total, squares, g), np.asarray(total, dtype=float), 1.0 / alpha)


def interval(n, total, squares, alpha: float, g: float = PRIOR_G):
    """(low, high) of the mean: every mu whose e-value is below 1 / alpha (Lai's confidence sequence). E_n grows
    with t**2, so the set is ``mean +- t* s / sqrt(n)`` with ``E_n(t*) = 1 / alpha``; unbounded below 2 days."""
    n, total, squares = (np.asarray(x, dtype=float) for x in (n, total, squares))
    c = 1.0 + n * g
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / n
        s = np.sqrt(np.maximum(squares - n * mean**2, 0.0) / (n - 1))
        ratio = np.exp((2.0 / n) * (np.log(1.0 / alpha) + 0.5 * np.log(c)))  # (1 + u) / (1 + u / c), u = t**2 / nu
        u = (ratio - 1.0) / (1.0 - ratio / c)
        half = np.where((n >= 2) & (ratio < c), np.sqrt(u * (n - 1)) * s / np.sqrt(n), np.inf)
    return mean - half, mean + half


def evaluate(daily, alpha: float, g: float = PRIOR_G) -> Sequential:
    """The test on the days seen so far (``daily``: one difference a day, oldest first)."""
    x = np.asarray(daily, dtype=float)
    n, total, squares = len(x), float(x.sum()), float((x**2).sum())
    low, high = interval(n, total, squares, alpha, g) if n else (-np.inf, np.inf)
    return Sequential(n, total / n if n else 0.0, float(low), float(high), float(e_value(n, total, squares, g)),
                      1.0 / alpha)


def _t_squared(n, total, squares):
    """The one-sample t statistic squared and its degrees of freedom, from running sums."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / n
        var = np.maximum(squares - n * mean**2, 0.0) / (n - 1)
        return mean**2 / (var / n), n - 1.0
