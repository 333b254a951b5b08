"""How many decimals show a symbol's prices: the tick its data is quoted in (EURUSD 1.08345 needs five,
SP500 1228.10 two, a token at 0.00001234 eight), so forex forecasts are not printed as 1.08."""

from __future__ import annotations

import math

import numpy as np

MIN_DECIMALS, MAX_DECIMALS = 2, 8
_TOLERANCE = 1e-7  # relative: float32 exports (the arch data) store 1228.10 as 1228.099976


def price_decimals(prices) -> int:
    """The fewest decimals (at least 2) that write the last 500 prices as quoted; prices finer than 8
    decimals get 6 significant digits."""
    values = np.asarray(prices, dtype=np.float64)[-500:]
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) == 0:
        return MIN_DECIMALS
    for decimals in range(MAX_DECIMALS + 1):
        if (np.abs(values - np.round(values, decimals)) <= _TOLERANCE * values).all():
            return max(decimals, MIN_DECIMALS)
    return min(max(5 - math.floor(math.log10(values.min())), MIN_DECIMALS), 12)
