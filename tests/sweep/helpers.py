"""Bar files and specs written by the tests themselves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def write_bars(folder: Path, symbols, n: int = 90, vol: float = 0.01, seed: int = 0) -> Path:
    """A random-walk daily CSV per symbol (consistent highs and lows), seeded by its position."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, symbol in enumerate(symbols):
        rng = np.random.default_rng(seed + i)
        close = 100 * np.exp(np.cumsum(rng.normal(0.0003, vol, n)))
        open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0, vol / 4, n))
        high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, vol / 2, n)))
        low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, vol / 2, n)))
        index = pd.bdate_range("2022-01-03", periods=n, tz="UTC", name="timestamp")
        pd.DataFrame({"open": open_, "high": high, "low": low, "close": close}, index=index).to_csv(
            folder / f"{symbol}.csv")
    return folder


def small_spec(data: str = "", grid: str = "", tail: str = "") -> str:
    """The sweep spec the sweep tests share: bars from ``bars/``, 8 windows of 32 bars, 16 samples, two fill
    modes; ``data`` adds lines to [data], ``grid`` to [grid], ``tail`` whole tables after it."""
    return f"""
[data]
dir = "bars"
{data}
[options]
windows = 8
context = 32
num_samples = 16

[grid]
fill_mode = ["touch", "penetrate"]
{grid}
{tail}"""
