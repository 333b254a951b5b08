"""Shared fixtures: small real bar files written by the tests themselves."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

# Compiled graphs go to a temp cache of the tests' own, shared by test sessions, never to the user's marketcast
# cache: the runtime keeps a TORCHINDUCTOR_CACHE_DIR it did not set unless it is torch's own default (which
# torch writes there itself), so the tests' folder is a sibling of that default. Set at import, before any
# test module imports torch's compiler.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", default_cache_dir() + "_marketcast_tests")


def make_ohlcv(n: int = 40, start: str = "2024-01-01", seed: int = 0, freq: str = "D") -> pd.DataFrame:
    """A random-walk OHLCV frame with consistent highs and lows (UTC index named timestamp)."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0, 0.002, n))
    high = np.maximum(open_, close) * (1 + rng.uniform(0, 0.01, n))
    low = np.minimum(open_, close) * (1 - rng.uniform(0, 0.01, n))
    index = pd.date_range(start, periods=n, freq=freq, tz="UTC", name="timestamp")
    return pd.DataFrame({"open": open_, "high": high, "low": low, "close": close,
                         "volume": rng.integers(1_000, 10_000, n).astype(float)}, index=index)


@pytest.fixture(autouse=True)
def _run_store(tmp_path_factory, monkeypatch):
    """Backtests record their runs in a throw-away store, never in the checkout's out/runs."""
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path_factory.mktemp("runs")))


@pytest.fixture
def ohlcv() -> pd.DataFrame:
    return make_ohlcv()


@pytest.fixture(scope="session")
def embedded_bars():
    """The embedded SP500 and NASDAQ daily bars (1999-2018), loaded once."""
    from marketcast.data import DEFAULT_SYMBOLS, load_symbol

    return [load_symbol(s) for s in DEFAULT_SYMBOLS]
