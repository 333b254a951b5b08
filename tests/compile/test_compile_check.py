"""Stress harness end to end on real embedded bars: a tiny real torch forecaster and the baseline."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marketcast.compile.check import CheckPlan, Thresholds, evaluation_windows, run_check
from marketcast.compile.report import validate_report, write_report
from marketcast.data import load_symbol
from tests.compile.tiny_forecaster import TinyForecaster

PLAN = CheckPlan(iterations=3, context=64, horizon=5, num_samples=32, batch=2, seed=7)
# speed and memory are not judged in unit tests (timing on a shared CPU): only correctness checks decide
LENIENT = Thresholds(min_speedup=0.0, max_memory_increase=1e9)


@pytest.fixture(scope="module")
def bars():
    return {s: load_symbol(s).head(600) for s in ("SP500", "NASDAQ")}


def test_windows_walk_forward_and_end_at_the_last_bar(bars):
    frame = bars["SP500"].frame
    windows = evaluation_windows(frame, PLAN)
    ends = np.concatenate(windows)
    assert len(windows) == 3 and all(len(w) == 2 for w in windows)
    assert np.all(np.diff(ends) == PLAN.horizon) and ends[-1] + PLAN.horizon == len(frame) - 1


def test_tiny_torch_forecaster_quick_mode(bars, tmp_path):
    report = run_check(lambda mode: TinyForecaster(mode, PLAN.context, PLAN.horizon), ["default"], bars, PLAN,
                       LENIENT, model="tiny", check_mode="quick", configured_mode="default")
    eager, compiled = report["modes"]
    assert validate_report(report) == []
    assert [m["mode"] for m in report["modes"]] == ["eager", "default"]
    assert eager["calls"] == compiled["calls"] == 6 and compiled["success_rate"] == 1.0
    assert compiled["compiled_guards"] == 1 and compiled["fallback_reason"] is None
    assert compiled["recompiles_after_warmup"] == 0
    assert compiled["output_delta_rel"] < 1e-5  # same seed, same windows: only float rounding differs
    assert abs(compiled["accuracy"]["mae"] - eager["accuracy"]["mae"]) / eager["accuracy"]["mae"] < 1e-5
    assert compiled["compile_s"] > 0 and compiled["cold_start_s"] >= compiled["load_s"]
    assert compiled["latency_ms"]["n"] == 6 and compiled["latency_ms"]["p99"] >= compiled["latency_ms"]["p50"]
    # MAE is of the median forecast against the realised closes: recompute it for one window
    assert 0 < eager["accuracy"]["mae"] < 0.2 * float(bars["SP500"].frame["close"].iloc[-1])
    assert compiled["verdict"] == "PASS" and report["recommended_mode"] == "default" and report["production_ok"]
    json_path, md_path = write_report(report, tmp_path / "out")
    loaded = json.loads(json_path.read_text())
    assert validate_report(loaded) == [] and loaded["modes"][1]["verdict"] == "PASS"
    assert "| default | PASS |" in md_path.read_text()


def test_forced_recompile_after_warmup_fails_the_mode_and_keeps_results(bars):
    # warm-up makes 2 calls (one per symbol); the 4th call changes shape -> refused recompile -> eager fallback
    report = run_check(lambda mode: TinyForecaster(mode, PLAN.context, PLAN.horizon, shape_shift_after=3),
                       ["default"], bars, PLAN, LENIENT, model="tiny", configured_mode="default")
    eager, compiled = report["modes"]
    assert eager["verdict"] == "PASS"  # eager runs the same code without compile: nothing to refuse
    assert compiled["recompiles_after_warmup"] == 1
    assert compiled["fallback_reason"].startswith("RuntimeError: Detected recompile")
    assert compiled["success_rate"] == 1.0 and compiled["output_delta_rel"] < 1e-5  # no crash, no wrong result
    assert compiled["verdict"] == "FAIL"
    assert set(compiled["failed_checks"]) == {"no_fallback", "recompiles_after_warmup"}
    assert report["recommended_mode"] == "eager" and not report["production_ok"]


def test_report_validation_catches_schema_breaks(bars):
    report = run_check(lambda mode: TinyForecaster(mode, PLAN.context, PLAN.horizon), [], bars,
                       CheckPlan(iterations=1, context=64, horizon=5, num_samples=8, batch=1), model="tiny")
    assert validate_report(report) == [] and report["compile_applicable"] is False
    broken = json.loads(json.dumps(report))
    del broken["modes"][0]["latency_ms"]
    broken["production_ok"] = "yes"
    problems = validate_report(broken)
    assert any("production_ok" in p for p in problems)
    broken["production_ok"] = True
    assert any("latency_ms" in p for p in validate_report(broken))


def test_a_mode_that_cannot_be_built_fails_without_crashing_the_check(bars):
    def factory(mode):
        if mode is not None:
            raise RuntimeError("inductor backend unavailable")
        return TinyForecaster(None, PLAN.context, PLAN.horizon)

    report = run_check(factory, ["max-autotune"], bars, CheckPlan(iterations=1, context=64, horizon=5,
                       num_samples=8, batch=1), model="tiny")
    assert validate_report(report) == []
    failed = report["modes"][1]
    assert failed["verdict"] == "FAIL" and failed["calls"] == 0
    assert failed["errors"] == ["load: RuntimeError: inductor backend unavailable"]
    assert report["recommended_mode"] == "eager" and report["modes"][0]["repeat_delta_rel"] == 0.0


def test_memory_verdict_is_relative_to_eagers_whole_footprint():
    """Eager grew 0 MiB above a 400 MiB process (memory reused): +100 MiB compiled is +25 %, not undefined."""
    from marketcast.compile.check import judge

    eager = {"latency_ms": {"p50": 10.0}, "memory": {"peak_mb": 0.0, "base_mb": 400.0}}

    def mode(extra_mb):
        return {"success_rate": 1.0, "fallback_reason": None, "output_delta_rel": 0.0, "recompiles_after_warmup": 0,
                "latency_ms": {"p50": 5.0}, "memory": {"peak_mb": extra_mb}}

    ok, too_big = mode(100.0), mode(101.0)
    judge(ok, eager, Thresholds())
    judge(too_big, eager, Thresholds())
    assert ok["memory"]["delta_rel"] == 0.25 and ok["verdict"] == "PASS" and ok["speedup"] == 2.0
    assert too_big["failed_checks"] == ["memory_delta_rel"]


def test_tiny_toto_quick_mode_end_to_end(bars, tmp_path):
    """The harness on the real Toto code (tiny config, random weights): eager vs compiled on the same windows,
    zero recompiles after warm-up, a schema-valid report."""
    from marketcast.forecast.toto import TotoConfig, TotoForecaster
    from marketcast.forecast.toto.model import TotoModel, init_weights

    def factory(mode):
        return TotoForecaster(init_weights(TotoModel(TotoConfig.tiny()), seed=5), compile=mode)

    report = run_check(factory, ["default"], bars, PLAN, LENIENT, model="toto", check_mode="quick",
                       configured_mode="default")
    eager, compiled = report["modes"]
    assert eager["verdict"] == "PASS" and compiled["verdict"] == "PASS", compiled["failed_checks"]
    assert compiled["compiled_guards"] >= 1 and compiled["fallback_reason"] is None
    assert compiled["recompiles_after_warmup"] == 0 and compiled["output_delta_rel"] < 1e-4
    assert eager["accuracy"]["mae"] > 0 and compiled["latency_ms"]["n"] == 6
    json_path, _ = write_report(report, tmp_path / "out")
    assert validate_report(json.loads(json_path.read_text())) == []
