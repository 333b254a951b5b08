"""Stress harness end to end on real embedded bars: a tiny real torch forecaster and tiny Toto, per mode and
per symbol."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marketcast.compile.check import run_check
from marketcast.compile.plan import CheckPlan, evaluation_windows, realised
from marketcast.compile.report import write_report
from marketcast.compile.schema import validate_report
from marketcast.compile.study import recommend
from marketcast.compile.thresholds import Thresholds
from marketcast.compile.verdict import judge
from marketcast.data import load_symbol
from marketcast.forecast.base import make_batch
from tests.compile.tiny_forecaster import TinyForecaster

PLAN = CheckPlan(iterations=3, context=64, horizon=5, num_samples=32, batch=2, seed=7)
# speed and memory are not judged in unit tests (timing on a shared CPU): only correctness checks decide
LENIENT = Thresholds(min_speedup=0.0, max_memory_delta=1e9)


@pytest.fixture(scope="module")
def bars():
    return {s: load_symbol(s).head(600) for s in ("SP500", "NASDAQ")}


def test_windows_are_horizon_apart_and_end_at_the_last_bar(bars):
    frame = bars["SP500"].frame
    ends = evaluation_windows(frame, PLAN)
    assert ends.tolist() == [589, 594]  # 600 bars: the last window's 5 realised bars are rows 595..599
    assert realised(frame, ends, PLAN.horizon)[-1, -1] == frame["close"].iloc[-1]
    with pytest.raises(ValueError, match="too few"):
        evaluation_windows(frame.head(PLAN.min_rows - 1), PLAN)
    assert len(evaluation_windows(frame.head(PLAN.min_rows), PLAN)) == PLAN.batch


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
    assert compiled["model_warmup_s"] is None  # the tiny forecaster has no warmup()
    assert compiled["latency_ms"]["n"] == 6 and compiled["latency_ms"]["p99"] >= compiled["latency_ms"]["p50"]
    # MAE is of the median forecast against the realised closes: recompute it for one window
    assert 0 < eager["accuracy"]["mae"] < 0.2 * float(bars["SP500"].frame["close"].iloc[-1])
    assert compiled["verdict"] == "PASS" and report["recommended_mode"] == "default" and report["production_ok"]
    json_path, md_path = write_report(report, tmp_path / "out")
    loaded = json.loads(json_path.read_text())
    assert validate_report(loaded) == [] and loaded["modes"][1]["verdict"] == "PASS"
    md = md_path.read_text()
    assert "| default | PASS |" in md and "| SP500 | default | PASS |" in md and "- **NASDAQ**: default (" in md


def test_per_symbol_numbers_match_a_direct_run_of_the_forecaster(bars):
    """MAE, its sigma over repeats and the repeat count of each symbol, recomputed by calling the forecaster
    on the same windows with seeds seed+r."""
    report = run_check(lambda mode: TinyForecaster(mode, PLAN.context, PLAN.horizon), ["default"], bars, PLAN,
                       LENIENT, model="tiny")
    eager, compiled = report["modes"]
    direct = TinyForecaster(None, PLAN.context, PLAN.horizon)
    for sym, b in bars.items():
        ends = evaluation_windows(b.frame, PLAN)
        batch, truth = make_batch(b.frame, ends, PLAN.context, PLAN.horizon), realised(b.frame, ends, PLAN.horizon)
        maes = [np.mean(np.abs(direct.forecast(batch, PLAN.horizon, PLAN.num_samples, seed=PLAN.seed + r)
                               .quantile(0.5, "close") - truth)) for r in range(PLAN.iterations)]
        e, c = eager["per_symbol"][sym], compiled["per_symbol"][sym]
        assert e["mae"] == pytest.approx(np.mean(maes), rel=1e-12)  # equal-size repeats: pooled = mean
        assert e["mae_std"] == pytest.approx(np.std(maes, ddof=1), rel=1e-9) and e["mae_std"] > 0
        assert e["latency_ms"]["n"] == c["latency_ms"]["n"] == PLAN.iterations and e["calls"] == 3
        assert c["mae_delta_rel"] < 1e-5 and c["output_delta_rel"] < 1e-5 and c["recompiles_after_warmup"] == 0
        assert c["speedup"] == pytest.approx(e["latency_ms"]["p50"] / c["latency_ms"]["p50"])
        assert c["verdict"] == "PASS" and report["symbol_recommendations"][sym]["recommended_mode"] == "default"
    reason = report["symbol_recommendations"]["SP500"]["reason"]
    assert "x eager (p50 " in reason and "sampling sigma of MAE" in reason and "0 recompiles" in reason


def test_gates_decide_per_symbol_and_say_why():
    """Hand-made numbers: default is fast on A and slow on B; reduce-overhead is faster on A but off by 2e-3."""
    def entry(p50, out_delta=1e-7, recompiles=0, verdict="PASS", checks=()):
        return {"latency_ms": {"p50": p50, "std": p50 / 10}, "speedup": 10.0 / p50, "output_delta_rel": out_delta,
                "mae_delta_rel": 1e-6, "mae": 2.0, "mae_std": 0.1, "recompiles_after_warmup": recompiles,
                "successes": 3, "verdict": verdict, "checks": list(checks)}

    slow = {"name": "speedup", "value": 10.0 / 12.0, "threshold": 1.1, "op": ">=", "passed": False}
    off = {"name": "output_delta_rel", "value": 2e-3, "threshold": 1e-3, "op": "<", "passed": False}
    results = [
        {"mode": "eager", "per_symbol": {"A": entry(10.0), "B": entry(10.0)}},
        {"mode": "default", "per_symbol": {"A": entry(5.0), "B": entry(12.0, verdict="FAIL", checks=[slow])}},
        {"mode": "reduce-overhead", "per_symbol": {"A": entry(4.0, 2e-3, verdict="FAIL", checks=[off]),
                                                   "B": entry(4.0, 2e-3, verdict="FAIL", checks=[off])}},
    ]
    a, b = recommend("A", results), recommend("B", results)
    assert a["recommended_mode"] == "default" and a["reason"].startswith("2.00x eager (p50 5.0±0.5 vs 10.0±1.0 ms)")
    assert "MAE delta 0.00% (sampling sigma of MAE 5.00%)" in a["reason"]
    assert b == {"recommended_mode": "eager", "reason": "no compiled mode passed on B (default: speedup 0.833 "
                 "(needs >= 1.1); reduce-overhead: output_delta_rel 0.002 (needs < 0.001))"}
    results[0]["per_symbol"]["B"]["verdict"] = "FAIL"
    assert recommend("B", results)["reason"].startswith("eager itself failed on B")


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
    # symbols run one after the other: the refused recompile happened on SP500's second repeat
    assert compiled["per_symbol"]["SP500"]["recompiles_after_warmup"] == 1
    assert compiled["per_symbol"]["NASDAQ"]["recompiles_after_warmup"] == 0
    assert set(compiled["per_symbol"]["NASDAQ"]["failed_checks"]) == {"no_fallback"}  # the mode fell back
    assert report["symbol_recommendations"]["NASDAQ"]["recommended_mode"] == "eager"


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
    broken = json.loads(json.dumps(report))
    del broken["symbol_recommendations"]["NASDAQ"]
    broken["modes"][0]["per_symbol"]["SP500"]["mae_std"] = "small"
    assert validate_report(broken) == [
        "symbol_recommendations: needs exactly one entry per symbol of the plan",
        "modes[0].per_symbol.SP500.mae_std: str is not int|float|NoneType"]


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
    # Toto's own warmup() ran for the plan's shapes and counts in the warm-up and the time to first forecast
    for m in (eager, compiled):
        assert 0 < m["model_warmup_s"] <= m["warmup_s"] and m["cold_start_s"] >= m["load_s"] + m["model_warmup_s"]
    json_path, md_path = write_report(report, tmp_path / "out")
    assert "warm-up s" in md_path.read_text()
    assert validate_report(json.loads(json_path.read_text())) == []
