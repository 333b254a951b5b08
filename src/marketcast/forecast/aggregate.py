"""Point forecasts from sample paths, by the aggregation specs of the original system.

All functions reduce the sample axis (``axis=-2`` of ``[..., S, H]``). Spec grammar:

==========================  =====================================================================
``mean`` / ``median``       sample mean / median
``pNN``                     NN-th percentile (``p10``, ``p90``, ``p2.5``)
``quantile_Q``              quantile Q; Q > 1 is read as a percentage (``quantile_0.1`` = ``quantile_10``)
``trimmed_mean_F``          mean after dropping F % of samples from *each* tail (F >= 1 is percent,
                            F < 1 a fraction; ``int(S * f)`` samples per tail, as scipy.stats.trim_mean)
``lower_trimmed_mean_F``    mean after dropping the top F % (a conservative, lower estimate)
``upper_trimmed_mean_F``    mean after dropping the bottom F % (an optimistic, upper estimate)
``mean_minus_std_K``        mean - K * std (std with ddof=1, as torch's default)
``mean_plus_std_K``         mean + K * std
``mean_quantile_mix_Q_W``   W * mean + (1 - W) * quantile_Q
``quantile_plus_std_Q_K``   quantile_Q + K * std
==========================  =====================================================================
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from marketcast.errors import ConfigError

_NUM = r"(-?\d+(?:\.\d+)?)"
SPEC_HELP = (
    "mean, median, pNN, quantile_Q, trimmed_mean_F, lower_trimmed_mean_F, upper_trimmed_mean_F, "
    "mean_minus_std_K, mean_plus_std_K, mean_quantile_mix_Q_W, quantile_plus_std_Q_K"
)


def _as_fraction(value: float, what: str, upper: float = 1.0) -> float:
    frac = value / 100.0 if value >= 1 else value
    if not 0 <= frac <= upper:
        raise ConfigError(f"{what} must lie in [0, {upper * 100:g}] percent, got {value:g}")
    return frac


def quantile(samples: np.ndarray, q: float) -> np.ndarray:
    """Quantile ``q`` in [0, 1] over the sample axis (linear interpolation, numpy's default)."""
    return np.quantile(samples, q, axis=-2)


def _std(samples: np.ndarray) -> np.ndarray:
    n = samples.shape[-2]
    return samples.std(axis=-2, ddof=1) if n > 1 else np.zeros_like(samples.mean(axis=-2))


def _trimmed(samples: np.ndarray, lower: float, upper: float) -> np.ndarray:
    n = samples.shape[-2]
    lo, hi = int(n * lower), n - int(n * upper)
    if hi <= lo:
        raise ConfigError(f"trimming {lower:.0%} + {upper:.0%} of {n} samples leaves none")
    return np.sort(samples, axis=-2)[..., lo:hi, :].mean(axis=-2)


def _parse(spec: str) -> Callable[[np.ndarray], np.ndarray]:
    s = spec.strip().lower()
    if s == "mean":
        return lambda x: x.mean(axis=-2)
    if s == "median":
        return lambda x: np.median(x, axis=-2)
    if m := re.fullmatch(rf"p{_NUM}", s):
        q = float(m[1]) / 100.0
        if not 0 <= q <= 1:
            raise ConfigError(f"percentile in {spec!r} must lie in [0, 100]")
        return lambda x: quantile(x, q)
    if m := re.fullmatch(rf"quantile_{_NUM}", s):
        q = _as_fraction(float(m[1]), f"quantile in {spec!r}")
        return lambda x: quantile(x, q)
    if m := re.fullmatch(rf"(lower_|upper_)?trimmed_mean_{_NUM}", s):
        f = _as_fraction(float(m[2]), f"trim in {spec!r}", upper=0.5)
        low, up = {None: (f, f), "lower_": (0.0, f), "upper_": (f, 0.0)}[m[1]]
        return lambda x: _trimmed(x, low, up)
    if m := re.fullmatch(rf"mean_(minus|plus)_std_{_NUM}", s):
        k = float(m[2]) * (-1 if m[1] == "minus" else 1)
        return lambda x: x.mean(axis=-2) + k * _std(x)
    if m := re.fullmatch(rf"mean_quantile_mix_{_NUM}_{_NUM}", s):
        q = _as_fraction(float(m[1]), f"quantile in {spec!r}")
        w = float(m[2])
        if not 0 <= w <= 1:
            raise ConfigError(f"weight in {spec!r} must lie in [0, 1], got {w:g}")
        return lambda x: w * x.mean(axis=-2) + (1 - w) * quantile(x, q)
    if m := re.fullmatch(rf"quantile_plus_std_{_NUM}_{_NUM}", s):
        q = _as_fraction(float(m[1]), f"quantile in {spec!r}")
        k = float(m[2])
        return lambda x: quantile(x, q) + k * _std(x)
    raise ConfigError(f"unknown aggregation spec {spec!r}; use one of: {SPEC_HELP}")


def aggregate(samples: np.ndarray, spec: str) -> np.ndarray:
    """Reduce ``[..., S, H]`` samples to ``[..., H]`` by ``spec`` (see module docstring)."""
    return _parse(spec)(np.asarray(samples, dtype=np.float64))


def validate_spec(spec: str) -> str:
    """Raise :class:`ConfigError` for an unknown spec; return it unchanged otherwise."""
    _parse(spec)
    return spec
