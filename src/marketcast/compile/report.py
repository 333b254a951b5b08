"""``compile_check.json`` / ``compile_check.md``: the tables people read, and the atomic writer.

Both files are written to temporary names and renamed, only after the whole report exists and matches its
schema (:mod:`marketcast.compile.schema`), so a failed run leaves no partial output.
"""

from __future__ import annotations

import json
from pathlib import Path

from marketcast.fileio import write_files
from marketcast.compile.schema import clean, validate_report
from marketcast.errors import MarketcastError


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
            "warm-up s": _fmt(m.get("model_warmup_s"), ".1f"),
            "cold start s": _fmt(m.get("cold_start_s"), ".1f"),
            "peak MiB": _fmt(mem.get("peak_mb"), ".0f"),
            "recompiles": f"{m.get('recompiles_warmup', 0)}/{m.get('recompiles_after_warmup', 0)}",
            "graph breaks": str(m.get("graph_breaks", 0)),
            "cg skips": str(m.get("cudagraph_skips", 0)),
            "success": _fmt(m.get("success_rate"), ".0%"),
        })
    return rows


def row_line(row: dict) -> str:
    """A table row as one line of a log: ``SP500 default: PASS (p50 ms 4.3, speed-up 4.00x, ...)``."""
    name = " ".join(row[k] for k in ("symbol", "mode") if k in row)
    rest = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("symbol", "mode", "verdict"))
    return f"{name}: {row['verdict']} ({rest})"


def symbol_rows(report: dict) -> list[dict]:
    """One row per symbol and mode: the per-symbol study."""
    rows = []
    for sym in report["plan"]["symbols"]:
        for m in report["modes"]:
            s = m["per_symbol"].get(sym)
            if s is None:
                continue
            lat = s["latency_ms"]
            rows.append({
                "symbol": sym,
                "mode": m["mode"],
                "verdict": s["verdict"],
                "p50 ms": _fmt(lat.get("p50"), ".1f"),
                "σ ms": _fmt(lat.get("std"), ".1f"),
                "speed-up": _fmt(s.get("speedup"), ".2f", "x"),
                "MAE": _fmt(s.get("mae"), ".4g"),
                "σ MAE": _fmt(s.get("mae_std"), ".3g"),
                "Δ MAE": _fmt(s.get("mae_delta_rel"), ".2%"),
                "Δ out (rel)": _fmt(s.get("output_delta_rel"), ".2e"),
                "recompiles": f"{s['recompiles_warmup']}/{s['recompiles_after_warmup']}",
                "peak MiB": _fmt(s.get("peak_mb"), ".0f"),
            })
    return rows


def _table(rows: list[dict]) -> list[str]:
    cols = list(rows[0])
    return (["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            + ["| " + " | ".join(r[c] for c in cols) + " |" for r in rows])


def to_markdown(report: dict) -> str:
    plan = report["plan"]
    th = report["thresholds"]
    lines = [
        f"# Compile check: {report['model']} ({report['check_mode']})",
        "",
        f"Generated {report['generated_at']} on {report['device']}, torch {report['torch']}, "
        f"{report['cpu_count']} CPUs. Weights: {report['weights'] or 'default'}.",
        f"Symbols {', '.join(plan['symbols'])}; {plan['iterations']} repeats x {plan['batch']} windows, "
        f"context {plan['context']}, horizon {plan['horizon']}, {plan['num_samples']} samples, seed {plan['seed']}.",
        "",
        *_table(summary_rows(report)),
        "",
        "Recompiles are `during warm-up / after warm-up`. Latency excludes load and compile (warm-up calls are "
        "not timed). Peak memory is above what was in use when the mode started "
        f"({report['modes'][0].get('memory', {}).get('source', '?')}).",
        "",
        f"Thresholds for a compiled mode: output delta < {th['max_output_delta']:g} relative, recompiles after "
        f"warm-up <= {th['max_recompiles']}, speed-up >= {th['min_speedup']:g}, memory <= "
        f"+{th['max_memory_delta']:.0%}, 100 % success, no eager fallback. A symbol passes a mode on its own "
        "success, output delta, recompiles and speed-up, and the mode's fallback and memory.",
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
        "",
        "## Per symbol",
        "",
        f"Each symbol's windows, {plan['iterations']} repeats with seeds {plan['seed']}.. in every mode. σ MAE is the "
        "spread of MAE over repeats (sampling noise); Δ MAE is |MAE - eager MAE| / eager MAE on the same seeds.",
        "",
        *_table(symbol_rows(report)),
        "",
        *[f"- **{sym}**: {r['recommended_mode']} ({r['reason']})" for sym, r in report["symbol_recommendations"].items()],
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
    report = clean(report)
    problems = validate_report(report)
    if problems:
        raise MarketcastError("compile check report does not match its schema: " + "; ".join(problems[:5]))
    json_path, md_path = write_files(output_dir, {"compile_check.json": json.dumps(report, indent=2) + "\n",
                                                  "compile_check.md": to_markdown(report)})
    return json_path, md_path
