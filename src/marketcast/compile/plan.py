"""What a compile check runs: sizes, repeats and the windows of each symbol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from marketcast.forecast.base import Forecaster

CHECK_ITERATIONS = {"quick": 3, "full": 10, "production-check": 20}
EAGER = "eager"


@dataclass(frozen=True)
class CheckPlan:
    """Shapes and sizes: every symbol's windows have the same shape, so one warm-up covers all calls.

    ``iterations`` is the number of repeats: each repeat forecasts the same ``batch`` windows of a symbol with
    seed ``seed + repeat``, so the spread of MAE over repeats is the forecast's sampling noise (the yardstick for
    a compiled-vs-eager MAE delta) and the spread of latency is the mode's stability.
    """

    iterations: int = 3
    context: int = 256
    horizon: int = 8
    num_samples: int = 64
    batch: int = 4  # windows per forecast call
    seed: int = 0

    @property
    def min_rows(self) -> int:
        """Bars a symbol needs: ``batch`` windows ``horizon`` apart, each followed by ``horizon`` real bars."""
        return self.batch * self.horizon + 2


ForecasterFactory = Callable[[str | None], Forecaster]  # mode (None = eager) -> the forecaster


def frame_of(bars) -> pd.DataFrame:
    return bars.frame if hasattr(bars, "frame") else bars


def evaluation_windows(frame: pd.DataFrame, plan: CheckPlan) -> np.ndarray:
    """The ``batch`` window ends every repeat forecasts: ``horizon`` apart so targets never overlap, the last
    window's horizon ending at the last bar."""
    n = len(frame)
    last_end = n - 1 - plan.horizon
    first_end = last_end - (plan.batch - 1) * plan.horizon
    if first_end < 1:
        raise ValueError(f"{n} bars are too few for {plan.batch} windows with horizon {plan.horizon}")
    return first_end + plan.horizon * np.arange(plan.batch)


def realised(frame: pd.DataFrame, ends: np.ndarray, horizon: int) -> np.ndarray:
    """The closes that followed each window: ``[len(ends), horizon]``."""
    close = frame["close"].to_numpy(dtype=np.float64)
    return np.stack([close[e + 1 : e + 1 + horizon] for e in ends])
