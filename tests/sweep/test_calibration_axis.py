"""Calibration and sizing as sweep axes: the spec maps them onto BacktestConfig like any field, the cells of
one symbol share one forecast (calibration and sizing happen in ``simulate``), each cell equals the backtest
with its settings, and a bad value is one line, exit 2."""

from __future__ import annotations

import numpy as np

from marketcast.backtest.engine import decision_ends, forecast_windows, run_backtest, simulate
from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.sweep.plan import plan_jobs
from marketcast.sweep.spec import load_spec

SPEC = """
[data]
symbols = ["SP500"]

[options]
windows = 40
num_samples = 32
context = 64
calibration_min_windows = 15
spa = false
bootstrap_reps = 10

[grid]
calibrate = ["none", "conformal"]
sizing = ["fixed", "kelly", "cvar"]
"""


def test_calibrate_and_sizing_are_grid_axes_sharing_one_forecast(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(SPEC)
    spec = load_spec(path)
    cells = spec.cells()
    assert [(c.config.calibrate, c.config.sizing) for c in cells] == [
        (cal, size) for cal in ("none", "conformal") for size in ("fixed", "kelly", "cvar")]
    assert len({c.cell_id for c in cells}) == 6
    (job,) = plan_jobs(list(enumerate(cells)), spec.symbol_paths())  # one forecast call for all six cells
    bars = load_symbol("SP500")
    ends = decision_ends(len(bars), job.config)
    (fc,) = forecast_windows(BaselineForecaster(), [(bars, ends)], job.config)
    results = {(c.config.calibrate, c.config.sizing): simulate(bars, fc, ends, c.config) for c in cells}
    for (cal, size), got in results.items():
        alone = run_backtest(bars, BaselineForecaster(), next(c.config for c in cells
                                                              if (c.config.calibrate, c.config.sizing) == (cal, size)))
        for name, run in got.strategies.items():
            np.testing.assert_array_equal(run.returns, alone.strategies[name].returns)
        assert (got.calibrated is None) == (cal == "none")
    fixed, kelly = results[("none", "fixed")], results[("none", "kelly")]
    assert not np.array_equal(fixed.strategies["simple"].returns, kelly.strategies["simple"].returns)
    assert results[("conformal", "fixed")].calibrated.sum() == 25  # windows 16..40 of 40


def test_a_bad_axis_value_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(SPEC.replace('calibrate = ["none", "conformal"]', 'calibrate = ["none", "isotonic"]'))
    assert main(["sweep", str(path), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grid point calibrate=isotonic" in err[0] and "--calibrate must be one of" in err[0], err
    path.write_text(SPEC.replace("calibration_min_windows = 15", "calibration_min_windows = 41"))
    assert main(["sweep", str(path), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exceeds --windows 40" in err[0], err
    assert not (tmp_path / "store").exists()
