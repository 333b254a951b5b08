"""Stress harness: eager vs each compile mode on real bars, with a verdict per mode.

Why it is built this way (the original scripts' mistakes): load and compile time are measured apart from
inference latency (warm-up is never timed as latency); every mode sees the same windows with the same seed,
so the eager-vs-compiled difference is a real numerical difference, not sampling noise; a failing call is
recorded, never allowed to crash the run.

Per mode: build the forecaster (``load_s``), warm up once per symbol on the fixed shapes (``warmup_s``; the
first call's excess over the steady-state p50 is ``compile_s``), seal every :class:`GuardedCompile` it holds
(later recompiles are refused and counted), then run ``iterations`` x symbols timed forecasts.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from marketcast.forecast.base import Forecaster, make_batch

CHECK_ITERATIONS = {"quick": 3, "full": 10, "production-check": 20}
EAGER = "eager"


@dataclass(frozen=True)
class Thresholds:
    """Pass conditions for a compiled mode, each relative to eager on the same windows and seeds."""

    max_output_delta: float = 1e-3  # max |median_c - median_e| / |median_e| (strictly below)
    max_recompiles: int = 0  # after warm-up
    min_speedup: float = 1.1  # eager p50 latency / compiled p50 latency
    max_memory_increase: float = 0.25  # (peak_c - peak_e) / peak_e


@dataclass(frozen=True)
class CheckPlan:
    """Shapes and sizes: every window of every symbol has the same shape, so one warm-up covers all calls."""

    iterations: int = 3
    context: int = 256
    horizon: int = 8
    num_samples: int = 64
    batch: int = 4  # windows per forecast call
    seed: int = 0


ForecasterFactory = Callable[[str | None], Forecaster]


# ---------------------------------------------------------------- windows and memory


def frame_of(bars) -> pd.DataFrame:
    return bars.frame if hasattr(bars, "frame") else bars


def evaluation_windows(frame: pd.DataFrame, plan: CheckPlan) -> list[np.ndarray]:
    """``iterations`` arrays of ``batch`` window ends, walking forward, each followed by ``horizon`` real bars.

    Ends are spaced ``horizon`` apart so targets never overlap; the last window's horizon ends at the last bar.
    """
    n = len(frame)
    total = plan.iterations * plan.batch
    last_end = n - 1 - plan.horizon
    first_end = last_end - (total - 1) * plan.horizon
    if first_end < 1:
        raise ValueError(f"{n} bars are too few for {total} windows with horizon {plan.horizon}")
    ends = first_end + plan.horizon * np.arange(total)
    return [ends[i * plan.batch : (i + 1) * plan.batch] for i in range(plan.iterations)]


def realised(frame: pd.DataFrame, ends: np.ndarray, horizon: int) -> np.ndarray:
    close = frame["close"].to_numpy(dtype=np.float64)
    return np.stack([close[e + 1 : e + 1 + horizon] for e in ends])


class MemoryProbe:
    """Peak memory of one mode: CUDA max allocated, or process peak RSS (VmHWM reset via clear_refs) on CPU."""

    def __init__(self, device: str) -> None:
        self.cuda = str(device).startswith("cuda")
        self.base = 0.0
        self.source = "cuda_max_allocated" if self.cuda else "process_rss"

    @staticmethod
    def _status(field: str) -> float | None:
        try:
            with open("/proc/self/status") as fh:
                for line in fh:
                    if line.startswith(field + ":"):
                        return float(line.split()[1]) / 1024.0  # kB -> MiB
        except OSError:
            return None
        return None

    def start(self) -> None:
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated() / 2**20
            return
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset VmHWM to the current RSS
        except OSError:
            self.source = "process_rss_lifetime_peak"  # cannot reset: peak since process start
        self.base = self._status("VmRSS") or 0.0

    def peak_mb(self) -> float | None:
        """Peak during the mode, above what was in use when it started (MiB)."""
        if self.cuda:
            import torch

            return torch.cuda.max_memory_allocated() / 2**20 - self.base
        hwm = self._status("VmHWM")
        if hwm is None:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0 - self.base
        return hwm - self.base


# ---------------------------------------------------------------- one mode


def _latency(values_s: Sequence[float]) -> dict:
    if not values_s:
        return {"mean": None, "std": None, "p50": None, "p99": None, "n": 0}
    ms = np.asarray(values_s) * 1000.0
    return {"mean": float(ms.mean()), "std": float(ms.std(ddof=1)) if len(ms) > 1 else 0.0,
            "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "n": int(len(ms))}


def _errors(pred: np.ndarray, truth: np.ndarray) -> dict:
    err = pred - truth
    return {"mae": float(np.mean(np.abs(err))), "rmse": float(np.sqrt(np.mean(err**2))),
            "mape_pct": float(np.mean(np.abs(err) / np.maximum(np.abs(truth), 1e-12)) * 100.0)}


def _sync(device: str) -> None:
    """Wait for queued CUDA work so a timing covers the whole forecast."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


