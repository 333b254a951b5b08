"""Continuous ranked probability score of an ensemble (sample) forecast, the project's one implementation.

CRPS(F, y) = E|X - y| - 1/2 E|X - X'| (Matheson & Winkler 1976; Gneiting & Raftery 2007, "Strictly proper
scoring rules, prediction, and estimation", JASA 102:359-378), F the empirical distribution of the S samples,
in the quantile-decomposition form of scoringrules' ``crps_ensemble(estimator="qd")``: for sorted
x_1 <= ... <= x_S and alpha_i = (i - 1/2) / S,

    CRPS = 2 / S * sum_i (1{y < x_i} - alpha_i) (x_i - y),

the mean pinball loss over the S quantile levels, equal to the energy form with the all-pairs (V-statistic)
mean of |X - X'| (Laio & Tamea 2007; Zamo & Naveau 2018, Math. Geosci. 50:209-234), in O(S log S).

The formula is written here rather than called from scoringrules because importing scoringrules loads scipy
and, where numba is installed, compiles its gufuncs (seconds per process): a baseline backtest scores CRPS
and stays free of both (tests/spine/test_startup.py). tests/calibrate/test_crps.py checks it against
scoringrules to 1e-10.
"""

from __future__ import annotations

import numpy as np

from marketcast.calibrate._arrays import sample_pair
from marketcast.errors import ConfigError


def crps_ensemble(samples, observed, axis: int = -2) -> np.ndarray:
    """CRPS of each forecast against ``observed`` (samples' shape without the sample ``axis``), float64.

    ``axis=-2`` reads Forecast-style ``[..., S, H]`` against ``[..., H]``; ``axis=-1`` reads ``[N, S]``
    against ``[N]`` (the skill table).
    """
    x, y = sample_pair(samples, observed, axis, "crps_ensemble")
    x = np.sort(x, axis=-1)
    s = x.shape[-1]
    alpha = (np.arange(1, s + 1) - 0.5) / s
    diff = x - y[..., None]
    return 2.0 * (((diff > 0) - alpha) * diff).mean(axis=-1)  # 2 x the mean pinball loss at levels alpha_i


def crps_quantiles(quantiles, levels, observed, axis: int = -2) -> np.ndarray:
    """The quantile-weighted CRPS approximation of a forecast given by its quantiles ``q_k`` at ``levels``
    ``alpha_k``: ``2 / K * sum_k (1{y < q_k} - alpha_k) (q_k - y)``.

    CRPS is twice the integral over alpha of the quantile (pinball) score (Laio & Tamea 2007, HESS 11:1267-1277;
    Gneiting & Ranjan 2011, "Comparing density forecasts using threshold- and quantile-weighted scoring rules",
    JBES 29:411-422); the mean over K levels is its Riemann sum, GIFT-Eval's mean weighted quantile loss (Aksu
    et al. 2024) before its division by sum |y|. :func:`crps_ensemble` is this same sum at alpha_i = (i - 1/2)/S
    over the sorted samples. At Toto 2.0's nine levels 0.1 .. 0.9 the tails beyond 10 % / 90 % are not scored
    and each level weighs 1/9, so it differs from the sample CRPS of paths drawn from the same knots (which
    scores the fitted tails): the two are reported side by side, not interchangeably.

    ``quantiles`` hold the K knots on ``axis`` (``[..., K, H]`` against ``[..., H]`` by default).
    """
    lv = np.asarray(levels, dtype=np.float64)
    if lv.ndim != 1 or lv.size == 0 or not ((lv > 0) & (lv < 1)).all():
        raise ConfigError(f"crps_quantiles: levels {tuple(np.ravel(levels))} must be probabilities in (0, 1); "
                          "pass the forecast's quantile_levels")
    q, y = sample_pair(quantiles, observed, axis, "crps_quantiles")
    if q.shape[-1] != lv.size:
        raise ConfigError(f"crps_quantiles: {q.shape[-1]} knots on axis {axis} but {lv.size} levels; "
                          "pass one level per knot")
    diff = q - y[..., None]
    return 2.0 * (((diff > 0) - lv) * diff).mean(axis=-1)
