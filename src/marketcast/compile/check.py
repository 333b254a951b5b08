"""Stress harness: eager vs each compile mode on real bars, with a verdict per mode and per symbol.

Why it is built this way (the original scripts' mistakes): load and compile time are measured apart from
inference latency (warm-up is never timed as latency); every mode sees the same windows with the same seeds,
so the eager-vs-compiled difference is a real numerical difference, not sampling noise; a failing call is
recorded, never allowed to crash the run. The pieces: :mod:`.plan` (what runs), :mod:`.measure` (one mode),
:mod:`.verdict` (the gates), :mod:`.study` (a mode per symbol), :mod:`.report` (JSON and Markdown).
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

from marketcast.compile.measure import run_mode
from marketcast.compile.plan import EAGER, CheckPlan, ForecasterFactory, frame_of
from marketcast.compile.schema import SCHEMA
from marketcast.compile.study import recommend
from marketcast.compile.thresholds import Thresholds
from marketcast.compile.verdict import judge, judge_eager, judge_symbols, output_delta, relative_delta


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
    on_mode: Callable[[dict, list[str]], None] | None = None,
) -> dict:
    """Run eager then each compile mode in ``modes``; returns the report (see ``report.validate_report``).

    ``factory(mode)`` builds the forecaster (``None`` = eager). ``modes`` empty means compile is not
    applicable (say why in ``compile_note``): only eager is measured. ``configured_mode`` is what production
    runs now (None = eager); ``production_ok`` says whether that mode passed. ``on_mode(result, symbols)``
    hears of each mode as soon as it is judged (a log streams its rows instead of looking hung).
    """
    import torch

    frames = {s: frame_of(b) for s, b in bars_by_symbol.items()}
    eager, eager_medians = run_mode(factory, None, frames, plan, device, progress)
    judge_eager(eager)
    done = on_mode or (lambda _result, _symbols: None)
    done(eager, list(frames))
    results = [eager]
    notes = [compile_note] if compile_note else []
    if eager.get("repeat_delta_rel"):
        notes.append(f"eager is not deterministic for a fixed seed (repeat delta {eager['repeat_delta_rel']:.2e}): "
                     "the eager-vs-compiled output delta includes that noise")
    for mode in modes:
        torch._dynamo.reset()  # each mode compiles from scratch in this process (the disk cache may still help)
        res, meds = run_mode(factory, mode, frames, plan, device, progress)
        res["output_delta_rel"] = output_delta(meds, eager_medians)
        res["mae_delta_rel"] = relative_delta((res.get("accuracy") or {}).get("mae"),
                                              (eager.get("accuracy") or {}).get("mae"))
        judge(res, eager, thresholds)
        judge_symbols(res, eager, meds, eager_medians, thresholds)
        done(res, list(frames))
        if not res["applicable"]:
            notes.append(f"{mode}: the forecaster ran no compiled code; compile is not applicable to it")
        results.append(res)
    passing = [r for r in results[1:] if r["verdict"] == "PASS"]
    recommended = max(passing, key=lambda r: r["speedup"] or 0.0)["mode"] if passing else EAGER
    configured = configured_mode or EAGER
    configured_result = next((r for r in results if r["mode"] == configured), None)
    production_ok = bool(eager["verdict"] == "PASS" and configured_result is not None
                         and configured_result["verdict"] == "PASS")
    if configured_result is None:
        notes.append(f"configured mode {configured!r} was not measured")
    return {
        "schema": SCHEMA,
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
        "symbol_recommendations": {s: recommend(s, results) for s in frames},
        "configured_mode": configured,
        "production_ok": production_ok,
    }
