"""``compile_check.json`` / ``compile_check.md``: schema, validation and atomic writers.

The schema (``marketcast.compile_check/1``) is spelled out in ``docs/compile_check_schema.md``; the
:data:`TOP_FIELDS` / :data:`MODE_FIELDS` tables below are its machine-checkable form. Both files are
written to temporary names and renamed, only after the whole report exists, so a failed run leaves no
partial output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from marketcast.compile.envfile import write_atomic
from marketcast.errors import MarketcastError

NUM = (int, float)
OPT_NUM = (int, float, type(None))
OPT_STR = (str, type(None))

TOP_FIELDS = {
    "schema": str, "generated_at": str, "model": str, "weights": OPT_STR, "device": str, "torch": str,
    "python": str, "cpu_count": (int, type(None)), "check_mode": str, "plan": dict, "thresholds": dict,
    "compile_applicable": bool, "notes": list, "modes": list, "recommended_mode": str,
    "configured_mode": str, "production_ok": bool,
}
PLAN_FIELDS = {"iterations": int, "context": int, "horizon": int, "num_samples": int, "batch": int, "seed": int,
               "symbols": list}
THRESHOLD_FIELDS = {"max_output_delta": NUM, "max_recompiles": int, "min_speedup": NUM,
                    "max_memory_increase": NUM}
MODE_FIELDS = {
    "mode": str, "applicable": bool, "verdict": str, "checks": list, "failed_checks": list, "errors": list,
    "accuracy": (dict, type(None)), "per_symbol": dict, "output_delta_rel": OPT_NUM, "latency_ms": dict,
    "speedup": OPT_NUM, "load_s": NUM, "warmup_s": NUM, "compile_s": NUM, "cold_start_s": NUM,
    "start": OPT_STR, "memory": dict, "recompiles_warmup": int, "recompiles_after_warmup": int,
    "compiles_after_warmup": int, "repeat_delta_rel": OPT_NUM, "mae_delta_rel": OPT_NUM,
    "graph_breaks": int, "cudagraph_skips": int, "recompile_limit_hits": int, "compiled_guards": int,
    "calls": int, "successes": int, "success_rate": NUM, "fallback_reason": OPT_STR, "forecast_meta": dict,
    "start_probe": (dict, type(None)),
}
LATENCY_FIELDS = {"mean": OPT_NUM, "std": OPT_NUM, "p50": OPT_NUM, "p99": OPT_NUM, "n": int}
ACCURACY_FIELDS = {"mae": NUM, "rmse": NUM, "mape_pct": NUM}
CHECK_FIELDS = {"name": str, "value": (int, float, bool, type(None)), "threshold": (int, float, bool),
                "op": str, "passed": bool}
VERDICTS = ("PASS", "FAIL", "N/A")


def _fields(obj: dict, spec: dict, where: str) -> list[str]:
    problems = []
    for key, types in spec.items():
        if key not in obj:
            problems.append(f"{where}: missing {key!r}")
        elif not isinstance(obj[key], types) or (isinstance(obj[key], bool) and bool not in _tuple(types)):
            problems.append(f"{where}.{key}: {type(obj[key]).__name__} is not {_names(types)}")
    return problems


def _tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def _names(types) -> str:
    return "|".join(t.__name__ for t in _tuple(types))


def validate_report(report: dict) -> list[str]:
    """Every way ``report`` departs from the schema (empty list = valid)."""
    problems = _fields(report, TOP_FIELDS, "report")
    if problems:
        return problems
    problems += _fields(report["plan"], PLAN_FIELDS, "plan")
    problems += _fields(report["thresholds"], THRESHOLD_FIELDS, "thresholds")
    if not report["modes"] or report["modes"][0].get("mode") != "eager":
        problems.append("modes: the first entry must be the eager reference")
    names = [m.get("mode") for m in report["modes"]]
    if report["recommended_mode"] not in names:
        problems.append(f"recommended_mode {report['recommended_mode']!r} is not one of the measured modes")
    for i, m in enumerate(report["modes"]):
        where = f"modes[{i}]"
        problems += _fields(m, MODE_FIELDS, where)
        if problems:
            continue
        if m["verdict"] not in VERDICTS:
            problems.append(f"{where}.verdict: {m['verdict']!r} not in {VERDICTS}")
        problems += _fields(m["latency_ms"], LATENCY_FIELDS, f"{where}.latency_ms")
        if m["accuracy"] is not None:
            problems += _fields(m["accuracy"], ACCURACY_FIELDS, f"{where}.accuracy")
        for j, c in enumerate(m["checks"]):
            problems += _fields(c, CHECK_FIELDS, f"{where}.checks[{j}]")
        if not 0.0 <= m["success_rate"] <= 1.0:
            problems.append(f"{where}.success_rate: {m['success_rate']} outside [0, 1]")
    return problems


def _clean(value):
    """JSON cannot hold NaN/inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _fmt(value, spec: str = ".3g", suffix: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:{spec}}{suffix}"


