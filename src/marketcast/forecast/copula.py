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
efficiency for the Gaussian copula). The residuals of bar t are ``close_t``, ``high_t`` and ``low_t`` relative
to ``close_t-1``: what the model's first-step marginals describe. Chosen over the empirical copula because a
3 x 3 matrix is estimated well from the few hundred bars of a context and gives a smooth law with continuous
uniforms (an empirical copula would repeat the context's ``n`` rank triples, ties included, as the only joint
outcomes), and it costs one 3 x 3 root per window. It reads the window's own bars only (bars <= the decision bar).

Marginals: a path's value is ``quantile_function(knots, u)`` with ``u = Phi(x)``, ``x ~ N(0, R)``, ``R`` with a unit
diagonal, so each field's ``u`` is uniform and a draw at a knot's level maps to that knot exactly: the quantile
function is unchanged. Steps stay independent (the models give no law across the horizon).

The bar's shape: a path opens at its previous close (the context's last close at the first step), and
``high >= max(open, close)``, ``low <= min(open, close)`` is enforced by raising a high that fell below the bar's
body to the body's top (lowering a low to its bottom). Because the quantile function is monotone this is the same
as raising that path's high uniform to ``F_high(top)``: every sample that already respects the body keeps its
value, and the law of high is unchanged above the body's top, where every knot of a coherent model lies (a real
bar's high is never below its own open or close). Only mass the model put where no bar can be (a high below the
body) moves, onto the body; :func:`joint_paths` reports how often that happens (``range_bound``). A window with
fewer than :data:`MIN_BARS` residuals, or a field that never moves, has nothing to fit: its fields share one
uniform (comonotone, the scheme before the copula), and ``copula_fallback`` says in how many windows.
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
SAMPLING = "Gaussian copula of the context's normal scores; linear between knots, exponential tails"


def residuals(batch: ContextBatch) -> tuple[np.ndarray, np.ndarray]:
    """``[B, 3, T-1]`` close/high/low of bar t relative to close t-1, and where both bars are real and finite."""
    cols = [INPUT_FIELDS.index(f) for f in FIELDS]
    values = np.asarray(batch.values, dtype=np.float64)
    prev = values[:, :-1, INPUT_FIELDS.index("close")][:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = values[:, 1:, cols].transpose(0, 2, 1) / prev - 1.0
    mask = np.asarray(batch.mask, dtype=bool)
    valid = (mask[:, 1:] & mask[:, :-1])[:, None, :] & np.isfinite(r).all(axis=1, keepdims=True) & (prev > 0)
    return r, np.broadcast_to(valid, r.shape)


def normal_score_correlation(batch: ContextBatch) -> tuple[np.ndarray, np.ndarray]:
    """``[B, 3, 3]`` correlation of each window's close/high/low normal scores, and ``[B]`` whether it was fitted
    (False: fewer than :data:`MIN_BARS` residuals or a field without variation; its matrix is all ones)."""
    r, valid = residuals(batch)
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


def joint_paths(quantiles: np.ndarray, levels: Sequence[float], batch: ContextBatch, seed: int,
                num_samples: int) -> tuple[np.ndarray, dict]:
    """``[B, 3, num_samples, H]`` float64 close/high/low paths from ``[B, 3, K, H]`` knots at ``levels``, joined by
    the context's Gaussian copula and held to the bar's body (module docstring); and what the forecast's meta
    records about it (``path_kind``, ``sampling``, ``copula_fallback``, ``range_bound``)."""
    q = np.asarray(quantiles, dtype=np.float64)
    if q.ndim != 4 or q.shape[1] != 3:
        raise ValueError(f"joint paths need [B, 3 (close, high, low), K, H] quantiles, got shape {q.shape}")
    corr, fitted = normal_score_correlation(batch)
    u = joint_uniforms(corr, batch.window_keys(), seed, num_samples, q.shape[-1])
    raw = quantile_function(torch.as_tensor(q), u, levels).numpy()
    paths, bound = hold_body(raw)
    meta = {"path_kind": "copula", "sampling": SAMPLING, "copula_fallback": float(1.0 - fitted.mean()),
            "range_bound": bound}
    return paths, meta
