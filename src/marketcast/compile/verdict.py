"""Verdicts: the gates of a compiled mode against eager, for the whole run and for each symbol.

One set of gates (:func:`gates`) serves both; a symbol's verdict uses its own success, output delta,
recompiles and speed-up, and the mode's fallback and memory (compiled graphs and their memory belong to the
mode, not to a symbol).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from marketcast.compile.thresholds import Thresholds


def _check(name: str, value, threshold, op: str) -> dict:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        passed = False
    else:
        passed = {"<": value < threshold, "<=": value <= threshold, ">=": value >= threshold,
                  "==": value == threshold}[op]
    return {"name": name, "value": value, "threshold": threshold, "op": op, "passed": bool(passed)}


def gates(measured: Mapping, th: Thresholds) -> list[dict]:
    """The checks of a compiled mode (or of one symbol in it) from what was measured."""
    return [
        _check("success_rate", measured.get("success_rate", 0.0), 1.0, "=="),
        _check("no_fallback", measured.get("fallback_reason") is None, True, "=="),
        _check("output_delta_rel", measured.get("output_delta_rel"), th.max_output_delta, "<"),
        _check("recompiles_after_warmup", measured.get("recompiles_after_warmup"), th.max_recompiles, "<="),
        _check("speedup", measured.get("speedup"), th.min_speedup, ">="),
        _check("memory_delta_rel", measured.get("memory_delta_rel"), th.max_memory_delta, "<="),
    ]


def _apply(entry: dict, checks: list[dict]) -> None:
    failed = [c["name"] for c in checks if not c["passed"]]
    entry.update(checks=checks, failed_checks=failed, verdict="PASS" if not failed else "FAIL")


def speedup(eager_latency: Mapping | None, latency: Mapping | None) -> float | None:
    """Eager p50 / mode p50."""
    e_p50, c_p50 = (eager_latency or {}).get("p50"), (latency or {}).get("p50")
    return e_p50 / c_p50 if e_p50 and c_p50 else None


def relative_delta(value: float | None, reference: float | None) -> float | None:
    return abs(value - reference) / reference if reference and value is not None else None


def output_delta(medians: Mapping, reference: Mapping, symbol: str | None = None) -> float | None:
    """Max relative difference of median close forecasts on the same (repeat, symbol) and seed."""
    keys = [k for k in medians if k in reference and (symbol is None or k[1] == symbol)]
    if not keys:
        return None
    return float(max(np.max(np.abs(medians[k] - reference[k]) / np.maximum(np.abs(reference[k]), 1e-12))
                     for k in keys))


def judge(result: dict, eager: dict, th: Thresholds) -> None:
    """Fill ``checks``, ``verdict`` and the eager-relative fields of a compiled mode's result, in place."""
    if not result.get("applicable", True):
        result.update(verdict="N/A", checks=[], failed_checks=[], speedup=None)
        return
    result["speedup"] = speedup(eager.get("latency_ms"), result.get("latency_ms"))
    e_mem = eager.get("memory") or {}
    e_peak, c_peak = e_mem.get("peak_mb"), (result.get("memory") or {}).get("peak_mb")
    # extra memory of the mode over eager's, as a fraction of eager's whole footprint at its peak (the memory
    # in use when it started plus its growth): eager's growth alone can be ~0 MiB on CPU, where memory freed
    # by an earlier mode is reused
    e_total = (e_mem.get("base_mb") or 0.0) + (e_peak or 0.0)
    result.setdefault("memory", {})["delta_rel"] = (
        (c_peak - e_peak) / e_total if e_peak is not None and c_peak is not None and e_total > 0 else None
    )
    _apply(result, gates({**result, "memory_delta_rel": result["memory"]["delta_rel"]}, th))


def judge_eager(result: dict) -> None:
    ok = result.get("success_rate") == 1.0 and result.get("accuracy") is not None
    checks = [_check("success_rate", result.get("success_rate", 0.0), 1.0, "==")]
    result.update(checks=checks, failed_checks=[] if ok else ["success_rate"], verdict="PASS" if ok else "FAIL",
                  speedup=1.0 if ok else None, output_delta_rel=None, mae_delta_rel=None)
    result.setdefault("memory", {})["delta_rel"] = 0.0 if ok else None
    for entry in result.get("per_symbol", {}).values():
        entry.update(speedup=1.0, output_delta_rel=None, mae_delta_rel=None)
        _apply(entry, [_check("success_rate", entry["success_rate"], 1.0, "==")])


def judge_symbols(result: dict, eager: dict, medians: Mapping, eager_medians: Mapping, th: Thresholds) -> None:
    """Each symbol of a compiled mode: its own speed-up, output and MAE delta vs eager, and verdict."""
    for sym, entry in result.get("per_symbol", {}).items():
        ref = eager.get("per_symbol", {}).get(sym, {})
        entry.update(speedup=speedup(ref.get("latency_ms"), entry["latency_ms"]),
                     output_delta_rel=output_delta(medians, eager_medians, sym),
                     mae_delta_rel=relative_delta(entry["mae"], ref.get("mae")))
        if not result.get("applicable", True):
            entry.update(checks=[], failed_checks=[], verdict="N/A")
            continue
        memory = (result.get("memory") or {}).get("delta_rel")
        _apply(entry, gates({**entry, "fallback_reason": result.get("fallback_reason"),
                             "memory_delta_rel": memory}, th))
