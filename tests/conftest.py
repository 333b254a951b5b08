"""Shared fixtures: small real bar files written by the tests themselves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

# Compiled graphs go to a temp cache of the tests' own, shared by test sessions, never to the user's marketcast
# cache: the runtime keeps a TORCHINDUCTOR_CACHE_DIR it did not set unless it is torch's own default (which
# torch writes there itself), so the tests' folder is a sibling of that default. Set at import, before any
# test module imports torch's compiler.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", default_cache_dir() + "_marketcast_tests")

# `make test` runs the suite on pytest-xdist's workers, which start with COLUMNS=80 and LINES=24 set where the
# controller had its own (none, when piped): marketcast.console sizes piped output from COLUMNS, so a worker
# takes back the controller's terminal settings, passed down in the environment, before anything imports it.
_TERMINAL = ("COLUMNS", "LINES")
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["MARKETCAST_TESTS_TERMINAL"] = json.dumps({k: os.environ.get(k) for k in _TERMINAL})
elif "MARKETCAST_TESTS_TERMINAL" in os.environ:
    for _key, _value in json.loads(os.environ["MARKETCAST_TESTS_TERMINAL"]).items():
        if _value is None:
            os.environ.pop(_key, None)
        else:
            os.environ[_key] = _value


@pytest.fixture(scope="session")
def once_per_session(tmp_path_factory):
    """``once_per_session(name, make)``: ``make(folder)`` run once per test session, its files shared by every
    xdist worker: the first worker makes them under a file lock in the session's own base folder, the others wait
    and use the same folder (pytest-xdist's recipe for session fixtures,
    https://pytest-xdist.readthedocs.io/en/stable/how-to.html). ``make`` returns what it wrote: a dict of paths."""
    from filelock import FileLock

    def once(name: str, make):
        if "PYTEST_XDIST_WORKER" not in os.environ:
            return make(tmp_path_factory.mktemp(name))
        root = tmp_path_factory.getbasetemp().parent  # this session's, shared by its workers only
        folder, done = root / name, root / f"{name}.done"
        with FileLock(str(root / f"{name}.lock")):
            if not done.exists():
                folder.mkdir(exist_ok=True)  # a worker whose make failed may have left it
                done.write_text(json.dumps({k: str(v) for k, v in make(folder).items()}))
        return {k: Path(v) for k, v in json.loads(done.read_text()).items()}

    return once


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