def blank_result(label: str) -> dict:
    """Every field of a mode's result (schema ``MODE_FIELDS``), as for a mode that never ran."""
    return {
        "mode": label, "applicable": True, "verdict": "FAIL", "checks": [], "failed_checks": [], "errors": [],
        "accuracy": None, "per_symbol": {}, "output_delta_rel": None, "mae_delta_rel": None,
        "repeat_delta_rel": None, "latency_ms": _latency([]), "speedup": None, "load_s": 0.0, "warmup_s": 0.0,
        "compile_s": 0.0, "cold_start_s": 0.0, "start": None, "memory": {"peak_mb": None, "source": ""},
        "recompiles_warmup": 0, "recompiles_after_warmup": 0, "compiles_after_warmup": 0, "graph_breaks": 0,
        "cudagraph_skips": 0, "recompile_limit_hits": 0, "compiled_guards": 0, "calls": 0, "successes": 0,
        "success_rate": 0.0, "fallback_reason": None, "forecast_meta": {}, "start_probe": None,
    }


def run_mode(
    factory: ForecasterFactory,
    mode: str | None,
    frames: Mapping[str, pd.DataFrame],
    plan: CheckPlan,
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> tuple[dict, dict]:
    """Measure one mode; returns (json-ready result, {(iteration, symbol): median close [B, H]})."""
    from marketcast.runtime.counters import counters_delta, counters_snapshot
    from marketcast.runtime.guard import find_guards

    say = progress or (lambda _msg: None)
    label = mode or EAGER
    windows = {s: evaluation_windows(f, plan) for s, f in frames.items()}
    batches = {s: [make_batch(f, ends, plan.context, plan.horizon) for ends in windows[s]] for s, f in frames.items()}
    memory = MemoryProbe(device)
    memory.start()
    c0 = counters_snapshot()
    result = blank_result(label)
    medians: dict = {}

    t0 = time.perf_counter()
    try:
        forecaster = factory(mode)
    except Exception as exc:  # a mode that cannot even be built is a failed mode, not a crashed check
        result.update(load_s=time.perf_counter() - t0, cold_start_s=time.perf_counter() - t0,
                      errors=[f"load: {_first_line(exc)}"], memory={"peak_mb": None, "source": memory.source})
        return result, medians
    load_s = time.perf_counter() - t0
    say(f"{label}: loaded in {load_s:.2f}s, warming up")

    first_call_s = None
    warmup_s = 0.0
    warm_medians: dict = {}
    for sym, sym_batches in batches.items():
        t = time.perf_counter()
        try:
            warm_fc = forecaster.forecast(sym_batches[0], plan.horizon, plan.num_samples, seed=plan.seed)
            _sync(device)
            warm_medians[sym] = warm_fc.quantile(0.5, "close")
        except Exception as exc:
            result["errors"].append(f"warm-up {sym}: {_first_line(exc)}")
        dt = time.perf_counter() - t
        warmup_s += dt
        first_call_s = dt if first_call_s is None else first_call_s
    guards = find_guards(forecaster)
    for guard in guards:
        if not guard.stats.sealed:
            guard.seal()
    c1 = counters_snapshot()

    latencies: list[float] = []
    preds, truths = [], []
    per_symbol: dict[str, list] = {s: [[], []] for s in frames}
    calls = successes = 0
    meta: dict = {}
    for it in range(plan.iterations):
        for sym in frames:
            calls += 1
            batch = batches[sym][it]
            t = time.perf_counter()
            try:
                fc = forecaster.forecast(batch, plan.horizon, plan.num_samples, seed=plan.seed + it)
                _sync(device)
                dt = time.perf_counter() - t
                median = fc.quantile(0.5, "close")
            except Exception as exc:
                result["errors"].append(f"iteration {it} {sym}: {_first_line(exc)}")
                continue
            if not np.all(np.isfinite(median)):
                result["errors"].append(f"iteration {it} {sym}: non-finite forecast")
                continue
            successes += 1
            latencies.append(dt)
            meta = fc.meta or meta
            truth = realised(frames[sym], windows[sym][it], plan.horizon)
            medians[(it, sym)] = median
            preds.append(median)
            truths.append(truth)
            per_symbol[sym][0].append(median)
            per_symbol[sym][1].append(truth)
        say(f"{label}: iteration {it + 1}/{plan.iterations}")
    c2 = counters_snapshot()
    peak = memory.peak_mb()

    warm = counters_delta(c0, c1)
    after = counters_delta(c1, c2)
    # the warm-up call and timed iteration 0 see the same windows and seed: any difference is non-determinism
    repeat = [np.max(np.abs(medians[(0, s)] - warm_medians[s]) / np.maximum(np.abs(warm_medians[s]), 1e-12))
              for s in frames if s in warm_medians and (0, s) in medians]
    guards = find_guards(forecaster)  # again: a model may create wrappers lazily (one per shape bucket)
    refused = sum(g.stats.refused_recompiles for g in guards)
    fallback = next((g.stats.fallback_reason for g in guards if g.stats.fallback_reason), None)
    fallback = fallback or meta.get("fallback_reason")
    lat = _latency(latencies)
    compiled_ran = any(g.stats.compiled for g in guards) or bool(meta.get("compiled"))
    cache_loaded = [g.stats.extra.get("cache_loaded") for g in guards if "cache_loaded" in g.stats.extra]
    result.update(
        applicable=mode is None or compiled_ran or fallback is not None,
        accuracy=_errors(np.concatenate(preds), np.concatenate(truths)) if preds else None,
        per_symbol={s: _errors(np.concatenate(p), np.concatenate(t)) for s, (p, t) in per_symbol.items() if p},
        latency_ms=lat,
        load_s=load_s,
        warmup_s=warmup_s,
        compile_s=(max(0.0, first_call_s - lat["p50"] / 1000.0) if mode and first_call_s and lat["p50"] else 0.0),
        cold_start_s=load_s + (first_call_s or 0.0),
        start="warm" if cache_loaded and all(cache_loaded) else ("cold" if mode else None),
        memory={"peak_mb": peak, "base_mb": memory.base, "source": memory.source},
        recompiles_warmup=warm["recompiles"],
        recompiles_after_warmup=after["recompiles"] + refused,
        compiles_after_warmup=after["compiles"],
        repeat_delta_rel=float(max(repeat)) if repeat else None,
        graph_breaks=warm["graph_breaks"] + after["graph_breaks"],
        cudagraph_skips=warm["cudagraph_skips"] + after["cudagraph_skips"],
        recompile_limit_hits=warm["recompile_limit_hits"] + after["recompile_limit_hits"],
        compiled_guards=len(guards),
        calls=calls,
        successes=successes,
        success_rate=successes / calls if calls else 0.0,
        fallback_reason=fallback,
        forecast_meta={k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool, type(None)))},
    )
    del forecaster
    gc.collect()
    return result, medians


