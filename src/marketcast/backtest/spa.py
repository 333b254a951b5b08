"""White's reality check and Hansen's SPA test in numpy, every bootstrap resample at once.

The statistic and p-values are those of ``arch.bootstrap.SPA`` (arch 7-8, ``bootstrap="stationary"``, default
block size, no nested bootstrap), which the tests hold this module to resample for resample; arch itself is
not imported (it brings scipy, statsmodels and matplotlib, about a second) and its bootstrap is a Python loop
per resample. With T windows, K models and d[t, k] = L0[t] - Lk[t] the loss differentials (benchmark loss
minus model k's loss; a loss is a negative return, so d > 0 where model k earned more):

* **Statistic** (White, "A Reality Check for Data Snooping", Econometrica 68(5), 2000): the best mean
  differential, ``T_obs = max_k dbar_k`` with ``dbar_k = (1/T) sum_t d[t, k]``. As in arch, it is *not*
  studentised (arch's ``studentize`` flag only labels the run): Hansen's studentised max(sqrt(T) dbar_k / w_k)
  would give other numbers. Studentisation enters through the recentring threshold below.
* **Variance** of sqrt(T) dbar_k (Hansen, "A Test for Superior Predictive Ability", JBES 23(4), 2005,
  section 2.3; the stationary bootstrap's variance of a mean, Politis and Romano 1994, eq. 3):
  ``w_k^2 = g_0 + 2 sum_{i=1}^{T-1} kappa_i g_i`` with autocovariances ``g_i = (1/T) sum_{t<T-i} e_t e_{t+i}``
  of the demeaned ``e = d - dbar`` and ``kappa_i = (1 - i/T)(1 - q)^i + (i/T)(1 - q)^(T-i)``, q = 1/block.
* **Recentring** ``g(dbar_k)`` of each resampled mean, Z*_{b,k} = dbar*_{b,k} - g(dbar_k): White's reality
  check (arch's "upper") always recentres, g(x) = x; Hansen's consistent SPA recentres only models within
  ``-sqrt(w_k^2 / T * 2 log log T)`` of the benchmark, g(x) = x 1{x >= that bound} (a model far worse than
  the benchmark keeps its negative mean and cannot set the max); "lower" recentres only models that beat
  it, g(x) = max(x, 0).
* **p-value**: ``p = (1/B) sum_b 1{max_k Z*_{b,k} > T_obs}`` over B resamples.
* **Resamples** by the stationary bootstrap (Politis and Romano, "The Stationary Bootstrap", JASA 89(428),
  1994), blocks of geometric length with mean ``block`` = floor(sqrt(T)) (arch's default): index 0 and each
  index whose uniform u_t <= q = 1/block start a block at a uniform draw s_t of {0..T-1}; otherwise the index
  follows its predecessor, wrapping from T-1 to 0. With l(t) the last block start at or before t,
  ``tau_t = (s_l(t) + t - l(t)) mod T``: that closed form builds all B paths at once (:func:`stationary_indices`).

The p-value of B resamples is itself a Monte Carlo estimate with standard error sqrt(p (1 - p) / B);
:data:`REPS` is chosen so that a p near the 5 % level carries at most 0.005 of it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

LEVEL = 0.05  # the p-value whose Monte Carlo error sets the resample count
MC_ERROR = 0.005  # the largest Monte Carlo standard error allowed there
REPS = math.ceil(LEVEL * (1 - LEVEL) / MC_ERROR**2)  # 1,900: sqrt(0.05 * 0.95 / 1900) = 0.0050
_CHUNK = 1 << 21  # resampled values (B x T x K) built at a time: about 16 MB


def block_size(windows: int) -> int:
    """arch's default block length for the stationary bootstrap: floor(sqrt(T))."""
    return int(math.sqrt(windows))


def mc_error(p: float, reps: int) -> float:
    """Monte Carlo standard error of a p-value estimated from ``reps`` resamples: sqrt(p (1 - p) / B)."""
    return math.sqrt(p * (1 - p) / reps)


@lru_cache(maxsize=1)
def seeded_indices(seed: int, windows: int, block: int, reps: int) -> np.ndarray:
    """:func:`stationary_indices` from ``numpy.random.default_rng(seed)``, drawn once for the benchmarks of a
    symbol that share them (read-only int32: half the memory of a long backtest's paths)."""
    out = stationary_indices(np.random.default_rng(seed), windows, block, reps).astype(np.int32)
    out.flags.writeable = False
    return out


def stationary_indices(rng: np.random.Generator, windows: int, block: int, reps: int) -> np.ndarray:
    """``[reps, windows]`` stationary-bootstrap index paths (module docstring), drawn in two calls: the block
    starts, then the uniforms that decide where blocks begin."""
    starts = rng.integers(windows, size=(reps, windows), dtype=np.int64)
    new = rng.random((reps, windows)) <= 1.0 / block
    return paths(starts, new)


def paths(starts: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Index paths from the ``[B, T]`` block-start draws and the flags of the positions that start a block
    (position 0 always does): tau_t = (s_l(t) + t - l(t)) mod T, l(t) the last start at or before t."""
    t = starts.shape[1]
    pos = np.arange(t)
    last = np.maximum.accumulate(np.where(new, pos, 0), axis=1)  # before any flagged start: position 0
    return (np.take_along_axis(starts, last, axis=1) + pos - last) % t


def variances(diff: np.ndarray, block: int) -> np.ndarray:
    """``w_k^2`` of each column of the ``[T, K]`` differentials (module docstring): one product per lag, as arch."""
    t = len(diff)
    e = diff - diff.mean(axis=0)
    q = 1.0 / block
    lag = np.arange(1, t)
    kappa = (1 - lag / t) * (1 - q) ** lag + (lag / t) * (1 - q) ** (t - lag)
    gammas = np.array([np.sum(e[: t - i] * e[i:], axis=0) for i in range(1, t)]).reshape(t - 1, -1) / t
    return np.sum(e * e, axis=0) / t + 2 * kappa @ gammas


def pvalues(diff, indices: np.ndarray, block: int) -> dict[str, float]:
    """The "lower", "consistent" (Hansen's SPA) and "upper" (White's reality check) p-values of the ``[T, K]``
    loss differentials over the ``[B, T]`` resample ``indices`` (module docstring)."""
    d = np.asarray(diff, dtype=np.float64).reshape(len(diff), -1)
    t = len(d)
    mean = d.mean(axis=0)
    bound = -np.sqrt(variances(d, block) / t * 2 * np.log(np.log(t)))
    centres = np.stack([np.maximum(mean, 0.0), np.where(mean >= bound, mean, 0.0), mean])  # lower, consistent, upper
    observed = mean.max()
    above = np.zeros(3, dtype=np.int64)
    step = max(1, _CHUNK // (t * d.shape[1]))
    for lo in range(0, len(indices), step):
        star = d[indices[lo:lo + step]].mean(axis=1)  # [b, K] resampled means, summed in arch's order
        above += (np.max(star[:, None, :] - centres[None], axis=2) > observed).sum(axis=0)
    p = above / len(indices)
    return {"lower": float(p[0]), "consistent": float(p[1]), "upper": float(p[2])}
