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