# ---------------------------------------------------------------- verdicts


def _check(name: str, value, threshold, op: str) -> dict:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        passed = False
    else:
        passed = {"<": value < threshold, "<=": value <= threshold, ">=": value >= threshold,
                  "==": value == threshold}[op]
    return {"name": name, "value": value, "threshold": threshold, "op": op, "passed": bool(passed)}


def judge(result: dict, eager: dict, th: Thresholds) -> None:
    """Fill ``checks``, ``verdict`` and the eager-relative fields of a compiled mode's result, in place."""
    if not result.get("applicable", True):
        result.update(verdict="N/A", checks=[], failed_checks=[], speedup=None)
        return
    e_p50 = (eager.get("latency_ms") or {}).get("p50")
    c_p50 = (result.get("latency_ms") or {}).get("p50")
    result["speedup"] = e_p50 / c_p50 if e_p50 and c_p50 else None
    e_mem = eager.get("memory") or {}
    e_peak, c_peak = e_mem.get("peak_mb"), (result.get("memory") or {}).get("peak_mb")
    # extra memory of the mode over eager's, as a fraction of eager's whole footprint at its peak (the memory
    # in use when it started plus its growth): eager's growth alone can be ~0 MiB on CPU, where memory freed
    # by an earlier mode is reused
    e_total = (e_mem.get("base_mb") or 0.0) + (e_peak or 0.0)
    result.setdefault("memory", {})["delta_rel"] = (
        (c_peak - e_peak) / e_total if e_peak is not None and c_peak is not None and e_total > 0 else None
    )
    checks = [
        _check("success_rate", result.get("success_rate", 0.0), 1.0, "=="),
        _check("no_fallback", result.get("fallback_reason") is None, True, "=="),
        _check("output_delta_rel", result.get("output_delta_rel"), th.max_output_delta, "<"),
        _check("recompiles_after_warmup", result.get("recompiles_after_warmup"), th.max_recompiles, "<="),
        _check("speedup", result["speedup"], th.min_speedup, ">="),
        _check("memory_delta_rel", result["memory"]["delta_rel"], th.max_memory_increase, "<="),
    ]
    result["checks"] = checks
    result["failed_checks"] = [c["name"] for c in checks if not c["passed"]]
    result["verdict"] = "PASS" if not result["failed_checks"] else "FAIL"


