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
``conformal``  split-conformal on standardised residuals (Vovk, Gammerman & Shafer 2005, *Algorithmic
               Learning in a Random World*; Romano, Patterson & Candes 2019, "Conformalized quantile
               regression"; Angelopoulos & Bates 2021, "A gentle introduction to conformal prediction").
               z_j = (y_j - median_j) / spread_j over the settled windows (spread: the samples' std or IQR);
               Qhat = the ceil((n + 1) * level)-th smallest |z_j| (the largest when that exceeds n);
               q_k = the ``level`` quantile of window k's own |x - median_k| / spread_k over its samples.
               The samples are widened (or narrowed) about their median by Qhat / q_k, so window k's
               central ``level`` interval gets the conformal width. Can move samples beyond their range;
               fixes the width, not a bias (the median stays).
``quantile``   quantile mapping of the PIT (Kuleshov, Fenner & Ermon 2018, "Accurate uncertainties for
               deep learning using calibrated regression", ICML): R = the empirical CDF of the settled
               windows' PITs (:func:`marketcast.calibrate.pit.pit_values`); the recalibrated CDF is
               R(F_k), so the sample of rank r (level tau_r = (r + 0.5) / S) becomes F_k^-1(R^-1(tau_r)).
               Stays inside window k's sample range.

Both maps are monotone in each (window, step) column, so every sample keeps its rank and the paths keep
their dependence across the horizon (the idea of ensemble copula coupling, Schefzik, Thorarinsdottir &
Gneiting 2013).

Quantiles (``knots`` ``[W, K, H]`` at ``levels``: a model's own quantiles, :class:`marketcast.forecast.base.Forecast`)
go through the same map as their window's samples, so they stay the quantiles of the recalibrated samples:
conformal applies the window's own affine map median + Qhat / q_k * (knot - median) to each knot (exact: a
sample quantile moves with it); quantile mapping moves each knot from its level alpha to the knots' own
quantile function (:func:`marketcast.forecast.quantiles.quantile_function`) at R^-1(alpha), the same map of
probabilities R the samples take (equal to the samples' knots within sampling error).

Cost. With ``horizon``/``step`` the windows settled before k are a prefix of the windows (0 .. k - lag), so
one pass in settlement order keeps the past scores sorted (a binary search and one insertion per window:
O(W log W) comparisons, the insertions a memmove each) and reads each window's order statistics from it;
everything else is vectorised over all windows, and each window's median and own quantile come from one
single-position selection each (:func:`_median`, :func:`_quantile`: numpy's values bit for bit, several
times faster than its two-position partition; conformal selects in place in one working copy of the
samples, since the spread and the scores' quantile do not depend on the order within a row). For 5,000
windows x 256 samples conformal takes about 10 ms of CPU per field, quantile mapping about 110 ms (the stable
argsort of the samples and the per-window gathers). A ``settled_before`` mask can describe any set, so it
takes the general route: past scores masked to +inf and sorted, in chunks of windows (O(W^2 H log W)). Both routes give the same order statistics, so
the same samples bit for bit (``tests/calibrate/test_recalibrate_fast.py``).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from marketcast.errors import ConfigError

METHODS = ("none", "conformal", "quantile")
SPREADS = ("std", "iqr")
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


def _order_pair(x: np.ndarray, k: int, inplace: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The k-th and (k+1)-th smallest along axis 1 from one single-position selection (numpy partitions at two
    positions several times slower than at one): the (k+1)-th is placed, the k-th is the largest below it.
    ``inplace`` reorders ``x`` within its rows instead of copying it."""
    if inplace:
        x.partition(k + 1, axis=1)
    part = x if inplace else np.partition(x, k + 1, axis=1)
    return part[:, :k + 1].max(axis=1), part[:, k + 1]


def _median(x: np.ndarray, inplace: bool = False) -> np.ndarray:
    """``np.median(x, axis=1)`` of finite samples, the same value bit for bit: the middle one, or the mean
    (a + b) / 2 of the middle two, as numpy forms it. ``inplace``: as :func:`_order_pair`."""
    n = x.shape[1]
    if n % 2:
        if inplace:
            x.partition(n // 2, axis=1)
        return (x if inplace else np.partition(x, n // 2, axis=1))[:, n // 2].copy()
    a, b = _order_pair(x, n // 2 - 1, inplace)
    return (a + b) / 2


def _quantile(x: np.ndarray, level: float, inplace: bool = False) -> np.ndarray:
    """``np.quantile(x, level, axis=1)`` (method "linear", Hyndman & Fan 1996 type 7) of finite samples, the
    same value bit for bit: numpy's virtual index (n - 1) * level and its two-sided interpolation (``_lerp``).
    ``inplace``: as :func:`_order_pair`."""
    n = x.shape[1]
    v = float(np.float64(n - 1) * np.float64(level))
    if v >= n - 1:
        return x.max(axis=1)
    if v < 0:
        return x.min(axis=1)
    k = math.floor(v)
    a, b = _order_pair(x, k, inplace)
    gamma = v - k
    diff = b - a
    out = a + diff * gamma
    if gamma >= 0.5:
        out = b - diff * (1 - gamma)
    return out


def _spread(dev: np.ndarray, kind: str) -> np.ndarray:
    """[W, H] spread of samples [W, S, H] from their deviations ``dev`` about the median (any order within a
    row): std (ddof=0; the variance as mean(dev^2) - mean(dev)^2, well conditioned since dev is centred by the
    median, in one pass without a temporary) or interquartile range."""
    if kind == "std":
        n = dev.shape[1]
        mean = dev.sum(axis=1) / n
        return np.sqrt(np.maximum(np.einsum("wsh,wsh->wh", dev, dev) / n - mean * mean, 0.0))
    q75, q25 = np.quantile(dev, [0.75, 0.25], axis=1)
    return q75 - q25


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
    """Qhat [W, H] and the counts n [W, H] of the settled scores, one pass in settlement order (prefix sets):
    window k inserts the score of window k - lag into a sorted list and reads its rank-th smallest. The counts
    and ranks (those of the general route: clip(ceil((n + 1) * level), 1, n), 1-based) are computed for every
    window at once; the loop only inserts and reads."""
    w, h = z.shape
    qhat = np.zeros((w, h))
    settled = np.zeros((w, h), dtype=np.int64)
    settled[lag:] = np.cumsum(np.isfinite(z), axis=0)[:max(w - lag, 0)]
    rank = np.clip(np.ceil((settled + 1) * level).astype(np.int64), 1, np.maximum(settled, 1)) - 1
    for j in range(h):
        col, r, n, values, q = z[:, j].tolist(), rank[:, j].tolist(), settled[:, j].tolist(), [], [0.0] * w
        insort, isfinite = bisect.insort, math.isfinite
        for k in range(lag, w):
            v = col[k - lag]
            if isfinite(v):
                insort(values, v)
            if n[k]:
                q[k] = values[r[k]]
        qhat[:, j] = q
    return qhat, settled


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


def _conformal(x, y, rows_of, n_windows, level, spread_kind, calibrated, lag=None, knots=None):
    # one working copy of the samples, reordered within rows by the selections: the spread and the scores'
    # quantile do not depend on the order
    work = x.copy()
    med = _median(work, inplace=True)                               # [W, H]
    work -= med[:, None]                                            # deviations about the median
    spread = _spread(work, spread_kind)
    positive = spread > 0
    safe = np.where(positive, spread, 1.0)
    z = np.where(positive, np.abs(y - med) / safe, np.nan)          # NaN: unusable (no spread / unknown y)
    np.abs(work, out=work)
    work /= safe[:, None]
    own = _quantile(work, level, inplace=True)                      # [W, H]
    del work
    factor = np.ones_like(med)
    scaled = np.zeros(med.shape, dtype=bool)
    if lag is not None:  # prefix sets: one sorted pass
        qhat, n = _conformal_qhat(z, lag, level)
        usable = (n > 0) & positive & (own > 0) & calibrated[:, None]
        factor = np.where(usable, qhat / np.where(own > 0, own, 1.0), 1.0)
        dev = x - med[:, None]
        dev *= factor[:, None, :]
        dev += med[:, None, :]                                      # med + factor * (x - med)
        np.copyto(dev, x, where=~usable[:, None, :])
        return dev, _affine(knots, med, factor, usable)
    for rows_slice in _chunks(n_windows, n_windows * x.shape[2]):
        srt, n = _masked_sorted(z, rows_of(rows_slice))
        rank = np.clip(np.ceil((n + 1) * level).astype(np.int64), 1, np.maximum(n, 1))  # 1-based
        qhat = np.take_along_axis(srt, (rank - 1)[:, None, :], axis=1)[:, 0, :]
        usable = (n > 0) & positive[rows_slice] & (own[rows_slice] > 0) & calibrated[rows_slice, None]
        factor[rows_slice] = np.where(usable, qhat / np.where(own[rows_slice] > 0, own[rows_slice], 1.0), 1.0)
        scaled[rows_slice] = usable
    out = np.where(scaled[:, None, :], med[:, None, :] + factor[:, None, :] * (x - med[:, None, :]), x)
    return out, _affine(knots, med, factor, scaled)


def _affine(knots, med, factor, usable):
    """Conformal's map of each window, median + factor * (knot - median), on knots [W, K, H] (None: None)."""
    if knots is None:
        return None
    return np.where(usable[:, None, :], med[:, None, :] + factor[:, None, :] * (knots - med[:, None, :]), knots)


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
                settled_before: np.ndarray | None = None, min_windows: int = 50, level: float = 0.8,
                spread: str = "std", seed: int = 0, knots: np.ndarray | None = None,
                knot_levels: tuple[float, ...] = ()) -> Recalibrated:
    """Recalibrate each window's samples from the windows settled before it (module docstring).

    samples:        ``[W, S, H]`` sample paths of one field (or ``[W, S]``, read as H = 1), windows in time order.
    outcomes:       ``[W, H]`` (or ``[W]``) realised values in the samples' units; NaN allowed only for windows
                    that settle before no window (the last ones).
    horizon/step:   the settlement rule j + ceil(horizon / step) <= k (horizon and step in bars); or instead
                    ``settled_before`` bool ``[W, W]`` (row k: windows settled before k decides).
    min_windows:    settled windows needed before a window is recalibrated (10 <= min_windows <= W).
    level:          conformal: the central interval level whose width is matched (0.8: the 80 % interval).
    spread:         conformal standardisation, ``std`` or ``iqr``.
    seed:           the PIT randomisation of ``quantile``.
    knots:          optional ``[W, K, H]`` (or ``[W, K]``) quantiles at the sorted ``knot_levels`` in (0, 1): moved
                    by each window's map (module docstring) into ``Recalibrated.knots``.
    """
    where = "recalibrate"
    if method not in METHODS:
        raise ConfigError(f"{where}: unknown method {method!r}; use one of {', '.join(METHODS)}")
    if spread not in SPREADS:
        raise ConfigError(f"{where}: unknown spread {spread!r}; use one of {', '.join(SPREADS)}")
    if isinstance(level, bool) or not isinstance(level, (int, float, np.integer, np.floating)) \
            or not 0.0 < level < 1.0:
        raise ConfigError(f"{where}: level={level!r} is outside (0, 1); pass e.g. 0.8 for the 80 % interval")
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
        out, q = _conformal(x, y, rows_of, n_windows, float(level), spread, calibrated, prefix_lag, q)
    elif method == "quantile":
        out, q = _quantile_map(x, y, rows_of, n_windows, seed, calibrated, prefix_lag, q,
                               tuple(float(v) for v in knot_levels))
    else:
        out, q = x.copy(), None if q is None else q.copy()
    if q is not None and flat:
        q = q[:, :, 0]
    return Recalibrated(out[:, :, 0] if flat else out, calibrated, np.asarray(n_settled, dtype=np.int64), q)
