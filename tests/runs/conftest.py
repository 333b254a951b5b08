"""Real backtest results to record: the embedded SP500 and NASDAQ, a short baseline run."""

from __future__ import annotations

import pytest

from marketcast.backtest import BacktestConfig, run_many
from marketcast.forecast.baseline import BaselineForecaster

CONFIG = BacktestConfig(windows=15, context=64, num_samples=32)
OPTIONS = {"model": "baseline", "weights": None, "device": "cpu", "dtype": "float32", "asset_class": None,
           "data_dir": None}


@pytest.fixture(scope="package")
def results(embedded_bars):
    return run_many(embedded_bars, BaselineForecaster(), CONFIG)