def judge_eager(result: dict) -> None:
    ok = result.get("success_rate") == 1.0 and result.get("accuracy") is not None
    checks = [_check("success_rate", result.get("success_rate", 0.0), 1.0, "==")]
    result.update(checks=checks, failed_checks=[] if ok else ["success_rate"], verdict="PASS" if ok else "FAIL",
                  speedup=1.0 if ok else None, output_delta_rel=None, mae_delta_rel=None)
    result.setdefault("memory", {})["delta_rel"] = 0.0 if ok else None


def output_delta(medians: Mapping, reference: Mapping) -> float | None:
    """Max relative difference of median close forecasts on the same (iteration, symbol) and seed."""
    keys = [k for k in medians if k in reference]
    if not keys:
        return None
    return float(max(np.max(np.abs(medians[k] - reference[k]) / np.maximum(np.abs(reference[k]), 1e-12))
                     for k in keys))


# ---------------------------------------------------------------- the whole check


def run_check(
    factory: ForecasterFactory,
    modes: Sequence[str],
    bars_by_symbol: Mapping[str, object],
    plan: CheckPlan = CheckPlan(),
    thresholds: Thresholds = Thresholds(),
    *,
    model: str = "custom",
    weights: str | None = None,
    device: str = "cpu",
    check_mode: str = "custom",
    configured_mode: str | None = None,
    compile_note: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Run eager then each compile mode in ``modes``; returns the report (see ``report.validate_report``).

    ``factory(mode)`` builds the forecaster (``None`` = eager). ``modes`` empty means compile is not
    applicable (say why in ``compile_note``): only eager is measured. ``configured_mode`` is what production
    runs now (None = eager); ``production_ok`` says whether that mode passed.
    """
    import torch

    frames = {s: frame_of(b) for s, b in bars_by_symbol.items()}
    eager, eager_medians = run_mode(factory, None, frames, plan, device, progress)
    judge_eager(eager)
    results = [eager]
    notes = [compile_note] if compile_note else []
    if eager.get("repeat_delta_rel"):
        notes.append(f"eager is not deterministic for a fixed seed (repeat delta {eager['repeat_delta_rel']:.2e}): "
                     "the eager-vs-compiled output delta includes that noise")
    for mode in modes:
        torch._dynamo.reset()  # each mode compiles from scratch in this process (the disk cache may still help)
        res, meds = run_mode(factory, mode, frames, plan, device, progress)
        res["output_delta_rel"] = output_delta(meds, eager_medians)
        e_mae = (eager.get("accuracy") or {}).get("mae")
        c_mae = (res.get("accuracy") or {}).get("mae")
        res["mae_delta_rel"] = abs(c_mae - e_mae) / e_mae if e_mae and c_mae is not None else None
        judge(res, eager, thresholds)
        if not res["applicable"]:
            notes.append(f"{mode}: the forecaster ran no compiled code; compile is not applicable to it")
        results.append(res)
    passing = [r for r in results[1:] if r["verdict"] == "PASS"]
    recommended = max(passing, key=lambda r: r["speedup"] or 0.0)["mode"] if passing else EAGER
    configured = configured_mode or EAGER
    configured_result = next((r for r in results if r["mode"] == configured), None)
    production_ok = bool(
        eager["verdict"] == "PASS" and configured_result is not None and configured_result["verdict"] in ("PASS",)
    )
    if configured_result is None:
        notes.append(f"configured mode {configured!r} was not measured")
    return {
        "schema": "marketcast.compile_check/1",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": model,
        "weights": weights,
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "check_mode": check_mode,
        "plan": {**asdict(plan), "symbols": list(frames)},
        "thresholds": asdict(thresholds),
        "compile_applicable": bool(modes),
        "notes": notes,
        "modes": results,
        "recommended_mode": recommended,
        "configured_mode": configured,
        "production_ok": production_ok,
    }
