"""Input checks shared by the calibrate modules: samples and outcomes as float64 with matching shapes."""

from __future__ import annotations

import numpy as np

from marketcast.errors import ConfigError


def sample_pair(samples, outcomes, axis: int, where: str, finite_outcomes: bool = True
                ) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` with the sample axis moved last (``[..., S]``) and ``outcomes`` (``[...]``), both float64.

    Raises a one-line :class:`ConfigError` on mismatched shapes, no samples or non-finite values.
    """
    x = np.asarray(samples, dtype=np.float64)
    y = np.asarray(outcomes, dtype=np.float64)
    if x.ndim < 1 or not -x.ndim <= axis < x.ndim:
        raise ConfigError(f"{where}: sample axis {axis} is outside samples of shape {x.shape}; "
                          "pass the axis that holds the samples")
    x = np.moveaxis(x, axis, -1)
    if x.shape[:-1] != y.shape:
        raise ConfigError(f"{where}: outcomes of shape {y.shape} do not match samples of shape "
                          f"{np.asarray(samples).shape} without sample axis {axis} ({x.shape[:-1]}); "
                          "pass one outcome per window and horizon step")
    if x.shape[-1] == 0 or y.size == 0:
        raise ConfigError(f"{where}: no samples or no outcomes (samples shape {np.asarray(samples).shape}); "
                          "pass at least one window with one sample")
    if not np.isfinite(x).all():
        raise ConfigError(f"{where}: samples hold NaN or inf; drop or repair those windows first")
    if finite_outcomes and not np.isfinite(y).all():
        raise ConfigError(f"{where}: outcomes hold NaN or inf (an unsettled window?); "
                          "pass only windows whose outcomes are known")
    return x, y
