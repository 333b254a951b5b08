"""One mode of a compile check, measured; nothing here judges (see :mod:`marketcast.compile.verdict`).

Build the forecaster (``load_s``); run its own ``warmup()`` for the plan's shapes when it has one (its seconds
are ``model_warmup_s``: what a trading loop pays at start), then warm up once per symbol on its windows
(``warmup_s`` is both; their excess over the steady p50 is ``compile_s``); seal every :class:`GuardedCompile` it holds, so a later recompile
is refused and counted; then, symbol by symbol, ``iterations`` timed repeats of that symbol's windows with seeds
``seed, seed+1, ...``. Load and warm-up are never timed as latency. A failing call is recorded, never allowed
to crash the check.
"""

from __future__ import annotations

import gc
import time
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from marketcast.compile.memory import MemoryProbe
from marketcast.compile.plan import EAGER, CheckPlan, ForecasterFactory, evaluation_windows, realised
from marketcast.errors import MarketcastError
from marketcast.forecast.base import make_batch


def latency_stats(values_s: Sequence[float]) -> dict:
    """Milliseconds: mean, std (ddof 1), p50, p99, n."""
    if not values_s:
        return {"mean": None, "std": None, "p50": None, "p99": None, "n": 0}
    ms = np.asarray(values_s) * 1000.0
    return {"mean": float(ms.mean()), "std": float(ms.std(ddof=1)) if len(ms) > 1 else 0.0,
            "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "n": int(len(ms))}


def forecast_errors(pred: np.ndarray, truth: np.ndarray) -> dict:
    """MAE, RMSE and MAPE (%) of median close forecasts against the realised closes."""
    err = pred - truth
    return {"mae": float(np.mean(np.abs(err))), "rmse": float(np.sqrt(np.mean(err**2))),
            "mape_pct": float(np.mean(np.abs(err) / np.maximum(np.abs(truth), 1e-12)) * 100.0)}


def _sync(device: str) -> None:
    """Wait for queued CUDA work so a timing covers the whole forecast."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


def blank_result(label: str) -> dict:
    """Every field of a mode's result (schema ``MODE_FIELDS``), as for a mode that never ran."""
    return {
        "mode": label, "applicable": True, "verdict": "FAIL", "checks": [], "failed_checks": [], "errors": [],
        "accuracy": None, "per_symbol": {}, "output_delta_rel": None, "mae_delta_rel": None,
        "repeat_delta_rel": None, "latency_ms": latency_stats([]), "speedup": None, "load_s": 0.0, "warmup_s": 0.0,
        "model_warmup_s": None, "compile_s": 0.0, "cold_start_s": 0.0, "start": None, "memory": {"peak_mb": None, "source": ""},
        "recompiles_warmup": 0, "recompiles_after_warmup": 0, "compiles_after_warmup": 0, "graph_breaks": 0,
        "cudagraph_skips": 0, "recompile_limit_hits": 0, "compiled_guards": 0, "calls": 0, "successes": 0,
        "success_rate": 0.0, "fallback_reason": None, "forecast_meta": {}, "start_probe": None,
    }


def symbol_measures(latencies: Sequence[float], preds: list, truth: np.ndarray, calls: int, recompiles: int,
                    warmup_recompiles: int, peak_mb: float | None) -> dict:
    """One symbol's numbers in one mode; ``mae_std`` is the spread of per-repeat MAE (None below 2 repeats)."""
    maes = [float(np.mean(np.abs(p - truth))) for p in preds]
    accuracy = forecast_errors(np.concatenate(preds), np.concatenate([truth] * len(preds))) if preds else \
        {"mae": None, "rmse": None, "mape_pct": None}
    return {
        **accuracy,
        "mae_std": float(np.std(maes, ddof=1)) if len(maes) > 1 else None,
        "latency_ms": latency_stats(latencies),
        "calls": calls,
        "successes": len(preds),
        "success_rate": len(preds) / calls if calls else 0.0,
        "recompiles_warmup": warmup_recompiles,
        "recompiles_after_warmup": recompiles,
        "peak_mb": peak_mb,
    }


def _timed_repeats(forecaster, batch, plan: CheckPlan, device: str, where: str,
                   errors: list[str]) -> list[tuple[int, float, np.ndarray, dict]]:
    """``iterations`` timed forecasts of one symbol's windows, seed ``seed + r``: (r, seconds, median, meta) of
    each finite one; a failure is one line in ``errors``."""
    done = []
    for r in range(plan.iterations):
        t = time.perf_counter()
        try:
            fc = forecaster.forecast(batch, plan.horizon, plan.num_samples, seed=plan.seed + r)
            _sync(device)
            dt = time.perf_counter() - t
            median = fc.quantile(0.5, "close")
        except Exception as exc:
            errors.append(f"repeat {r}{where}: {first_line(exc)}")
            continue
        if not np.all(np.isfinite(median)):
            errors.append(f"repeat {r}{where}: non-finite forecast")
            continue
        done.append((r, dt, median, fc.meta or {}))
    return done


def _model_warmup(forecaster, plan: CheckPlan, batch_size: int, errors: list[str]) -> float | None:
    """Seconds of the forecaster's own ``warmup()`` for the plan's shapes; None when it has none or it failed."""
    warmup = getattr(forecaster, "warmup", None)
    if warmup is None:
        return None
    try:
        return float(warmup(plan.context, plan.horizon, plan.num_samples, batch_size=batch_size))
    except Exception as exc:  # recorded like a failing warm-up call, never a crashed check
        errors.append(f"warmup(): {first_line(exc)}")
        return None


def run_mode(
    factory: ForecasterFactory,
    mode: str | None,
    frames: Mapping[str, pd.DataFrame],
    plan: CheckPlan,
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> tuple[dict, dict]:
    """Measure one mode; returns (json-ready result, {(repeat, symbol): median close [B, H]})."""
    from marketcast.runtime.counters import counters_delta, counters_snapshot
    from marketcast.runtime.guard import find_guards

    say = progress or (lambda _msg: None)
    label = mode or EAGER
    windows = {s: evaluation_windows(f, plan) for s, f in frames.items()}
    batches = {s: make_batch(f, windows[s], plan.context, plan.horizon) for s, f in frames.items()}
    probe = MemoryProbe(device)
    base_mb = probe.restart()
    c0 = counters_snapshot()
    result = blank_result(label)
    medians: dict = {}

    t0 = time.perf_counter()
    try:
        forecaster = factory(mode)
    except Exception as exc:  # a mode that cannot even be built is a failed mode, not a crashed check
        if mode is None and isinstance(exc, MarketcastError):
            raise  # eager cannot load (no weights, a config that does not fit): one line, nothing to compare
        result.update(load_s=time.perf_counter() - t0, cold_start_s=time.perf_counter() - t0,
                      errors=[f"load: {first_line(exc)}"], memory={"peak_mb": None, "source": probe.source})
        return result, medians
    load_s = time.perf_counter() - t0
    say(f"{label}: loaded in {load_s:.2f}s, warming up")

    def refused() -> int:
        return sum(g.stats.refused_recompiles for g in find_guards(forecaster))

    model_warmup_s = _model_warmup(forecaster, plan, max(b.batch_size for b in batches.values()), result["errors"])
    first_call_s = None
    warmup_s = model_warmup_s or 0.0
    warm_medians: dict = {}
    warm_recompiles: dict = {}
    for sym, batch in batches.items():
        before = counters_snapshot()
        t = time.perf_counter()
        try:
            first = forecaster.forecast(batch, plan.horizon, plan.num_samples, seed=plan.seed)
            _sync(device)
            warm_medians[sym] = first.quantile(0.5, "close")
        except Exception as exc:
            result["errors"].append(f"warm-up {sym}: {first_line(exc)}")
        dt = time.perf_counter() - t
        warmup_s += dt
        first_call_s = dt if first_call_s is None else first_call_s
        warm_recompiles[sym] = counters_delta(before, counters_snapshot())["recompiles"]
    for guard in find_guards(forecaster):
        if not guard.stats.sealed:
            guard.seal()
    c1 = counters_snapshot()

    peak_mb = probe.peak()
    latencies: list[float] = []
    preds, truths = [], []
    meta: dict = {}
    for sym, batch in batches.items():
        peak_mb = max(peak_mb, probe.peak())
        sym_base = probe.restart()  # this symbol's own peak window
        before, refused_before = counters_snapshot(), refused()
        truth = realised(frames[sym], windows[sym], plan.horizon)
        done = _timed_repeats(forecaster, batch, plan, device, f" {sym}", result["errors"])
        for r, _, median, fc_meta in done:
            medians[(r, sym)] = median
            meta = fc_meta or meta
        sym_latencies, sym_preds = [d[1] for d in done], [d[2] for d in done]
        sym_peak = probe.peak()
        peak_mb = max(peak_mb, sym_peak)
        recompiles = counters_delta(before, counters_snapshot())["recompiles"] + refused() - refused_before
        result["per_symbol"][sym] = symbol_measures(sym_latencies, sym_preds, truth, plan.iterations, recompiles,
                                                    warm_recompiles.get(sym, 0), sym_peak - sym_base)
        latencies += sym_latencies
        preds += sym_preds
        truths += [truth] * len(sym_preds)
        say(f"{label}: {sym} done ({len(sym_preds)}/{plan.iterations} repeats)")
    c2 = counters_snapshot()

    warm = counters_delta(c0, c1)
    after = counters_delta(c1, c2)
    # the warm-up call and repeat 0 see the same windows and seed: any difference is non-determinism
    repeat = [np.max(np.abs(medians[(0, s)] - warm_medians[s]) / np.maximum(np.abs(warm_medians[s]), 1e-12))
              for s in frames if s in warm_medians and (0, s) in medians]
    guards = find_guards(forecaster)  # again: a model may create wrappers lazily (one per shape bucket)
    fallback = next((g.stats.fallback_reason for g in guards if g.stats.fallback_reason), None)
    fallback = fallback or meta.get("fallback_reason")
    lat = latency_stats(latencies)
    compiled_ran = any(g.stats.compiled for g in guards) or bool(meta.get("compiled"))
    cache_loaded = [g.stats.extra.get("cache_loaded") for g in guards if "cache_loaded" in g.stats.extra]
    calls = plan.iterations * len(frames)
    first_s = (model_warmup_s or 0.0) + (first_call_s or 0.0)  # until the first real forecast is answered
    result.update(
        applicable=mode is None or compiled_ran or fallback is not None,
        accuracy=forecast_errors(np.concatenate(preds), np.concatenate(truths)) if preds else None,
        latency_ms=lat,
        load_s=load_s,
        warmup_s=warmup_s,
        model_warmup_s=model_warmup_s,
        compile_s=(max(0.0, first_s - lat["p50"] / 1000.0) if mode and first_call_s and lat["p50"] else 0.0),
        cold_start_s=load_s + first_s,
        start="warm" if cache_loaded and all(cache_loaded) else ("cold" if mode else None),
        memory={"peak_mb": peak_mb - base_mb, "base_mb": base_mb, "source": probe.source},
        recompiles_warmup=warm["recompiles"],
        recompiles_after_warmup=sum(s["recompiles_after_warmup"] for s in result["per_symbol"].values()),
        compiles_after_warmup=after["compiles"],
        repeat_delta_rel=float(max(repeat)) if repeat else None,
        graph_breaks=warm["graph_breaks"] + after["graph_breaks"],
        cudagraph_skips=warm["cudagraph_skips"] + after["cudagraph_skips"],
        recompile_limit_hits=warm["recompile_limit_hits"] + after["recompile_limit_hits"],
        compiled_guards=len(guards),
        calls=calls,
        successes=len(latencies),
        success_rate=len(latencies) / calls if calls else 0.0,
        fallback_reason=fallback,
        forecast_meta={k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool, type(None)))},
    )
    del forecaster
    gc.collect()
    return result, medians
