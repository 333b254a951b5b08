"""Monte Carlo error of a backtest: how far its returns would move if the forecaster drew other samples.

A sample model's point forecast (the median of S samples) and band (their P40/P60) are estimates, so every
decision, and every return built on the decisions, carries sampling noise that the bootstrap intervals of the
returns do not hold. It is measured here without calling the model again, by *sectioning* (Asmussen & Glynn
2007, *Stochastic Simulation*, III.5a; the batch-means method of Glasserman 2003, *Monte Carlo Methods in
Financial Engineering*, 1.1.3): each window's S samples are split into B batches (:func:`batch_count`), every
strategy decides and settles on each batch's samples alone (same bars, costs and sizing policy) and the
walk-forward pick is made on each batch; the spread of the B batch figures, scaled from m = S / B samples to S
(:func:`scaled`), is the standard error of the full-sample figure, which stays the one reported.

The scaling, measured per run. A smooth statistic (a mean, a quantile such as the median itself) has an
error ~ S^(-1/2). A *decision* is not smooth: it flips when its forecast crosses a threshold (``simple``: the
median return crosses 0), so a total return's error falls more slowly, at a rate that depends on the strategy
and the data (0.04-0.30 seen on a held-out daily file, issue 54). Each run therefore also settles B/2 and B/4
batches (8, 4, 2 batches of 32, 64, 128 samples at S = 256) and fits log(sd) against log(samples per batch),
one slope for the run over every figure, each at its own level (:func:`exponent`: a figure's own 7 + 3 + 1
degrees of freedom give a slope that is mostly noise). Pooled, the slope still scatters by about 0.23 (sd) from
seed to seed on the embedded pair (its least-squares variance, 1 / sum(w x^2), says the same), where the rates
themselves differ by about 0.1: read alone it clipped to 0 in half of SP500's seeds and put bands at 8-11 seed
sds. The band reads the slope combined with the rate theory gives a threshold decision, 1/4, in proportion to
their precisions (:func:`rate`, a normal posterior mean with a prior sd of 0.1): a statistic whose error falls
as S^-1/2 flips a decision only in the windows within about one error of the threshold, whose number falls as
S^-1/2 where the windows' distances from it have a density at 0, so the figure's variance falls as S^-1/2 and
its sd as S^-1/4. The exponent is clipped to [0, 1/2] (no figure's error falls faster than a mean's) and each
figure's line is read at S (:func:`scaled`). The fit reads each log sd less
its bias and weighted by its inverse variance: the log of a normal sample's sd with n degrees of freedom lies
(digamma(n/2) + log(2/n)) / 2 below log sigma on average, with variance trigamma(n/2) / 4 (Bartlett & Kendall
1946, "The statistical analysis of variance-heterogeneity and the logarithmic transformation", JRSS Suppl.
8:128-138): -0.64 for the 2 batches of 128 samples (1 dof), -0.07 for the 8 of 32, so a raw fit found the
spreads falling about 0.3 faster than they do. Under the default next-open exit, where a wash refusal ties a
window's trade to the window before (:mod:`marketcast.backtest.execution`), one flipped decision re-parities a
run of same-side windows and the error barely falls between 32 and 256 samples; the raw fit's steeper slope put
NASDAQ's bands at 1.4 seed sds and pooled coverage at 85-88 %. The line assumes the error falls as a power of the
samples; on the embedded pair a full run's error is about flat from 32 to 128 samples and falls 1.1-1.7 times to
256, a drop no batch of at most S/2 samples sees, so the bands run wide: read with the run's own slope, 3.1-7.0
times the seed sd over 40 seeds, above 4 for SP500's ``entry_takeprofit`` and ``maxdiff``, unflagged; with
:func:`rate` and the line through the centre of the spreads, 2.6-3.8 where not flagged (over 10 seeds
2.20-4.09); through the finest spread, below ("The level"). The seed check (benchmarks/mc_seed_check.py)
says how far the band can be trusted.

The level. Each figure's line runs through its finest spread (B batches, B - 1 dof), not through the weighted
centre of all three: the rate read is the run's over the whole span from S/B to S samples (1/4, the prior, is a
rate from few samples to many), so it is applied over that whole span. Through the centre, the coarser spreads
(of unions of the same batches) pulled a figure whose error is flat from 32 to 128 samples up by the rate times
their distance from the finest: 2.20-4.09 seed sds over 10 seeds where not flagged in most (SP500's
``entry_takeprofit`` 4.09, flagged in 5), against 2.07-3.60 now, 2.54-3.45 against 40 seeds' sd; pooled coverage
95.9 % and 95.6 % on the embedded pair (96.2 % and 95.8 % before). Under the power law both read the same line.

The bias test. Batches stand for the full run only if they settle the same strategy: a strategy that trades
rarely on S samples (``ci_guard``: its band's edge must clear 0) trades far more often on 32 (a blurrier band),
so its batch figures are biased, not just noisier. The batch-means test (Glasserman 2003, 1.1.3: batch means
are approximately normal about their expectation) compares the batches' mean return and mean trade count with
the full run's, in batch standard errors (sd / sqrt(B)); beyond t(0.975, B - 1) the figure's band is flagged
unreliable (:attr:`McError.biased`) and the strip says to measure it with ``--seeds``. The batches also stand
for the full run only if a batch's error is a sum of the windows' own decisions' errors, which the S^-a
extrapolation rests on: then a batch's trade count is a sum of independent per-window trade indicators, whose
variance (sum p_k (1 - p_k)) is at most its mean, and the counts over the B batches are no more dispersed than
Poisson counts. A strategy whose state is learned from the samples (``maxdiff``'s offsets, the walk-forward pick)
carries one batch's noise into all its later windows: its batches' trade counts are overdispersed, and its
batch spread no longer scales to S (NASDAQ's ``maxdiff``: a band 6 times its seed-to-seed sd, its batches trading
15-57 times where the full runs trade 31-42). The index-of-dispersion test (:attr:`McError.trades_dispersion`
beyond the chi-square 0.95 quantile with B - 1 dof; conservative for the Poisson-binomial counts of independent
windows) flags those bands unreliable too; where the strategy's state sums every earlier window's outcome
(``maxdiff``, :attr:`~marketcast.backtest.strategies.Strategy.carries_samples`) its band is flagged whatever the
test says (:attr:`McError.unreliable`): the test caught it in 3 of 10 seeds on SP500, where its band ran 5.3
seed sds. Two fallbacks were
tried: the jackknife over the batches (Efron & Stein 1981; the delete-a-group form, Efron 1982, 2.2) gave SEs
of 1.1-2.9 seed standard deviations on the embedded SP500 and NASDAQ (the Efron-Stein inequality makes it
conservative, and a threshold decision is far from the smooth statistic it is exact for), a bootstrap of the
samples at full size (Koehler, Brown & Haneuse 2009) 0.9-2.2: wider than the batches, so the flag stays a flag.
For the bands that run wide, the delete-half jackknife (balanced half-samples from the 7 non-constant columns of
the order-8 Hadamard matrix over the 8 batches, McCarthy 1969, Rev. Int. Stat. Inst. 37:239-264; consistent for
non-smooth statistics, Shao & Wu 1989, Ann. Statist. 17:1176-1197) was measured too (``halves`` in
benchmarks/results/mc_seed_check.json): its SE is 0.51-1.00 of this one's, SP500's ``maxdiff`` band still 4.98
seed sds, at 26 batch runs instead of 14. A half-sample's spread stands for the full run's only where the error
falls as a mean's from S/2 to S; ``maxdiff``'s falls faster, which no subset of the run's samples shows, so
neither an estimate nor a check on the batches singles these bands out: ``--seeds`` measures them.

Close calls: the windows whose side on any of the B/2 batches (4 batches of 64 samples at S = 256, settled
for the scaling anyway) differs from the full run's: a per-window estimate, from the run itself, of whether
another draw of samples moves the decision (judging Monte Carlo error from the run's own replicates, Koehler,
Brown & Haneuse 2009, *Am. Stat.* 63:155-162). The leave-one-batch-out sets (the delete-a-group jackknife's,
7/8 of the samples) call fewer windows close but cost 8 more views a symbol and predicted flips less well on
the heavy-tailed check (benchmarks/mc_seed_check.py). The JSON total counts each window once, whichever
strategies call it close.

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

import numpy as np

from marketcast.backtest.selection import SelectionRule
from marketcast.backtest.strategies import STRATEGIES, StrategyParams
from marketcast.backtest.vectorised import decision_sides
from marketcast.backtest.views import ForecastReturns, ForecastViews

BATCHES = 8  # batches when every one holds at least MIN_BATCH samples (S >= 64)
MIN_BATCH = 8  # samples per batch below which a batch's median is too coarse to decide on
MIN_BATCHES = 4  # fewer batches than this (S < 32): no estimate, the spread of 2-3 figures says nothing
RECORDED_EXPONENT = 0.25  # the fixed exponent of runs recorded before it was measured (their bands as printed)
MAX_EXPONENT = 0.5  # no figure's error falls faster than a mean's, S^-1/2 (module docstring)
PRIOR_EXPONENT = 0.25  # a threshold decision's rate, S^-1/4 (module docstring, "The scaling")
PRIOR_SD = 0.10  # how far a run's own rate lies from it: 0.09-0.40 over 40 seeds (benchmarks/mc_seed_check.py)
LEVEL = 0.95
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}  # Student t 0.975 by dof
CHI2_95 = {1: 3.841, 2: 5.991, 3: 7.815, 4: 9.488, 5: 11.070, 6: 12.592, 7: 14.067}  # chi-square 0.95 by dof
# log of a normal sample's sd with n dof: mean log(sigma) + (digamma(n/2) + log(2/n)) / 2, variance
# trigamma(n/2) / 4 (Bartlett & Kendall 1946, JRSS Suppl. 8:128-138; module docstring, "The scaling")
LOG_SD_BIAS = {1: -0.63518, 2: -0.28861, 3: -0.18449, 4: -0.13518, 5: -0.10657, 6: -0.08791, 7: -0.07480}
LOG_SD_VAR = {1: 1.23370, 2: 0.41123, 3: 0.23370, 4: 0.16123, 5: 0.12259, 6: 0.09873, 7: 0.08259}
BAND = ("95% band of a re-run with another seed, about this run's figure: t(0.975, B-1) * sqrt(2) * SE, where SE "
        "= the spread of the B batches scaled to S samples with the exponent measured from batches of S/B, 2S/B, "
        "4S/B samples, combined with 1/4 by their precisions; flagged unreliable where the batches are biased against "
        "the full run or their trade counts are overdispersed, or the strategy's state carries every earlier "
        "window's samples (docs/backtest.md)")


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


def coarser(batches: int) -> list[int]:
    """The batch counts the scaling is measured on: B, B/2, B/4 while at least 2 batches remain (8, 4, 2)."""
    out = [batches]
    while out[-1] // 2 >= 2:
        out.append(out[-1] // 2)
    return out


def total(returns: np.ndarray) -> float:
    """The compounded return of a per-window series (as the metrics' ``return``)."""
    return float(np.prod(1.0 + np.asarray(returns, dtype=np.float64)) - 1.0)


def bias_z(batch_values: Sequence[float], value: float) -> float:
    """|mean of the batch figures - the full-sample figure| / (their sd / sqrt(B)): the batch-means test of the
    batches against the figure they stand for; inf where the batches agree with each other but not with it."""
    b = len(batch_values)
    gap = abs(float(np.mean(batch_values)) - value)
    sd = float(np.std(batch_values, ddof=1))
    if gap <= 1e-12:
        return 0.0
    return gap / (sd / np.sqrt(b)) if sd > 0 else float("inf")


def _line(spreads: Mapping[int, float], debiased: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x = log(S / B_k) - log S (B = 1 at x = 0), y = log(sd_k) less its bias and the weights 1 / var(log sd_k),
    each for the B_k - 1 degrees of freedom of sd_k (:data:`LOG_SD_BIAS`, :data:`LOG_SD_VAR`). ``debiased``
    False: the raw log sds weighted by their degrees of freedom, the line of a run recorded before."""
    dof = [k - 1 for k in spreads]
    if not debiased:
        return -np.log(list(spreads)), np.log(list(spreads.values())), np.array(dof, dtype=np.float64)
    return (-np.log(list(spreads)), np.log(list(spreads.values())) - [LOG_SD_BIAS[d] for d in dof],
            1.0 / np.array([LOG_SD_VAR[d] for d in dof]))


def _fit(figures: Sequence[Mapping[int, float]]) -> tuple[float, float] | None:
    """The common slope of every figure's ``spreads`` ({B_k: sd of its figures on B_k batches}), unclipped, and
    its variance: a fixed-effects fit of the bias-corrected log sds, each figure with its own level, weighted by
    their inverse variances (:func:`_line`), so the slope's variance is 1 / sum(w x^2) (the least-squares
    variance with known weights). None where no figure moves at every batch size."""
    xs, ys, ws = [], [], []
    for spreads in figures:
        if len(spreads) < 2 or min(spreads.values()) <= 0.0:
            continue
        x, y, w = _line(spreads)
        xs.append(x - np.average(x, weights=w))
        ys.append(y - np.average(y, weights=w))
        ws.append(w)
    if not xs:
        return None
    x, y, w = (np.concatenate(v) for v in (xs, ys, ws))
    return float(-np.sum(w * x * y) / np.sum(w * x * x)), float(1.0 / np.sum(w * x * x))


def exponent(figures: Sequence[Mapping[int, float]]) -> float | None:
    """The run's measured rate ``a`` of error ~ S^-a alone: the common slope of log(sd) on log(samples per batch)
    over every figure's spreads (:func:`_fit`), clipped to [0, 1/2]. One run's 7 + 3 + 1 degrees of freedom per
    figure make a figure's own slope mostly noise; pooled over the figures less so, but still about 0.23 (sd)
    from run to run: :func:`rate` is what the band reads. None where no figure moves at every batch size."""
    fit = _fit(figures)
    return None if fit is None else float(np.clip(fit[0], 0.0, MAX_EXPONENT))


def rate(figures: Sequence[Mapping[int, float]]) -> float | None:
    """The exponent the band reads: the run's measured slope (:func:`_fit`) and the threshold decision's rate
    :data:`PRIOR_EXPONENT` combined in proportion to their precisions (the posterior mean of a normal slope
    under a normal prior of sd :data:`PRIOR_SD`; Gelman et al. 2013, *Bayesian Data Analysis*, 3rd ed., 2.5),
    clipped to [0, 1/2]. A run whose batches measure a steep or a flat rate precisely moves it; one whose
    spreads scatter (most: the slope's sd is about 0.23) stays near 1/4. None where :func:`_fit` is."""
    fit = _fit(figures)
    if fit is None:
        return None
    slope, variance = fit
    w_run, w_prior = 1.0 / variance, PRIOR_SD ** -2
    return float(np.clip((w_run * slope + w_prior * PRIOR_EXPONENT) / (w_run + w_prior), 0.0, MAX_EXPONENT))


def scaled(spreads: Mapping[int, float], a: float | None, debiased: bool = True, finest: bool = True) -> float:
    """The SE of a figure on all S samples: its line log(sd) = c - a log(S / B_k) with slope ``a`` (the run's,
    :func:`rate`) through its finest spread (B batches, less its bias), read at B = 1: the rate is the run's
    over the whole span from S/B to S samples, so it is applied over that span (module docstring, "The
    level"). ``finest`` False: through the weighted centre of all its spreads, the line of a run recorded
    before. Where a spread is 0 or no exponent was measured, the finest spread scaled at the mean's rate
    (error ~ S^-1/2)."""
    b = max(spreads)
    if a is None or min(spreads.values()) <= 0.0:
        return spreads[b] * float(b) ** -MAX_EXPONENT
    x, y, w = _line(spreads, debiased)
    if finest and debiased:
        at = list(spreads).index(b)
        return float(np.exp(y[at] + a * x[at]))
    return float(np.exp(np.average(y, weights=w) + a * np.average(x, weights=w)))


@dataclass(frozen=True)
class McError:
    """One figure (a total return) with its batch figures (B batches of S/B samples), the figures on coarser
    batches (``coarse``: B/2, B/4 figures) and the trade counts (the run's, each batch's);
    ``se`` and ``band`` as the module docstring says."""

    value: float
    batch_values: tuple[float, ...]
    coarse: tuple[tuple[float, ...], ...] = ()
    trades: int = 0
    batch_trades: tuple[int, ...] = ()
    exponent: float | None = None  # the run's exponent (:func:`rate`)
    carried: bool = False  # its strategy's state carries every earlier window's samples (Strategy.carries_samples)
    debiased: bool = False  # the line read the log sds less their bias (:func:`_line`); False: recorded before
    finest: bool = False  # the line runs through the finest spread (:func:`scaled`); False: recorded before

    @property
    def spreads(self) -> dict[int, float]:
        """{B_k: sd of the figures on B_k batches}, B first."""
        return {len(v): float(np.std(v, ddof=1)) for v in (self.batch_values, *self.coarse)}

    @property
    def bias_z(self) -> float:
        """How far the batches' mean return lies from the full-sample return, in batch standard errors
        (sd / sqrt(B)) (:func:`bias_z`)."""
        return bias_z(self.batch_values, self.value)

    @property
    def trades_z(self) -> float:
        """The same for the number of trades: batches that trade more often than the full run (a strategy that
        trades rarely, on a forecast that 32 samples blur) settle another strategy than the one reported; inf
        where the run made no trade and a batch did."""
        if self.trades == 0 and any(self.batch_trades):  # no trade to err about: the batches settle another
            return float("inf")
        return bias_z(self.batch_trades, self.trades) if self.batch_trades else 0.0

    @property
    def trades_dispersion(self) -> float:
        """The index of dispersion of the batches' trade counts, (B - 1) s^2 / mean (0 where no batch traded):
        chi-square with B - 1 dof for Poisson counts (Fisher 1950, "The significance of deviations from
        expectation in a Poisson series", Biometrics 6:17-24; Cochran 1954, Biometrics 10:417-451)."""
        counts = np.asarray(self.batch_trades, dtype=np.float64)
        if len(counts) < 2 or counts.mean() <= 0:
            return 0.0
        return float((len(counts) - 1) * counts.var(ddof=1) / counts.mean())

    @property
    def biased(self) -> bool:
        """The batches miss the full run's return or trade count by more than their own 95 % error (Student t,
        B - 1 dof), or their trade counts are overdispersed (:attr:`trades_dispersion` beyond chi-square 0.95,
        B - 1 dof; module docstring): their spread is not this figure's, and the band is flagged unreliable."""
        b = len(self.batch_values)
        t = T_975[b - 1]
        return self.bias_z > t or self.trades_z > t or self.trades_dispersion > CHI2_95[b - 1]

    @property
    def unreliable(self) -> bool:
        """The band is not to be trusted: its batches are :attr:`biased`, or its strategy's state carries every
        earlier window's samples (:attr:`carried`) and its batches move (a model deciding from its own quantiles
        has no samples to carry), which batches of S/B samples cannot stand for (module docstring, "The bias
        test")."""
        return self.biased or (self.carried and float(np.ptp(self.batch_values)) > 0.0)

    @property
    def se(self) -> float:
        b = len(self.batch_values)
        if not self.coarse:  # a run store record from before the scaling was measured: as it was printed
            return self.spreads[b] * float(b) ** -RECORDED_EXPONENT
        return scaled(self.spreads, self.exponent, self.debiased, self.finest)

    @property
    def band(self) -> float:
        """Half-width of the band a re-run with another seed lands in (95 %)."""
        return T_975[len(self.batch_values) - 1] * float(np.sqrt(2.0)) * self.se

    def covers(self, other: float) -> bool:
        """Whether ``other`` (the same figure from another seed) lies inside this run's band."""
        return abs(other - self.value) <= self.band + 1e-12

    def as_dict(self) -> dict:
        return {"se": self.se, "band": self.band, "batch_returns": list(self.batch_values),
                "exponent": self.exponent, "bias_z": self.bias_z, "trades_z": self.trades_z,
                "trades_dispersion": self.trades_dispersion, "unreliable": self.unreliable}
@dataclass(frozen=True)
class MonteCarlo:
    """The Monte Carlo error of one symbol's backtest: per strategy and for the walk-forward record, and each
    strategy's close calls (``close_calls``: how many windows' sides differ on any of the B/2 batches from the
    full run's; ``close``: which, ``[N]`` bool, None in a run recorded before)."""

    batches: int
    samples: int
    strategies: dict
    walk_forward: McError
    close_calls: dict
    windows: int
    close: dict | None = None

    @property
    def unreliable(self) -> list[str]:
        """The strategies (and ``walk-forward``) whose batches are biased (:attr:`McError.biased`): their band is
        not to be trusted; ``--seeds`` measures the spread instead."""
        return [n for n, e in {**self.strategies, "walk-forward": self.walk_forward}.items() if e.unreliable]

    def as_dict(self) -> dict:
        close_any = None if self.close is None else np.any([np.zeros(self.windows, bool), *self.close.values()],
                                                           axis=0)  # None: a run recorded before they were kept
        return {"batches": self.batches, "samples_per_batch": self.samples // self.batches, "samples": self.samples,
                "batch_counts": list(self.walk_forward.spreads),
                "exponent": self.walk_forward.exponent, "level": LEVEL, "band": BAND, "unreliable": self.unreliable,
                "close_calls_total": None if close_any is None else int(close_any.sum()),
                "close_windows": None if close_any is None else np.flatnonzero(close_any).tolist(),
                "decisions_total": self.windows * len(self.close_calls)}

    def note(self) -> str:
        """``simple 9, unprofit_shutdown 9 of 70 decisions differ on a batch of 64 samples``."""
        calls = [f"{n} {c}" for n, c in self.close_calls.items() if c]
        return (f"{', '.join(calls) if calls else 'none'} of {self.windows} decisions differ on a batch of "
                f"{2 * self.samples // self.batches} samples")


Settle = Callable[[ForecastReturns], tuple]  # (views, {name: Fills}, ...): a batch's run, as the full run's
Held = Callable[[tuple], tuple[np.ndarray, np.ndarray]]  # --hold: a run's walk-forward (returns, filled), held


def _errors(full: tuple, runs: Mapping[int, list], selection: SelectionRule, delay: int = 0,
            held: Held | None = None) -> tuple[dict, McError]:
    """Every strategy's and the walk-forward record's :class:`McError` from the full run and the batch runs,
    each ``(views, {name: Fills}, ...)`` (``runs``: {B_k: runs on B_k batches}); with ``held`` (``--hold``) the
    walk-forward record is what ``held(run)`` gives."""
    def record(run: tuple) -> tuple[float, int]:
        if held is not None:
            returns, filled = held(run)
            return total(returns), int(filled.sum())
        fills = run[1]
        pick = selection.walk_forward({n: f.net for n, f in fills.items()}, {n: f.filled for n, f in fills.items()},
                                      delay)
        return total(pick["returns"]), int(pick["filled"].sum())

    figures = {n: (lambda run, n=n: (total(run[1][n].net), int(run[1][n].filled.sum()))) for n in full[1]}
    figures["walk-forward"] = record
    b = max(runs)

    def error(n: str, f) -> McError:
        value, trades = f(full)
        batch = [f(r) for r in runs[b]]
        return McError(value, tuple(x[0] for x in batch),
                       tuple(tuple(f(r)[0] for r in rs) for k, rs in runs.items() if k != b),
                       trades, tuple(x[1] for x in batch), debiased=True, finest=True,
                       carried=n in STRATEGIES and STRATEGIES[n].carries_samples)

    out = {n: error(n, f) for n, f in figures.items()}
    a = rate([e.spreads for e in out.values()])
    out = {n: replace(e, exponent=a) for n, e in out.items()}
    wf = out.pop("walk-forward")
    return out, wf


def monte_carlo(returns: ForecastReturns, views: ForecastViews, fills: Mapping, settle: Settle,
                selection: SelectionRule, params: StrategyParams, delay: int = 0, held: Held | None = None,
                orders: Mapping | None = None) -> MonteCarlo | None:
    """The MC error of every strategy's total return and of the walk-forward record, and the close calls
    (module docstring).

    ``views`` and ``fills`` (``{name: Fills}``) are the full run's; ``settle(batch)`` gives a batch's settled
    views and ``{name: Fills}`` exactly as the full run makes them; ``delay`` the walk-forward pick's
    (:meth:`~marketcast.backtest.selection.SelectionRule.walk_forward`). None when the samples make fewer than
    :data:`MIN_BATCHES` batches. With ``held`` (``--hold``) ``settle`` also gives the batch's ``{name: Orders}``
    and the walk-forward record is the held pick's (``orders``: the full run's)."""
    n_samples = next(iter(returns.samples.values())).shape[1]
    b = batch_count(n_samples)
    if not b:
        return None
    runs = {k: [settle(batch) for batch in split(returns, k)] for k in coarser(b)}
    per, wf = _errors((views, dict(fills), orders), runs, selection, delay, held)
    close = {}
    for n in fills:
        side = decision_sides(n, views, params)
        close[n] = np.any([decision_sides(n, v, params) != side for v, *_ in runs[b // 2]], axis=0)
    return MonteCarlo(b, n_samples, per, wf, {n: int(c.sum()) for n, c in close.items()}, len(views), close)


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