def summary_rows(report: dict) -> list[dict]:
    """One row per mode with the columns the table and the markdown show."""
    rows = []
    for m in report["modes"]:
        acc = m.get("accuracy") or {}
        lat = m.get("latency_ms") or {}
        mem = m.get("memory") or {}
        rows.append({
            "mode": m["mode"],
            "verdict": m["verdict"],
            "MAE": _fmt(acc.get("mae"), ".4g"),
            "RMSE": _fmt(acc.get("rmse"), ".4g"),
            "MAPE %": _fmt(acc.get("mape_pct"), ".3g"),
            "Δ out (rel)": _fmt(m.get("output_delta_rel"), ".2e"),
            "p50 ms": _fmt(lat.get("p50"), ".1f"),
            "σ ms": _fmt(lat.get("std"), ".1f"),
            "p99 ms": _fmt(lat.get("p99"), ".1f"),
            "speed-up": _fmt(m.get("speedup"), ".2f", "x"),
            "compile s": _fmt(m.get("compile_s"), ".1f"),
            "cold start s": _fmt(m.get("cold_start_s"), ".1f"),
            "peak MiB": _fmt(mem.get("peak_mb"), ".0f"),
            "recompiles": f"{m.get('recompiles_warmup', 0)}/{m.get('recompiles_after_warmup', 0)}",
            "graph breaks": str(m.get("graph_breaks", 0)),
            "cg skips": str(m.get("cudagraph_skips", 0)),
            "success": _fmt(m.get("success_rate"), ".0%"),
        })
    return rows


def to_markdown(report: dict) -> str:
    plan = report["plan"]
    th = report["thresholds"]
    rows = summary_rows(report)
    cols = list(rows[0])
    lines = [
        f"# Compile check: {report['model']} ({report['check_mode']})",
        "",
        f"Generated {report['generated_at']} on {report['device']}, torch {report['torch']}, "
        f"{report['cpu_count']} CPUs. Weights: {report['weights'] or 'default'}.",
        f"Symbols {', '.join(plan['symbols'])}; {plan['iterations']} iterations x {plan['batch']} windows, "
        f"context {plan['context']}, horizon {plan['horizon']}, {plan['num_samples']} samples, seed {plan['seed']}.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(r[c] for c in cols) + " |" for r in rows]
    lines += [
        "",
        "Recompiles are `during warm-up / after warm-up`. Latency excludes load and compile (warm-up calls are "
        "not timed). Peak memory is above what was in use when the mode started "
        f"({report['modes'][0].get('memory', {}).get('source', '?')}).",
        "",
        f"Thresholds for a compiled mode: output delta < {th['max_output_delta']:g} relative, recompiles after "
        f"warm-up <= {th['max_recompiles']}, speed-up >= {th['min_speedup']:g}, memory <= "
        f"+{th['max_memory_increase']:.0%}, 100 % success, no eager fallback.",
        "",
        "## Verdicts",
        "",
    ]
    for m in report["modes"]:
        why = f" (failed: {', '.join(m['failed_checks'])})" if m["failed_checks"] else ""
        lines.append(f"- **{m['mode']}**: {m['verdict']}{why}")
        if m.get("fallback_reason"):
            lines.append(f"  - fell back to eager: {m['fallback_reason']}")
        for err in m.get("errors", [])[:5]:
            lines.append(f"  - error: {err}")
    lines += [
        "",
        f"Recommended: **{report['recommended_mode']}**. Configured now: {report['configured_mode']} -> "
        f"{'OK' if report['production_ok'] else 'NOT OK'} for production.",
    ]
    probes = [(m["mode"], m["start_probe"]) for m in report["modes"] if m.get("start_probe")]
    if probes:
        lines += ["", "## Cold vs warm start (fresh processes)", "",
                  "Start = build + first forecast. Warm: a new process with an empty inductor cache that loads the "
                  "persistent artifacts saved by the cold one.", "",
                  "| mode | cold s | warm s | cold/warm | warm cache hits |", "|---|---|---|---|---|"]
        for mode, p in probes:
            if "error" in p:
                lines.append(f"| {mode} | {p['error']} | | | |")
            else:
                lines.append(f"| {mode} | {p['cold']['start_s']:.1f} | {p['warm']['start_s']:.1f} | "
                             f"{_fmt(p.get('speedup'), '.2f', 'x')} | {p['warm']['fxgraph_cache_hit']} |")
    if report["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def write_report(report: dict, output_dir: str | Path) -> tuple[Path, Path]:
    """Validate, then write ``compile_check.json`` and ``compile_check.md`` atomically."""
    report = _clean(report)
    problems = validate_report(report)
    if problems:
        raise MarketcastError("compile check report does not match its schema: " + "; ".join(problems[:5]))
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise MarketcastError(f"{out} exists and is not a folder; pass another --output-dir")
    json_path, md_path = out / "compile_check.json", out / "compile_check.md"
    json_text = json.dumps(report, indent=2) + "\n"
    md_text = to_markdown(report)
    write_atomic(json_path, json_text)
    write_atomic(md_path, md_text)
    return json_path, md_path
