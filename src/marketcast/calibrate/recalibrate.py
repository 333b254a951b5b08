"""Walk-forward recalibration of sample paths: at window k, learn only from windows already settled at k.

Settlement rule. Window j forecasts the ``horizon`` bars after its decision bar t_j; its last outcome is the
bar t_j + horizon, known at the close of that bar. With windows ``step`` bars apart (one window per bar:
step = 1) window k decides at t_k = t_j + (k - j) * step, so j is settled before k's decision exactly when
(k - j) * step >= horizon, i.e. **j + ceil(horizon / step) <= k** (:func:`settled_mask`). Irregularly
spaced windows pass their own ``settled_before`` mask (row k: the windows settled before k's decision);
it must be strictly lower-triangular, which :func:`recalibrate` checks.

Warm-up. Window k is recalibrated only once ``min_windows`` windows are settled before it; before that its
samples come back unchanged and ``calibrated[k]`` is False (read them as uncalibrated).

Methods, per horizon step h (each output has the input's shape):

``none``       identity.
``conformal``  asymmetric conformalized quantile regression on the intervals as they are scored (Romano,
               Patterson & Candes 2019, "Conformalized quantile regression", NeurIPS, its asymmetric form;
               the median-scaled score "CQR-m" of Sesia & Candes 2020, "A comparison of some conformal
               quantile regression methods", Stat 9:e261; Vovk, Gammerman & Shafer 2005, *Algorithmic
               Learning in a Random World*). The coverage report scores the equal-tailed interval of each
               nominal level L in ``levels`` (50/80/90/95 %: :data:`marketcast.calibrate.coverage.LEVELS`), so
               each of its two bounds is corrected apart, at a miss rate of (1 - L) / 2. For the bound q_j of
               window j (its sample quantile at (1 -/+ L) / 2, or the model's knot where the coverage reads
               knots) the score is r_j = (y_j - m_j) / (q_j - m_j) (m_j: the samples' median): the outcome's
               distance beyond the median in units of the bound's own, so y_j misses the bound m + F (q - m)
               exactly when r_j > F. F_k = the r_j of the n windows settled before k at the virtual rank
               v = (n + 1)(1 + L) / 2: between the floor(v)-th and the next smallest, with weight v - floor(v)
               (the smallest or the largest beyond them), and window k's bound goes to m_k + F_k (q_k - m_k).
               Split conformal's ceil(v)-th score misses with probability at most (1 - L) / 2 but at least
               that minus 1 / (n + 1) per bound: with two bounds per interval an 80 % interval came out at
               80.6 % on average over 24 runs of 240 calibrated windows (GARCH skew-t returns; 95 %: 95.7 %), an
               excess that only shrinks as 2 / (n + 1). The smoothed conformal predictor (Vovk, Gammerman &
               Shafer 2005, sec. 2.4) misses with probability exactly (1 - L) / 2 by drawing between the
               floor(v)-th and the next score with that weight; the interpolation is its deterministic form
               (Hyndman & Fan 1996, type 6: the k-th of n exchangeable scores has expected CDF k / (n + 1)), exact
               where the scores' density is flat between the two: 79.9 % and 95.0 % on the same runs. A skewed outcome
               gets a lower correction unlike the upper one; the median stays, so conformal fixes each tail's
               width, not a bias (a bound cannot cross the median: F >= 0).
               The corrections act as one monotone map per window: the identity between the two middle
               samples (widened to the model's median knot), and on each side linear between the points each
               bound is scored from (the two samples numpy's quantile interpolates between, and the knot where
               the coverage reads it), each carried to its bound's corrected scale about the middle; beyond the
               outermost point, the ray through it. So each scored bound lands on its corrected value. Where
               corrections cross (an inner bound's point would move out further than an outer one's), each
               point takes the furthest of its own and every inner point's (a running max of the distance
               outward): a bound moved further out only misses less, so every tail keeps its guarantee, and
               the map stays monotone. Can move samples beyond their range. A window whose bounds do not lie
               outside its middle samples (ties, a handful of samples) keeps its samples.
``quantile``   quantile mapping of the PIT (Kuleshov, Fenner & Ermon 2018, "Accurate uncertainties for
               deep learning using calibrated regression", ICML): R = the empirical CDF of the settled
               windows' PITs (:func:`marketcast.calibrate.pit.pit_values`); the recalibrated CDF is
               R(F_k), so the sample of rank r (level tau_r = (r + 0.5) / S) becomes F_k^-1(R^-1(tau_r)).
               Stays inside window k's sample range.

Both maps are monotone in each (window, step) column, so every sample keeps its rank (ties allowed) and the
paths keep their dependence across the horizon and across close/high/low, which the sizing reads (the idea of
ensemble copula coupling, Schefzik, Thorarinsdottir & Gneiting 2013). Quantile mapping recalibrates every
probability at once, so its equal-tailed intervals are already the scored ones (each tail mapped to its own
level, no band to mismatch); it stays inside each window's sample range, so it cannot reach a tail beyond it.

Quantiles (``knots`` ``[W, K, H]`` at ``knot_levels``: a model's own quantiles,
:class:`marketcast.forecast.base.Forecast`) go through the same map as their window's samples, so they stay
the quantiles of the recalibrated samples: conformal applies the window's own map to each knot (a knot the
coverage reads lands on its corrected bound; the samples' quantile at a knot level equals the moved knot where
the map is linear across the two samples it interpolates: everywhere but at a bound whose correction an inner
one's overtook); quantile mapping moves each knot from its level alpha to the knots' own quantile function
(:func:`marketcast.forecast.quantiles.quantile_function`) at R^-1(alpha), the same map of probabilities R the
samples take (equal to the samples' knots within sampling error).

Cost. With ``horizon``/``step`` the windows settled before k are a prefix of the windows (0 .. k - lag), so
one pass in settlement order keeps the past scores sorted (a binary search and one insertion per window:
O(W log W) comparisons, the insertions a memmove each) and reads each window's order statistics from it;
everything else is vectorised over all windows. Conformal sorts each window's samples once (numpy's
vectorised sort: cheaper than a selection at the 18 positions it reads; median and quantiles as numpy forms
them, bit for bit) and finds each sample's segment of the map with one comparison per point. For 5,000
windows x 256 samples conformal takes about 80-130 ms of CPU per field (8 bound columns through the sorted
pass, then the map), quantile mapping about 150 ms (the stable argsort of the samples and the per-window
gathers). A ``settled_before`` mask can describe any set, so it takes the general route: past scores masked
to +inf and sorted, in chunks of windows (O(W^2 H log W)). Both routes give the same order statistics, so
the same samples bit for bit (``tests/calibrate/test_recalibrate_fast.py``).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from marketcast.calibrate.coverage import LEVELS
from marketcast.errors import ConfigError

METHODS = ("none", "conformal", "quantile")
_CHUNK_ELEMENTS = 1 << 22  # float64 elements of one chunk's [B, W, H] sorted scores (32 MiB)


@dataclass(frozen=True)
class Recalibrated:
    """``samples`` as given in shape; ``calibrated`` bool ``[W]`` (False: warm-up or method ``none``, samples
    unchanged); ``n_settled`` int ``[W]``: the windows each window's calibrator was fitted on (or would be)."""

    samples: np.ndarray
    calibrated: np.ndarray
    n_settled: np.ndarray
    knots: np.ndarray | None = None  # the quantiles given, through the same map (None: none given)


