"""Mean-zero daily P&L differences for simulating ``trade promote``'s false-promotion rate: the shapes of issue 54
first (many small gains and rare large losses, what a take-profit strategy makes), then bootstraps of the embedded
daily returns and symmetric ones. Shared by ``tests/trade/test_promote_sequential.py`` and
``benchmarks/promotion_nulls.py`` (which may not import ``tests``)."""

from __future__ import annotations

import numpy as np

from marketcast.data.embedded import load_embedded

#: the simulation the issue asks for: 2,000 runs of 500 days, asked after every day at alpha 0.05
RUNS, DAYS, ALPHA = 2000, 500, 0.05


def demeaned_returns(symbol: str) -> np.ndarray:
    """An embedded symbol's daily close-to-close returns less their mean."""
    close = load_embedded(symbol).frame["close"].to_numpy()
    r = close[1:] / close[:-1] - 1
    return r - r.mean()


def two_point(p_gain: float, gain: float):
    """+gain with probability p_gain, else the loss that makes the mean 0: many small gains, rare large losses."""
    loss = -gain * p_gain / (1 - p_gain)
    return lambda rng, shape: np.where(rng.random(shape) < p_gain, gain, loss)


NULLS = {  # mean-zero daily differences, the shapes first
    "+0.1 w.p. 0.9 / -0.9": two_point(0.9, 0.1),
    "+0.02 w.p. 0.98 / -0.98": two_point(0.98, 0.02),
    "1 - Exp(1)": lambda rng, shape: 1.0 - rng.exponential(1.0, shape),
    "SP500 bootstrap": lambda rng, shape: rng.choice(demeaned_returns("SP500"), shape),
    "NASDAQ bootstrap": lambda rng, shape: rng.choice(demeaned_returns("NASDAQ"), shape),
    "Gaussian": lambda rng, shape: rng.standard_normal(shape),
    "Gaussian x 0.004": lambda rng, shape: 0.004 * rng.standard_normal(shape),  # the test is scale-free
    "Student t(3)": lambda rng, shape: rng.standard_t(3, shape),
}
