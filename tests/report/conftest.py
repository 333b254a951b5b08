"""A real short backtest of the embedded SP500 and NASDAQ and its tearsheet, shared by the report tests."""

from __future__ import annotations

import pytest

from marketcast.backtest import BacktestConfig, run_many
from marketcast.backtest.fans import add_fans
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.report.tearsheet import symbol_reports, tearsheet_html

CONFIG = BacktestConfig(windows=40, context=64, num_samples=32)


@pytest.fixture(scope="package")
def bars(embedded_bars):
    return embedded_bars


@pytest.fixture(scope="package")
def results(bars):
    done = run_many(bars, BaselineForecaster(), CONFIG)
    add_fans(done, bars, BaselineForecaster())  # as `marketcast backtest` stores them
    return done


@pytest.fixture(scope="package")
def reports(results, bars):
    return symbol_reports(results, bars)


@pytest.fixture(scope="package")
def page(reports):
    return tearsheet_html(reports)
