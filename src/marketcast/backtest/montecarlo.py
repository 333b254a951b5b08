"""Monte Carlo error of a backtest: how far its returns would move if the forecaster drew other samples.

A sample model's point forecast (the median of S samples) and band (their P40/P60) are estimates, so every
decision, and every return built on the decisions, carries sampling noise that the bootstrap intervals of the
returns do not hold. It is measured here without calling the model again, by *sectioning* (Asmussen & Glynn
2007, *Stochastic Simulation*, III.5a; the batch-means method of Glasserman 2003, *Monte Carlo Methods in
Financial Engineering*, 1.1.3): each window's S samples are split into B batches (:func:`batch_count`), every
strategy decides and settles on each batch's samples alone (same bars, costs and sizing policy) and the
walk-forward pick is made on each batch; the spread of the B batch figures, scaled from m = S / B samples to S
(:func:`scale`), is the standard error of the full-sample figure, which stays the one reported.

The scaling. A smooth statistic (a mean, a quantile such as the median itself) has an error ~ S^(-1/2), so
batch means divide the batch spread by sqrt(B). A *decision* is not smooth: it flips when its forecast crosses a
threshold (``simple``: the median return crosses 0). Over many windows, those whose true median lies within
~S^(-1/2) of the threshold are the ones that can flip, their share falls as S^(-1/2), so the variance of a total
return falls as S^(-1/2) and its error as S^(-1/4). On the embedded SP500 (70 windows) the seed-to-seed
standard deviation of the strategies' returns, measured at S = 32 and S = 256, falls as S^(-0.22) to S^(-0.54)
(``simple`` 8.6 -> 5.3 points, the walk-forward record 5.1 -> 2.6); :data:`EXPONENT` = 1/4 is the
decision-level rate, conservative where a figure is smoother. The point forecasts' own standard errors (for the
close calls) use the quantile rate 1/2 (Serfling 1980, *Approximation Theorems of Mathematical Statistics*,
2.3.3).

The band ("MC ± x pts"): where a re-run with another ``--seed`` lands. Two independent runs differ by a
normal error of standard deviation sqrt(2) SE; SE is estimated from B batches (B - 1 degrees of freedom), so
the 95 % prediction band for the other run's figure is ``t(0.975, B - 1) * sqrt(2) * SE`` about this run's
figure (Student t, not 1.96, for the estimated SE). What it leaves out: noise in the model itself (random
weights are seeded by ``--seed`` but fixed within a run) and in a recalibration map fitted once on all S
samples.

Common random numbers: every strategy reads the same samples (the same views), in the full run and within
each batch, so the strategies' *differences* carry less noise than each return alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import product

import numpy as np

from marketcast.backtest.selection import SelectionRule
from marketcast.backtest.strategies import StrategyParams
from marketcast.backtest.vectorised import decision_sides
from marketcast.backtest.views import ForecastReturns, ForecastViews

BATCHES = 8  # batches when every one holds at least MIN_BATCH samples (S >= 64)
MIN_BATCH = 8  # samples per batch below which a batch's median is too coarse to decide on
MIN_BATCHES = 4  # fewer batches than this (S < 32): no estimate, the spread of 2-3 figures says nothing
EXPONENT = 0.25  # error ~ S^-EXPONENT for a figure built on threshold decisions (module docstring)
LEVEL = 0.95
T_975 = {3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}  # Student t 0.975 quantiles by degrees of freedom
VIEW_FIELDS = ("close_ret", "high_ret", "low_ret", "band_low", "band_high")
BAND = ("95% band of a re-run with another seed, about this run's figure: t(0.975, B-1) * sqrt(2) * SE, where SE "
        "= sd of the B batch figures * (samples per batch / samples)^0.25 (sectioning; docs/backtest.md)")


def batch_count(num_samples: int) -> int:
    """B: 8 batches when S >= 64, else as many of at least 8 samples as fit; 0 (no estimate) below 4 batches."""
    b = min(BATCHES, num_samples // MIN_BATCH)
    return b if b >= MIN_BATCHES else 0


def split(returns: ForecastReturns, batches: int) -> list[ForecastReturns]:
    """The batches of every window's samples: batch b holds samples b, b + B, b + 2B, ... (strided, so a model
    whose samples come sorted, or in blocks, gives each batch the same spread of them). A model's own quantiles
    are no samples: every batch keeps them, so a decision read from them has no sampling error."""
    return [ForecastReturns(returns.last_close, {f: s[:, b::batches] for f, s in returns.samples.items()},
                            returns.quantiles, returns.levels) for b in range(batches)]


def scale(batches: int, exponent: float = EXPONENT) -> float:
    """From the spread of figures on S / B samples to the standard error of the figure on S: B^-exponent."""
    return float(batches) ** -exponent


def total(returns: np.ndarray) -> float:
    """The compounded return of a per-window series (as the metrics' ``return``)."""
    return float(np.prod(1.0 + np.asarray(returns, dtype=np.float64)) - 1.0)


@dataclass(frozen=True)
class McError:
    """One figure (a total return) with its batch figures; ``se`` and ``band`` as the module docstring says."""

    value: float
    batch_values: tuple[float, ...]

    @property
    def se(self) -> float:
        b = len(self.batch_values)
        return float(np.std(self.batch_values, ddof=1)) * scale(b)

    @property
    def band(self) -> float:
        """Half-width of the band a re-run with another seed lands in (95 %)."""
        return T_975[len(self.batch_values) - 1] * float(np.sqrt(2.0)) * self.se

    def covers(self, other: float) -> bool:
        """Whether ``other`` (the same figure from another seed) lies inside this run's band."""
        return abs(other - self.value) <= self.band + 1e-12

    def as_dict(self) -> dict:
        return {"se": self.se, "band": self.band, "batch_returns": list(self.batch_values)}


@dataclass(frozen=True)
class MonteCarlo:
    """The Monte Carlo error of one symbol's backtest: per strategy and for the walk-forward record, and each
    strategy's close calls (windows whose side flips within the forecast's MC error, :func:`close_calls`)."""

    batches: int
    samples: int
    strategies: dict
    walk_forward: McError
    close_calls: dict
    windows: int

    def as_dict(self) -> dict:
        return {"batches": self.batches, "samples_per_batch": self.samples // self.batches, "samples": self.samples,
                "exponent": EXPONENT, "level": LEVEL, "band": BAND,
                "close_calls_total": int(sum(self.close_calls.values())),
                "decisions_total": self.windows * len(self.close_calls)}

    def note(self) -> str:
        """``simple 9, unprofit_shutdown 9 of 70 decisions within MC error of their threshold``."""
        calls = [f"{n} {c}" for n, c in self.close_calls.items() if c]
        return (f"{', '.join(calls) if calls else 'none'} of {self.windows} decisions within MC error of their "
                "threshold")


def close_calls(name: str, views: ForecastViews, se: Mapping[str, np.ndarray], params: StrategyParams) -> np.ndarray:
    """``[N]`` bool: windows where strategy ``name``'s side changes when its forecast's fields move by up to
    their MC standard error (``se[field]`` ``[N]``), tried at every corner of that box: its forecast is within
    MC error of the threshold it decides on (``simple``: |median return| < its SE). The 32 corners are decided
    in one call, as 32 N windows: a side reads its own window only (``decision_sides``)."""
    n = len(views)
    base = decision_sides(name, views, params)
    signs = np.array(list(product((-1.0, 1.0), repeat=len(VIEW_FIELDS))))  # [corners, fields]
    same = {f: np.tile(np.asarray(getattr(views, f)), len(signs)) for f in ("timestamps", "close", "atr")}
    moved = replace(views, **same,
                    **{f: (getattr(views, f) + signs[:, i, None] * se[f]).ravel() for i, f in enumerate(VIEW_FIELDS)})
    return (decision_sides(name, moved, params).reshape(len(signs), n) != base).any(axis=0)


Settle = Callable[[ForecastReturns], tuple[ForecastViews, dict]]


def monte_carlo(returns: ForecastReturns, views: ForecastViews, fills: Mapping, settle: Settle,
                selection: SelectionRule, params: StrategyParams, delay: int = 0) -> MonteCarlo | None:
    """The MC error of every strategy's total return and of the walk-forward record (module docstring).

    ``views`` and ``fills`` (``{name: Fills}``) are the full run's; ``settle(batch)`` gives a batch's settled
    views and ``{name: Fills}`` exactly as the full run makes them; ``delay`` the walk-forward pick's
    (:meth:`~marketcast.backtest.selection.SelectionRule.walk_forward`). None when the samples make fewer than
    :data:`MIN_BATCHES` batches."""
    n_samples = next(iter(returns.samples.values())).shape[1]
    b = batch_count(n_samples)
    if not b:
        return None
    runs = [settle(batch) for batch in split(returns, b)]
    names = list(fills)
    per = {n: McError(total(fills[n].net), tuple(total(r[1][n].net) for r in runs)) for n in names}
    picks = [selection.walk_forward({n: f.net for n, f in r.items()}, {n: f.filled for n, f in r.items()}, delay)
             for r in (fills, *(r[1] for r in runs))]  # the full run's pick first, as SymbolResult.walk_forward
    wf = McError(total(picks[0]["returns"]), tuple(total(p["returns"]) for p in picks[1:]))
    root = scale(b, 0.5)  # quantiles: error ~ S^-1/2
    se = {f: np.std([getattr(r[0], f) for r in runs], axis=0, ddof=1) * root for f in VIEW_FIELDS}
    calls = {n: int(close_calls(n, views, se, params).sum()) for n in names}
    return MonteCarlo(b, n_samples, per, wf, calls, len(views))


def seed_spread(first, others: Sequence) -> dict:
    """``--seeds N``: each strategy's and the walk-forward record's total return over the N runs (the first is
    this one), their min, max and standard deviation, and how many of the other runs lie inside this run's MC
    band. ``first`` and ``others`` are one symbol's results (:class:`~marketcast.backtest.engine.SymbolResult`)."""
    runs = [first, *others]
    mc = first.monte_carlo

    def spread(values: list[float], error: McError | None) -> dict:
        inside = None if error is None else sum(error.covers(v) for v in values[1:])
        return {"returns": values, "min": min(values), "max": max(values),
                "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0, "inside_mc_band": inside}

    strategies = {n: spread([r.strategies[n].metrics["return"] for r in runs],
                            None if mc is None else mc.strategies[n]) for n in first.strategies}
    wf = spread([r.walk_forward["metrics"]["return"] for r in runs], None if mc is None else mc.walk_forward)
    return {"seeds": [r.config.seed for r in runs], "strategies": strategies, "walk_forward": wf}
