"""Forecast skill on the scored windows, in returns relative to close_t (scale-free across symbols).

* ``*_val_loss``        MAE of the point forecast of bar t+1's close/high/low (names kept from the original JSON).
* ``mase*``             that MAE divided by the MAE of the naive no-change forecast (every field = close_t, i.e.
                        a zero return) on the same windows; < 1 beats it.
* ``mase_*_excursion``  for high and low, the MAE divided by that of a fairer naive: the context window's
                        average excursion, mean(high_i / close_(i-1) - 1) (low alike) over the bars of the
                        window ending at t. "High = close_t" is easy to beat (a constant +2 % does), this is not.
* ``crps*``             mean CRPS of the sample distribution, energy form E|X - y| - 1/2 E|X - X'| with the
                        all-pairs (V-statistic) mean for E|X - X'|, from :func:`marketcast.calibrate.crps_ensemble`
                        (scoringrules), the project's one CRPS.
* ``crps_quantile*``    only for a forecast with quantiles of its own (Toto 2.0, Chronos-2, ...): the quantile-
                        weighted CRPS over the model's knots, 2/K sum_k pinball_k
                        (:func:`marketcast.calibrate.crps.crps_quantiles`, GIFT-Eval's weighted quantile loss
                        before scaling), beside the sample CRPS of the paths drawn from them.
"""

from __future__ import annotations

import numpy as np

from marketcast.calibrate.crps import crps_ensemble, crps_quantiles

FIELDS = ("close", "high", "low")
EXCURSION_FIELDS = ("high", "low")


def crps_samples(samples: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """CRPS of each row of ``samples`` [B, S] against ``observed`` [B] (see :mod:`marketcast.calibrate.crps`)."""
    return crps_ensemble(samples, observed, axis=-1)


def crps_bruteforce(samples: np.ndarray, observed: float) -> float:
    """O(S^2) reference for one window (tests only)."""
    x = np.asarray(samples, dtype=np.float64)
    return float(np.abs(x - observed).mean() - 0.5 * np.abs(x[:, None] - x[None, :]).mean())


def excursion_naive(high: np.ndarray, low: np.ndarray, close: np.ndarray, ends: np.ndarray,
                    context: int) -> dict[str, np.ndarray]:
    """For each window end t: the mean of high_i / close_(i-1) - 1 (and low alike) over the bars i of the
    ``context``-bar window ending at t that have their previous close inside it (bars <= t only)."""
    close = np.asarray(close, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.int64)
    first = np.maximum(ends - context + 2, 1)  # bar i needs close_(i-1) inside the window
    count = ends - first + 1
    out = {}
    for name, values in (("high", high), ("low", low)):
        excursion = np.concatenate([[0.0], np.asarray(values, dtype=np.float64)[1:] / close[:-1] - 1.0])
        total = np.concatenate([[0.0], np.cumsum(excursion)])
        out[name] = np.where(count > 0, (total[ends + 1] - total[first]) / np.maximum(count, 1), 0.0)
    return out


def forecast_skill(point: dict[str, np.ndarray], samples: dict[str, np.ndarray],
                   actual: dict[str, np.ndarray], excursion: dict[str, np.ndarray] | None = None,
                   quantiles: dict[str, np.ndarray] | None = None, levels=()) -> dict:
    """Skill metrics from point [N], sample [N, S] and actual [N] returns per field, the excursion naive's
    forecasts [N] of high and low when given, and the model's quantile returns [N, K] at ``levels`` when it
    has them."""
    out: dict = {}
    for name in FIELDS:
        mae = float(np.abs(point[name] - actual[name]).mean())
        naive = float(np.abs(actual[name]).mean())
        out[f"{name}_val_loss"] = mae
        out[f"{name}_naive_mae"] = naive
        out[f"mase_{name}"] = mae / naive if naive > 0 else None
        out[f"crps_{name}"] = float(crps_samples(samples[name], actual[name]).mean())
        if quantiles is not None:
            out[f"crps_quantile_{name}"] = float(crps_quantiles(quantiles[name], levels, actual[name], axis=-1).mean())
        if excursion is not None and name in EXCURSION_FIELDS:
            fair = float(np.abs(excursion[name] - actual[name]).mean())
            out[f"{name}_excursion_naive_mae"] = fair
            out[f"mase_{name}_excursion"] = mae / fair if fair > 0 else None
    out["mase"] = out["mase_close"]
    out["crps"] = out["crps_close"]
    if quantiles is not None:
        out["crps_quantile"] = out["crps_quantile_close"]
    return out
