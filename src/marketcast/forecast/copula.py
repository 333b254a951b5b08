"""Joint close/high/low paths from marginal quantiles: a Gaussian copula fitted to the context's own bars.

Why: a quantile model (Toto 2.0, Chronos-2, TimesFM, TiRex) predicts each field's marginal law, not their joint
law. Drawing the three fields with one shared uniform (comonotone) locks a bar's range: a path whose high is above
its median has its low above its median too, so "both MaxDiff limits fill in one bar" almost never happens, unlike
in the real bars and in the paths of the sample models (Toto 1.0, Kronos).

By Sklar's theorem (Sklar 1959, "Fonctions de répartition à n dimensions et leurs marges"; Nelsen 2006, "An
Introduction to Copulas", 2nd ed., th. 2.10.9) any joint law is its marginals joined by a copula, so the marginals
can stay the model's own and only the joint uniforms change. Here the copula is Gaussian, with the correlation of
the context's normal scores (van der Waerden scores: ``Phi^-1(rank / (n + 1))`` of each field's residual; Genest,
Ghoudi & Rivest 1995, Biometrika 82(3), the rank-based estimate; Klaassen & Wellner 1997, Bernoulli 3(1), its
efficiency for the Gaussian copula). With ``hold="clip"`` it joins close, high and low relative to
``close_t-1``; with ``hold="excursions"`` it joins bar t's close (``close_t / close_t-1 - 1``) and its
excursions beyond it, ``(high_t - close_t) / close_t-1`` and ``(close_t - low_t) / close_t-1``: a bar's high is
never below its close, and a copula of close and high themselves (both relative to ``close_t-1``) has no edge at
``high = close``, so it draws highs below the close often (28 % of draws for a model calibrated on the context),
which then had to be clipped onto the close: 12-16 % of path bars with ``high == close``, against 4-5 % of the
embedded bars. Chosen over the empirical copula because a 3 x 3 matrix is estimated well from the few hundred bars
of a context and gives a smooth law with continuous uniforms (an empirical copula would repeat the context's ``n``
rank triples, ties included, as the only joint outcomes), and it costs one 3 x 3 root per window. It reads the
window's own bars only (bars <= the decision bar).

Two ways to hold a path to a bar (``joint_paths(hold=...)``). ``"clip"``, the default: the copula of close/high/low
themselves, a high below the close raised to it (a low above it lowered, :func:`hold_body`); on the embedded daily
data with knots the context's own quantiles (``every 10th window, 256 paths``) that puts 16 % of path bars at
``high == close`` and 12-13 % at ``low == close``, and moves the knots' levels by up to 0.036. ``"excursions"``
holds what follows; it meets the atoms (<= 2 %) and the knots (within 0.003), but the share of path bars holding
both MaxDiff limits (tests/forecast/test_copula.py) is 0.139 for that calibrated model against the real bars'
0.119 and 0.215 for Toto 2.0 with random weights (its narrow marginals order highs by the context's excursions),
beyond that test's factor 1.25, so it is not the default. Neither holds the bar's open (below).

What ``"excursions"`` holds, per window and step (:func:`pair_by_excursions`):

- **The model's marginals, draw for draw.** Each field's ``S`` draws are ``quantile_function(knots, u)`` at
  copula uniforms ``u`` (each uniform on (0, 1)), so a draw at a knot's level is that knot. The close keeps its
  draws in place; the high (low) draws are only permuted across the window's paths: handed out in the order of
  ``close + excursion`` (``close - excursion``), the excursion the context's empirical quantile at the copula's
  uniform (Iman & Conover 1982, "A distribution-free approach to inducing rank correlation", the same
  rank-reordering idea), then permuted greedily (the highest close first) so that ``high >= close`` and ``low <= close``
  (:func:`rearrange_above`). Where the model's high draws do not dominate its close draws (its tails beyond the
  outer knots cross), the high of a path no permutation can hold is its close plus the context's excursion:
  only mass beyond the outer knots changes. On the embedded daily data, with knots the context's own quantiles,
  every knot of high and low keeps its level within 0.003 and 1 % of path bars have ``high == close`` (0.3 %
  ``low == close``), the draws whose context excursion is 0 (``meta["range_bound"]``: how often a draw was
  replaced; ``meta["repaired"]``: how often permuted).
- **Not held: the copula's dependence exactly**, where a permutation moves a draw (the rank order is the
  copula's, the moved draws take the nearest value that makes a bar), **and the open.** The quantile models
  forecast no open; a path's bar is held to its close only. Taking the previous close as the open would be false
  for the 10 % of SP500 and 15 % of NASDAQ daily bars whose high is below the previous close.

Steps stay independent (the models give no law across the horizon). A window with fewer than :data:`MIN_BARS`
residuals, or a field that never moves, has nothing to fit: its fields share one uniform (comonotone, the scheme
before the copula), and ``copula_fallback`` says in how many windows.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from scipy.special import ndtri
from scipy.stats import rankdata

from marketcast.forecast.base import INPUT_FIELDS, ContextBatch
from marketcast.forecast.quantiles import quantile_function
from marketcast.runtime.rng import uniforms, window_streams

FIELDS = ("close", "high", "low")
MIN_BARS = 16  # residuals needed to fit a 3 x 3 correlation; fewer: comonotone
HOLDS = ("clip", "excursions")  # how a path is held to a bar (module docstring); the first is the default
SAMPLING = {"clip": "Gaussian copula of the context's normal scores; linear between knots, exponential tails",
            "excursions": "Gaussian copula of the context's close and excursions; high/low draws permuted to hold "
                          "the bar; linear between knots, exponential tails"}


def residuals(batch: ContextBatch, excess: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``[B, 3, T-1]`` close/high/low of bar t relative to close t-1, and where both bars are real and finite;
    ``excess``: close, ``high - close`` and ``close - low`` (the bar's excursions beyond its close), same scale."""
    cols = [INPUT_FIELDS.index(f) for f in FIELDS]
    values = np.asarray(batch.values, dtype=np.float64)
    prev = values[:, :-1, INPUT_FIELDS.index("close")][:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = values[:, 1:, cols].transpose(0, 2, 1) / prev - 1.0
    mask = np.asarray(batch.mask, dtype=bool)
    valid = (mask[:, 1:] & mask[:, :-1])[:, None, :] & np.isfinite(r).all(axis=1, keepdims=True) & (prev > 0)
    if excess:
        r = np.stack([r[:, 0], r[:, 1] - r[:, 0], r[:, 0] - r[:, 2]], axis=1)
    return r, np.broadcast_to(valid, r.shape)


def normal_score_correlation(batch: ContextBatch, excess: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``[B, 3, 3]`` correlation of each window's close/high/low normal scores (``excess``: of close and the
    excursions, :func:`residuals`), and ``[B]`` whether it was fitted (False: fewer than :data:`MIN_BARS`
    residuals or a field without variation; its matrix is all ones)."""
    r, valid = residuals(batch, excess)
    n = valid[:, 0].sum(axis=1)  # [B]
    ranks = rankdata(np.where(valid, r, np.inf), axis=-1)  # average ranks; padding ranks last and is dropped
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(valid, ndtri(ranks / (n[:, None, None] + 1.0)), 0.0)
        scores = np.where(valid, scores - scores.sum(-1, keepdims=True) / np.maximum(n, 1)[:, None, None], 0.0)
        cov = scores @ scores.transpose(0, 2, 1)  # [B, 3, 3]
        sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
        corr = cov / (sd[:, :, None] * sd[:, None, :])
    fitted = (n >= MIN_BARS) & (sd > 1e-12 * np.sqrt(np.maximum(n, 1))[:, None]).all(axis=1)
    corr = np.where(fitted[:, None, None], np.nan_to_num(corr), 1.0)
    corr[:, [0, 1, 2], [0, 1, 2]] = 1.0
    return corr, fitted


def correlation_root(corr: np.ndarray) -> np.ndarray:
    """``[B, 3, 3]`` ``A`` with ``A @ A.T = corr`` and unit row norms: the symmetric square root of the nearest
    (eigenvalues clipped at 0, diagonal rescaled to 1) correlation matrix, so singular matrices (comonotone
    fields) are allowed and every ``x = A z`` of standard normals ``z`` is standard normal field by field."""
    lam, vec = np.linalg.eigh(corr)
    root = vec @ (np.sqrt(np.clip(lam, 0.0, None))[:, :, None] * vec.transpose(0, 2, 1))
    return root / np.linalg.norm(root, axis=2, keepdims=True)


def joint_uniforms(corr: np.ndarray, keys: np.ndarray, seed: int, num_samples: int,
                   horizon: int) -> torch.Tensor:
    """``[B, 3, S, H]`` float64 uniforms with Gaussian copula ``corr`` ``[B, 3, 3]`` across the fields, independent
    across paths and steps; counter-based (:mod:`marketcast.runtime.rng`), keyed on each window, so a window's
    draws do not depend on which windows share the batch."""
    streams = window_streams(seed, keys).view(-1, 1, 1, 1)  # [B, 1, 1, 1]
    counters = torch.arange(3 * num_samples * horizon, dtype=torch.int64).view(1, 3, num_samples, horizon)
    z = torch.special.ndtri(uniforms(streams, counters).double())  # [B, 3, S, H] independent N(0, 1)
    root = torch.as_tensor(correlation_root(corr), dtype=torch.float64)
    return torch.special.ndtr(torch.einsum("bfg,bgsh->bfsh", root, z))


def hold_body(paths: np.ndarray, opens: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Paths ``[B, 3, S, H]`` (close, high, low) with ``high >= max(open, close)`` and ``low <= min(open, close)``
    on every draw, and the share of (path, step) draws where high or low was moved to the body. ``opens``
    ``[B, S, H]``: each bar's open where the model forecasts one; None (the quantile models: no open) holds the
    bar to its close alone (module docstring)."""
    close = paths[:, 0]
    top = close if opens is None else np.maximum(opens, close)
    bottom = close if opens is None else np.minimum(opens, close)
    bound = (paths[:, 1] < top) | (paths[:, 2] > bottom)
    out = paths.copy()
    out[:, 1], out[:, 2] = np.maximum(paths[:, 1], top), np.minimum(paths[:, 2], bottom)
    return out, float(bound.mean()) if bound.size else 0.0


def excursion_quantiles(batch: ContextBatch, u: np.ndarray) -> np.ndarray:
    """``[B, 2, ...]`` the context's empirical quantiles (inverse of its empirical CDF) of ``high - close`` and
    ``close - low`` on the previous close, at uniforms ``u`` ``[B, 2, ...]``; 0 in a window without residuals."""
    r, valid = residuals(batch, excess=True)
    e = np.sort(np.where(valid[:, 1:], r[:, 1:], np.inf), axis=-1)  # [B, 2, T-1], padding last
    n = valid[:, 0].sum(axis=1)[:, None, None]  # [B, 1, 1]
    flat = u.reshape(u.shape[0], 2, -1)
    idx = np.minimum((flat * n).astype(np.int64), np.maximum(n - 1, 0))
    out = np.where(n > 0, np.take_along_axis(e, idx, axis=-1), 0.0)
    return out.reshape(u.shape)


def rearrange_above(values: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """``[N, S]`` each row's ``values`` permuted across its ``S`` draws so that ``out >= floor`` wherever the row
    allows it (a permutation meeting every floor exists iff, sorted, the values dominate the floors). Greedy by
    floor, highest first: each draw takes, from the values not yet taken, the one nearest its own that meets its
    floor (none: the largest free value, so a draw the caller must replace is one from the far tail, where the
    model's marginal is extrapolated, not one at its knots). A row whose floors a permutation can meet gets one
    (a value taken by a higher floor meets every lower one), a draw whose own value meets its floor and is not
    taken keeps it, and rows that already meet every floor are returned as they are. The row's sample, hence each field's marginal,
    is unchanged: only which path holds which value moves."""
    out = values.copy()
    rows = np.flatnonzero((values < floor).any(axis=1))
    if rows.size == 0:
        return out
    vals, low, n = values[rows], floor[rows], np.arange(rows.size)
    order = np.argsort(-low, axis=1, kind="stable")
    free = np.ones(vals.shape, dtype=bool)
    taken = np.empty_like(vals)
    for k in range(vals.shape[1]):
        path = order[:, k]
        own, need = vals[n, path], low[n, path]
        cost = np.where(free & (vals >= need[:, None]), np.abs(vals - own[:, None]), np.inf)
        j = np.argmin(cost, axis=1)
        none = ~np.isfinite(cost[n, j])
        j[none] = np.argmax(np.where(free, vals, -np.inf), axis=1)[none]
        taken[n, path] = vals[n, j]
        free[n, j] = False
    out[rows] = taken
    return out


def pair_by_excursions(raw: np.ndarray, u: np.ndarray, batch: ContextBatch,
                       fitted: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Paths ``[B, 3, S, H]`` from the model's draws ``raw`` at the copula's uniforms ``u``: each window's high
    (low) draws at each step are handed out across its paths in the order of ``close + excursion`` (``close -
    excursion``), the excursion the context's own at the copula's uniform, then permuted so that ``high >= close``
    and ``low <= close`` wherever the draws allow (:func:`rearrange_above`); a draw no permutation can hold gets
    ``close`` plus (minus) its excursion. Windows not ``fitted`` ``[B]`` keep the shared uniform's order (comonotone)
    before that permutation. Also the shares of draws whose high or low was permuted, and replaced."""
    b, _, s, h = raw.shape
    scale = batch.last_close()[:, None, None, None]
    exc = excursion_quantiles(batch, u[:, 1:]) * scale  # [B, 2, S, H]
    close = raw[:, 0]
    out = raw.copy()
    for f, sign in ((1, 1.0), (2, -1.0)):
        proxy = close + sign * exc[:, f - 1]
        proxy = np.where(fitted[:, None, None], proxy, raw[:, f])
        order = np.argsort(np.argsort(proxy, axis=1, kind="stable"), axis=1)  # each path's rank of the proxy
        out[:, f] = np.take_along_axis(np.sort(raw[:, f], axis=1), order, axis=1)
    flat = out.transpose(0, 3, 1, 2).reshape(b * h, 3, s)  # one row per window and step
    high = rearrange_above(flat[:, 1], flat[:, 0])
    low = -rearrange_above(-flat[:, 2], -flat[:, 0])
    moved = float(((high != flat[:, 1]) | (low != flat[:, 2])).mean()) if high.size else 0.0
    high = high.reshape(b, h, s).transpose(0, 2, 1)
    low = low.reshape(b, h, s).transpose(0, 2, 1)
    left = (high < close) | (low > close)
    out[:, 1] = np.where(high < close, close + exc[:, 0], high)  # no permutation left: the context's excursion
    out[:, 2] = np.where(low > close, close - exc[:, 1], low)
    return out, moved, float(left.mean()) if left.size else 0.0


def joint_paths(quantiles: np.ndarray, levels: Sequence[float], batch: ContextBatch, seed: int,
                num_samples: int, hold: str = "clip") -> tuple[np.ndarray, dict]:
    """``[B, 3, num_samples, H]`` float64 close/high/low paths from ``[B, 3, K, H]`` knots at ``levels``, joined by
    the context's Gaussian copula and held to a bar by ``hold`` (:data:`HOLDS`; module docstring): ``"clip"`` raises
    a high below the close to it, ``"excursions"`` permutes the high and low draws; and what the forecast's meta
    records about it (``path_kind``, ``sampling``, ``copula_fallback``, ``range_bound``, and with ``"excursions"``
    ``repaired``)."""
    q = np.asarray(quantiles, dtype=np.float64)
    if q.ndim != 4 or q.shape[1] != 3:
        raise ValueError(f"joint paths need [B, 3 (close, high, low), K, H] quantiles, got shape {q.shape}")
    if hold not in HOLDS:
        raise ValueError(f"hold must be one of {HOLDS}, got {hold!r}")
    corr, fitted = normal_score_correlation(batch, excess=hold == "excursions")
    u = joint_uniforms(corr, batch.window_keys(), seed, num_samples, q.shape[-1])
    raw = quantile_function(torch.as_tensor(q), u, levels).numpy()
    meta = {"path_kind": "copula", "sampling": SAMPLING[hold], "copula_fallback": float(1.0 - fitted.mean())}
    if hold == "clip":
        paths, meta["range_bound"] = hold_body(raw)
    else:
        paths, meta["repaired"], meta["range_bound"] = pair_by_excursions(raw, u.numpy(), batch, fitted)
    return paths, meta
