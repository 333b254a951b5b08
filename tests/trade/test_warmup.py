"""The model the loop trades with: warmed up on the loop's shapes before the first decision (through the
forecaster's own ``warmup`` when it has one), and a chain such as toto,baseline that skips a model that
cannot load."""

from __future__ import annotations

import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.data import load_symbol
from marketcast.errors import ModelLoadError
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.trade.loop.planner import PLANNER_CONFIG
from marketcast.trade.loop.warmup import load_model, warm_up

BARS = load_symbol("SP500")


class WarmsItself(BaselineForecaster):
    """A baseline with the ``warmup`` method issue 22 gives the forecasters (same signature)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def warmup(self, context: int, horizon: int, num_samples: int, batch_size: int = 1) -> float:
        self.calls.append({"context": context, "horizon": horizon, "num_samples": num_samples})
        return 0.0


def test_a_forecaster_with_warmup_is_asked_for_the_loops_shapes():
    forecaster = WarmsItself()
    done = warm_up(forecaster, BARS, PLANNER_CONFIG)
    assert forecaster.calls == [{"context": PLANNER_CONFIG.context, "horizon": 1,
                                 "num_samples": PLANNER_CONFIG.num_samples}]
    assert done["how"] == "its warmup()" and done["model"] == "baseline"
    short = BARS.head(100)  # fewer bars than the context: the window the loop will really forecast
    warm_up(forecaster, short, PLANNER_CONFIG)
    assert forecaster.calls[-1]["context"] == 100


class ForecastsOnly:
    """A forecaster without ``warmup()``: the baseline's forecasts, counted."""

    name = "baseline"

    def __init__(self) -> None:
        self.inner, self.shapes = BaselineForecaster(), []

    def forecast(self, batch, **kw):
        self.shapes.append((*batch.values.shape[:2], kw["num_samples"], kw["horizon"]))
        return self.inner.forecast(batch, **kw)


def test_without_warmup_one_forecast_of_the_loops_shape_is_run_and_timed():
    config = BacktestConfig(context=64, num_samples=32)
    forecaster = ForecastsOnly()
    done = warm_up(forecaster, BARS, config)
    assert done["how"] == "one forecast" and done["seconds"] > 0
    assert forecaster.shapes == [(1, 64, 32, 1)]  # one window of 64 bars, 32 paths, one step
    assert done["shape"] == "1 window x 64 bars, 32 samples, horizon 1"


def test_a_model_that_cannot_load_is_skipped_for_the_next_in_the_chain(caplog):
    loaded = load_model(("toto", "baseline"), BARS, PLANNER_CONFIG, weights="/nowhere/toto")
    assert loaded.forecaster.name == "baseline" and loaded.warmup["model"] == "baseline"  # --weights is toto's
    assert [s["model"] for s in loaded.skipped] == ["toto"]
    assert loaded.skipped[0]["error"].startswith("ModelLoadError: Toto weights '/nowhere/toto': not a folder")
    assert any("model toto skipped" in m and "trying baseline" in m for m in caplog.messages)


def test_when_every_model_fails_the_run_ends_with_each_reason():
    with pytest.raises(ModelLoadError, match=r"no model of the chain toto,kronos could be used: toto: "
                                             r"ModelLoadError: Toto weights .*; kronos: ModelLoadError: Kronos"):
        load_model(("toto", "kronos"), BARS, PLANNER_CONFIG, weights="/nowhere")
    with pytest.raises(ModelLoadError, match="Toto weights '/nowhere'"):  # one model: its own error, as given
        load_model(("toto",), BARS, PLANNER_CONFIG, weights="/nowhere")