def settled_mask(n_windows: int, horizon: int, step: int = 1) -> np.ndarray:
    """bool ``[W, W]``: ``[k, j]`` True when window j is settled before window k decides,
    j + ceil(horizon / step) <= k (see the module docstring)."""
    _check_positive_int(horizon, "horizon")
    _check_positive_int(step, "step")
    lag = math.ceil(horizon / step)
    k = np.arange(int(n_windows))
    return k[None, :] + lag <= k[:, None]


def _check_positive_int(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"recalibrate: {name}={value!r} must be a whole number >= 1; "
                          f"pass the forecast {name} in bars")


def _median(ordered: np.ndarray) -> np.ndarray:
    """``np.median(x, axis=1)`` from the rows sorted along axis 1, the same value bit for bit: the middle one,
    or the mean (a + b) / 2 of the middle two, as numpy forms it."""
    n = ordered.shape[1]
    a, b = ordered[:, (n - 1) // 2], ordered[:, n // 2]
    return b.copy() if n % 2 else (a + b) / 2


def _position(n: int, p: float) -> tuple[int, int, float]:
    """numpy's linear quantile at ``p`` of n sorted values: the positions it interpolates between, floor and
    next of its virtual index (n - 1) p, and the weight of the next."""
    v = float(np.float64(n - 1) * np.float64(p))
    i = min(max(math.floor(v), 0), n - 1)
    return i, min(i + 1, n - 1), min(max(v - i, 0.0), 1.0)


def _sorted_quantile(ordered: np.ndarray, p: float) -> np.ndarray:
    """``np.quantile(x, p, axis=1)`` (linear, Hyndman & Fan 1996 type 7) from the sorted rows, value for value
    (numpy's two-sided interpolation ``_lerp``, as :func:`marketcast.calibrate.coverage.coverage` forms it)."""
    i, j, g = _position(ordered.shape[1], p)
    a, b = ordered[:, i], ordered[:, j]
    return a + (b - a) * g if g < 0.5 else b - (b - a) * (1 - g)


def _chunks(n_windows: int, per_row: int):
    size = max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    for start in range(0, n_windows, size):
        yield slice(start, min(start + size, n_windows))


def _masked_sorted(scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scores [W, H] of the windows in ``rows`` [B, W] (NaN scores left out), sorted along W with +inf for the
    rest -> ([B, W, H], counts [B, H])."""
    keep = rows[:, :, None] & np.isfinite(scores)[None]
    masked = np.where(keep, scores[None], np.inf)
    return np.sort(masked, axis=1), keep.sum(axis=1)


class _Prefix:
    """The finite scores ``[W, H]`` of windows 0 .. k - lag, kept sorted per step h while k advances: as
    lists (``lists[h]``) and, with ``arrays``, also as numpy buffers (``sorted(h)``) for vectorised gathers."""

    def __init__(self, scores: np.ndarray, lag: int, arrays: bool = False) -> None:
        self.rows, self.lag = scores.tolist(), lag
        w, h = scores.shape
        self.lists: list[list[float]] = [[] for _ in range(h)]
        self.buf = np.empty((h, w)) if arrays else None
        self.added = 0  # windows 0 .. added - 1 are in

    def advance(self, k: int) -> None:
        """Insert the windows settled before window k (j <= k - lag) not yet in."""
        while self.added <= k - self.lag:
            for h, v in enumerate(self.rows[self.added]):
                if math.isfinite(v):
                    values = self.lists[h]
                    at = bisect.bisect_right(values, v)
                    if self.buf is not None:
                        n = len(values)
                        self.buf[h, at + 1:n + 1] = self.buf[h, at:n]
                        self.buf[h, at] = v
                    values.insert(at, v)
            self.added += 1

    def sorted(self, h: int) -> np.ndarray:
        return self.buf[h, :len(self.lists[h])]


def _conformal_qhat(z, lag, level):
    """Qhat [W, C] and the counts n [W, C] of the settled scores z [W, C] (one column per bound and step, each
    with its own ``level`` [C]), one pass in settlement order (prefix sets): window k inserts the score of
    window k - lag into a sorted list and reads its rank-th smallest. The counts and ranks (those of the
    general route, :func:`_smoothed_rank`) are computed for every window at once; the loop only inserts and reads
    the two order statistics each window interpolates."""
    w, h = z.shape
    qhat = np.zeros((w, h))
    settled = np.zeros((w, h), dtype=np.int64)
    settled[lag:] = np.cumsum(np.isfinite(z), axis=0)[:max(w - lag, 0)]
    lo, hi, g = _smoothed_rank(settled, level)
    for j in range(h):
        a, b = np.zeros(w), np.zeros(w)
        col, n, values = z[:, j].tolist(), settled[:, j].tolist(), []
        r0, r1 = lo[:, j].tolist(), hi[:, j].tolist()
        insort, isfinite = bisect.insort, math.isfinite
        for k in range(lag, w):
            v = col[k - lag]
            if isfinite(v):
                insort(values, v)
            if n[k]:
                a[k], b[k] = values[r0[k]], values[r1[k]]
        qhat[:, j] = _between(a, b, g[:, j])
    return qhat, settled


def _smoothed_rank(n, level):
    """The two 0-based ranks among ``n`` sorted scores and the weight of the upper one that give the conformal
    quantile at ``level`` without the finite-sample excess: virtual rank v = (n + 1) level (1-based), between the
    floor(v)-th and the next smallest score with weight v - floor(v) (Hyndman & Fan 1996, type 6: the k-th of n
    exchangeable scores has expected CDF k / (n + 1)); clipped to the smallest and the largest score."""
    v = (n + 1) * level
    first = np.floor(v)
    lo = np.clip(first.astype(np.int64), 1, np.maximum(n, 1)) - 1
    hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
    g = np.where((first >= 1) & (first < n), v - first, 0.0)
    return lo, hi, g


def _between(a, b, g):
    """``a + g (b - a)`` with g in [0, 1]: the one float form both routes use, so they agree bit for bit."""
    return a + g * (b - a)


def _prefix_hazen(scores, lag, rows, tau):
    """:func:`_hazen` at ``tau`` [L] of each window's settled scores (windows 0 .. k - lag, finite only), for
    the windows in ``rows`` (bool [W]) -> [W, L, H], NaN where a window has none. Positions and weights are
    computed for every window at once from the counts; the pass in settlement order only gathers the two
    order statistics around each position (the same float operations as :func:`_hazen`)."""
    w, h = scores.shape
    count = np.cumsum(np.isfinite(scores), axis=0)                      # finite scores of windows 0 .. j
    k = np.arange(w)
    n = np.where((k - lag >= 0)[:, None], count[np.maximum(k - lag, 0)], 0)  # [W, H]
    top = np.maximum(n - 1, 0)[:, None, :]
    pos = np.clip(tau[None, :, None] * n[:, None, :] - 0.5, 0.0, top)   # [W, L, H]
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, top)
    length = pos.shape[1]
    where = np.ascontiguousarray(np.concatenate([lo, hi], axis=1).transpose(2, 0, 1))  # [H, W, 2L]
    got = np.full(where.shape, np.nan)
    prefix = _Prefix(scores, lag, arrays=True)
    for i in np.flatnonzero(rows & (n > 0).any(axis=1)):
        prefix.advance(int(i))
        for j in range(h):
            if n[i, j]:
                got[j, i] = prefix.sorted(j)[where[j, i]]
    a = got[:, :, :length].transpose(1, 2, 0)
    b = got[:, :, length:].transpose(1, 2, 0)
    step = np.subtract(b, a, out=np.zeros(a.shape), where=hi > lo)
    return a + (pos - lo) * step


def _knot_at(knot_levels, q: float) -> int | None:
    """Index of the knot at probability ``q`` (to 1e-9, as :mod:`marketcast.calibrate.coverage` matches them)."""
    hit = [i for i, v in enumerate(knot_levels) if abs(float(v) - q) <= 1e-9]
    return hit[0] if hit else None


def _tails(ordered, levels, knots, knot_levels):
    """Each window's own bounds of the equal-tailed intervals at ``levels`` (ascending: inner to outer), read
    where :func:`marketcast.calibrate.coverage.coverage` reads them: the knots when both bounds of a level are
    knots, else the samples' quantiles (numpy's linear, from the sorted samples) -> (lower, upper) [W, L, H],
    and per level whether its bounds are knots."""
    lower_p = [(1 - level) / 2 for level in levels]  # the same floats the coverage forms
    upper_p = [(1 + level) / 2 for level in levels]
    lower = np.stack([_sorted_quantile(ordered, p) for p in lower_p], axis=1)
    upper = np.stack([_sorted_quantile(ordered, p) for p in upper_p], axis=1)
    from_knots = []
    for i, (a, b) in enumerate(zip(lower_p, upper_p)):
        at = None if knots is None else (_knot_at(knot_levels, a), _knot_at(knot_levels, b))
        from_knots.append(at is not None and None not in at)
        if from_knots[-1]:
            lower[:, i], upper[:, i] = knots[:, at[0]], knots[:, at[1]]
    return lower, upper, from_knots


def _middle(ordered, knots, knot_levels):
    """The band the map leaves fixed, [W, H] each: from the lower to the upper middle sample (one sample for an
    odd count), widened to hold the model's median knot when it has one, so both medians stay bit for bit."""
    n = ordered.shape[1]
    low, high = ordered[:, (n - 1) // 2], ordered[:, n // 2]
    at = None if knots is None else _knot_at(knot_levels, 0.5)
    if at is not None:
        low, high = np.minimum(low, knots[:, at]), np.maximum(high, knots[:, at])
    return low, high


def _brackets(n: int, levels) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Per level, the sorted positions of the two samples numpy's linear quantile interpolates between at the
    lower and at the upper bound: floor((n - 1) p) and the next."""
    return [tuple(_position(n, p)[:2] for p in ((1 - level) / 2, (1 + level) / 2)) for level in levels]


def _piecewise(v, pos, val, strict, rays):
    """The piecewise-linear map of values ``v`` [W, N, H] through the points (``pos``, ``val``) [W, P, H], both
    non-decreasing along P (two points at one position are a step), continued beyond the first and the last
    point by the rays of slope ``rays`` ([W, 2, H]: left, right). A value on a step takes its lower end where
    ``strict[i]`` (point i counts only for values above it) and its upper end elsewhere. Each segment's value
    is clipped to its right end's, so the map never decreases, also through rounding."""
    first, last = pos[:, :1], pos[:, -1:]
    gap = np.diff(pos, axis=1)
    wide = gap > 0
    inner = np.where(wide, np.diff(val, axis=1) / np.where(wide, gap, 1.0), 0.0)
    a = np.concatenate([first, pos], axis=1)                                   # segment k starts at a[k]
    b = np.concatenate([val[:, :1], val], axis=1)
    slope = np.concatenate([rays[:, :1], inner, rays[:, 1:]], axis=1)
    cap = np.concatenate([val[:, :1], val[:, 1:], np.full_like(last, np.inf)], axis=1)
    k = np.zeros(v.shape, dtype=np.int16)  # the segment v falls in: the points it has passed
    hit = np.empty(v.shape, dtype=bool)
    for i, above in enumerate(strict):
        (np.greater if above else np.greater_equal)(v, pos[:, i:i + 1], out=hit)
        k += hit
    k = k.astype(np.intp)
    a, b, slope, cap = (np.take_along_axis(u, k, axis=1) for u in (a, b, slope, cap))
    return np.minimum(b + (v - a) * slope, cap)


def _conformal(x, y, rows_of, n_windows, levels, calibrated, lag=None, knots=None, knot_levels=()):
    """Asymmetric CQR-m per bound of every level, applied as one monotone map (module docstring)."""
    w, s, h = x.shape
    nl = len(levels)
    ordered = np.sort(x, axis=1)  # one sort (numpy's vectorised sort): cheaper than its multi-position partition
    med = _median(ordered)                                                     # [W, H]
    lower, upper, from_knots = _tails(ordered, levels, knots, knot_levels)     # [W, L, H]
    low, high = _middle(ordered, knots, knot_levels)
    dist = np.stack([med[:, None] - lower, upper - med[:, None]], axis=1)      # [W, 2, L, H]: bound - median
    off = np.stack([med - y, y - med], axis=1)[:, :, None]                     # the outcome, side-ward
    ok = dist > 0
    score = np.where(ok, off / np.where(ok, dist, 1.0), np.nan)                # > F: outside the F-scaled bound
    cols = score.reshape(w, -1)
    conf = np.broadcast_to(((1 + np.asarray(levels)) / 2)[None, :, None], (2, nl, h)).reshape(-1)
    if lag is not None:  # prefix sets: one sorted pass
        factor, n = _conformal_qhat(cols, lag, conf)
    else:
        factor, n = np.zeros(cols.shape), np.zeros(cols.shape, dtype=np.int64)
        for rows_slice in _chunks(n_windows, n_windows * cols.shape[1]):
            srt, count = _masked_sorted(cols, rows_of(rows_slice))
            lo, hi, g = _smoothed_rank(count, conf)
            a = np.take_along_axis(srt, lo[:, None, :], axis=1)[:, 0, :]
            b = np.take_along_axis(srt, hi[:, None, :], axis=1)[:, 0, :]
            got = _between(np.where(count > 0, a, 0.0), np.where(count > 0, b, 0.0), g)
            factor[rows_slice], n[rows_slice] = np.where(count > 0, got, 0.0), count
    factor, n = factor.reshape(dist.shape), n.reshape(dist.shape)
    # each bound's distance from the fixed middle now (reach) and corrected, as a scale about the middle
    reach = np.stack([low[:, None] - lower, upper - high[:, None]], axis=1)   # [W, 2, L, H]
    shift = np.stack([med - low, high - med], axis=1)[:, :, None]
    usable = ((reach > 0) & (n > 0)).all(axis=(1, 2)) & calibrated[:, None]    # [W, H]
    scale = np.maximum(np.maximum(factor, 0.0) * dist - shift, 0.0) / np.where(reach > 0, reach, 1.0)
    # the points each bound is scored from (the two samples its quantile interpolates, and its knot where it is
    # read there), each carried to its side's corrected scale about the fixed middle; in ascending order
    ends = []
    for side, edge in enumerate((low, high)):
        at, c = [], []
        for i, pair in enumerate(_brackets(s, levels)):
            at += [ordered[:, j] for j in pair[side]] + ([(lower, upper)[side][:, i]] if from_knots[i] else [])
            c += [scale[:, side, i]] * (len(pair[side]) + from_knots[i])
        at, c = np.stack(at, axis=1), np.stack(c, axis=1)                      # [W, M, H]
        by = np.argsort(at, axis=1, kind="stable")
        at = np.take_along_axis(at, by, axis=1)
        val = edge[:, None] + np.take_along_axis(c, by, axis=1) * (at - edge[:, None])
        # an outer bound reaches at least as far as an inner one: a running min outward below, max above
        if side == 0:
            val = np.minimum.accumulate(val[:, ::-1], axis=1)[:, ::-1]
        else:
            val = np.maximum.accumulate(val, axis=1)
        ends.append((at, val))
    pos = np.concatenate([ends[0][0], low[:, None], high[:, None], ends[1][0]], axis=1)   # [W, P, H]
    val = np.concatenate([ends[0][1], low[:, None], high[:, None], ends[1][1]], axis=1)
    strict = [True] * ends[0][0].shape[1] + [False] * (2 + ends[1][0].shape[1])
    rays = np.stack([(low - val[:, 0]) / np.where(usable, low - pos[:, 0], 1.0),
                     (val[:, -1] - high) / np.where(usable, pos[:, -1] - high, 1.0)], axis=1)
    identity = np.arange(pos.shape[1], dtype=np.float64)[None, :, None]
    pos, val = np.where(usable[:, None], pos, identity), np.where(usable[:, None], val, identity)
    rays = np.where(usable[:, None], rays, 1.0)

    def move(v):
        """The map on values v [W, N, H] (samples or knots); windows not recalibrated keep theirs."""
        return np.where(usable[:, None], _piecewise(v, pos, val, strict, rays), v) if usable.any() else v.copy()

    return move(x), None if knots is None else move(knots)


def _map_knots(knots, levels, probs, use):
    """Quantile mapping of knots [W, K, H]: the knots' own quantile function at R^-1(levels) ``probs`` [W, K, H]
    where ``use`` [W, 1 or K, H] (module docstring)."""
    import torch  # only a model with quantiles of its own pays for the quantile function's import

    from marketcast.forecast.quantiles import quantile_function

    u = torch.as_tensor(np.clip(np.nan_to_num(probs, nan=0.5), 0.0, 1.0))
    moved = quantile_function(torch.as_tensor(knots), u, levels).numpy()
    return np.where(use, moved, knots)


def _hazen(sorted_values: np.ndarray, n: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Quantiles at ``tau`` [B, L, H] of the first ``n`` [B, H] sorted values along axis 1 of ``sorted_values``
    [B, M, H], interpolating linearly between plotting positions (i + 0.5) / n (Hazen)."""
    n = n[:, None, :]
    pos = np.clip(tau * n - 0.5, 0.0, np.maximum(n - 1, 0))
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
    a = np.take_along_axis(sorted_values, lo, axis=1)
    b = np.take_along_axis(sorted_values, hi, axis=1)
    step = np.subtract(b, a, out=np.zeros_like(a), where=hi > lo)  # +inf padding never enters a difference
    return a + (pos - lo) * step


def _quantile_map(x, y, rows_of, n_windows, seed, calibrated, lag=None, knots=None, levels=()):
    from marketcast.calibrate.pit import pit_values  # only this method needs the PIT module

    _, s, h = x.shape
    known = np.isfinite(y)
    pit = np.where(known, pit_values(x, np.where(known, y, 0.0), axis=1, seed=seed), np.nan)
    order = np.argsort(x, axis=1, kind="stable")
    xs = np.take_along_axis(x, order, axis=1)                       # [W, S, H] sorted samples
    ranks = np.empty_like(order)  # the inverse permutation of order (what argsort(order) gives), in O(S)
    np.put_along_axis(ranks, order, np.arange(s)[None, :, None], axis=1)
    tau = ((np.arange(s) + 0.5) / s)[None, :, None]
    out = x.copy()
    moved = None if knots is None else knots.copy()
    if lag is not None:  # prefix sets: R^-1(tau_r) of each calibrated window from one sorted pass
        mapped = _prefix_hazen(pit, lag, calibrated, tau[0, :, 0])          # [W, S, H], NaN: no settled PIT
        new = np.take_along_axis(_hazen(xs, np.full((n_windows, h), s), np.nan_to_num(mapped)), ranks, axis=1)
        use = calibrated[:, None, None] & ~np.isnan(mapped[:, :1, :])
        if knots is not None:
            knots = _map_knots(knots, levels, _prefix_hazen(pit, lag, calibrated, np.asarray(levels)), use)
        return np.where(use, new, x), knots
    for rows_slice in _chunks(n_windows, max(n_windows, s) * h):
        srt, n = _masked_sorted(pit, rows_of(rows_slice))
        mapped = _hazen(srt, n, np.broadcast_to(tau, (srt.shape[0], s, h)))       # R^-1(tau_r), [B, S, H]
        count = np.full(n.shape, s)
        new_sorted = _hazen(xs[rows_slice], count, mapped)                          # F_k^-1(R^-1(tau_r))
        new = np.take_along_axis(new_sorted, ranks[rows_slice], axis=1)
        use = calibrated[rows_slice, None, None] & (n > 0)[:, None, :]
        out[rows_slice] = np.where(use, new, x[rows_slice])
        if knots is not None:
            lv = np.broadcast_to(np.asarray(levels)[None, :, None], (srt.shape[0], len(levels), h))
            moved[rows_slice] = _map_knots(knots[rows_slice], levels, _hazen(srt, n, lv), use)
    return out, moved


def recalibrate(samples, outcomes, method: str = "conformal", *, horizon: int | None = None, step: int = 1,
                settled_before: np.ndarray | None = None, min_windows: int = 50,
                levels: tuple[float, ...] = LEVELS, seed: int = 0, knots: np.ndarray | None = None,
                knot_levels: tuple[float, ...] = ()) -> Recalibrated:
    """Recalibrate each window's samples from the windows settled before it (module docstring).

    samples:        ``[W, S, H]`` sample paths of one field (or ``[W, S]``, read as H = 1), windows in time order.
    outcomes:       ``[W, H]`` (or ``[W]``) realised values in the samples' units; NaN allowed only for windows
                    that settle before no window (the last ones).
    horizon/step:   the settlement rule j + ceil(horizon / step) <= k (horizon and step in bars); or instead
                    ``settled_before`` bool ``[W, W]`` (row k: windows settled before k decides).
    min_windows:    settled windows needed before a window is recalibrated (10 <= min_windows <= W).
    levels:         conformal: the nominal levels of the equal-tailed intervals whose two bounds are each
                    corrected (default: the levels the coverage report scores, 50/80/90/95 %).
    seed:           the PIT randomisation of ``quantile``.
    knots:          optional ``[W, K, H]`` (or ``[W, K]``) quantiles at the sorted ``knot_levels`` in (0, 1): moved
                    by each window's map (module docstring) into ``Recalibrated.knots``.
    """
    where = "recalibrate"
    if method not in METHODS:
        raise ConfigError(f"{where}: unknown method {method!r}; use one of {', '.join(METHODS)}")
    if isinstance(levels, (str, bytes)) or not np.iterable(levels) or not len(levels) \
            or not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                       and 0.0 < v < 1.0 for v in levels) or len(set(levels)) < len(levels):
        raise ConfigError(f"{where}: levels={levels!r} must be distinct interval levels in (0, 1); pass e.g. "
                          "(0.5, 0.8, 0.9, 0.95)")
    x = np.asarray(samples, dtype=np.float64)
    y = np.asarray(outcomes, dtype=np.float64)
    flat = x.ndim == 2
    if flat:
        x, y = x[:, :, None], y[:, None] if y.ndim == 1 else y
    if x.ndim != 3 or y.shape != (x.shape[0], x.shape[2]):
        raise ConfigError(f"{where}: samples {np.shape(samples)} and outcomes {np.shape(outcomes)} do not fit; "
                          "pass samples [W, S, H] with outcomes [W, H] (or [W, S] with [W])")
    n_windows = x.shape[0]
    q = None
    if knots is not None:
        q = np.asarray(knots, dtype=np.float64)
        q = q[:, :, None] if flat and q.ndim == 2 else q
        lv = np.asarray(knot_levels, dtype=np.float64)
        if q.shape != (n_windows, len(lv), x.shape[2]) or len(lv) < 2 or not np.isfinite(q).all() \
                or not ((lv > 0) & (lv < 1)).all() or (np.diff(lv) <= 0).any():
            raise ConfigError(f"{where}: knots {np.shape(knots)} at levels {tuple(knot_levels)} do not fit samples "
                              f"{np.shape(samples)}; pass finite knots [W, K, H] at K >= 2 increasing levels in (0, 1)")
    if x.shape[1] == 0 or not np.isfinite(x).all():
        raise ConfigError(f"{where}: samples are empty or hold NaN/inf; repair or drop those windows first")
    if (horizon is None) == (settled_before is None):
        raise ConfigError(f"{where}: pass exactly one of horizon= (equally spaced windows) or settled_before= "
                          "(a [W, W] mask of settled windows)")
    if isinstance(min_windows, bool) or not isinstance(min_windows, (int, np.integer)) \
            or not 10 <= min_windows <= n_windows:
        raise ConfigError(f"{where}: min_windows={min_windows!r} must be a whole number in [10, {n_windows}] "
                          f"(the number of windows); lower it or pass more windows")
    if settled_before is None:
        _check_positive_int(horizon, "horizon")
        _check_positive_int(step, "step")
        lag = math.ceil(horizon / step)
        idx = np.arange(n_windows)

        def rows_of(sl: slice) -> np.ndarray:
            return idx[None, :] + lag <= idx[sl, None]

        n_settled = np.maximum(idx - lag + 1, 0)
        used = idx + lag <= n_windows - 1
        prefix_lag = lag
    else:
        mask = np.asarray(settled_before)
        if mask.dtype != bool or mask.shape != (n_windows, n_windows):
            raise ConfigError(f"{where}: settled_before must be a bool [{n_windows}, {n_windows}] mask, got "
                              f"{mask.dtype} {mask.shape}; build it with settled_mask or from settle times")
        if np.triu(mask).any():
            raise ConfigError(f"{where}: settled_before marks a window settled before itself or an earlier window "
                              "(a look-ahead); only [k, j] with j < k may be True")

        def rows_of(sl: slice) -> np.ndarray:
            return mask[sl]

        n_settled = mask.sum(axis=1)
        used = mask.any(axis=0)
        prefix_lag = None
    if not np.isfinite(y[used]).all():
        bad = int(np.flatnonzero(used & ~np.isfinite(y).all(axis=1))[0])
        raise ConfigError(f"{where}: window {bad} is settled before a later window but its outcome is NaN/inf; "
                          "pass its realised value")
    calibrated = (n_settled >= min_windows) & (method != "none")
    if method == "conformal":
        out, q = _conformal(x, y, rows_of, n_windows, tuple(sorted(float(v) for v in levels)), calibrated,
                            prefix_lag, q, tuple(float(v) for v in knot_levels))
    elif method == "quantile":
        out, q = _quantile_map(x, y, rows_of, n_windows, seed, calibrated, prefix_lag, q,
                               tuple(float(v) for v in knot_levels))
    else:
        out, q = x.copy(), None if q is None else q.copy()
    if q is not None and flat:
        q = q[:, :, 0]
    return Recalibrated(out[:, :, 0] if flat else out, calibrated, np.asarray(n_settled, dtype=np.int64), q)
