"""``compile_check.json`` schema (``marketcast.compile_check/2``) in machine-checkable form.

``docs/compile_check_schema.md`` is the same schema for people; :func:`validate_report` is run before a report is
written, so a report on disk always matches it. JSON has no NaN: :func:`clean` writes non-finite numbers as null.
"""

from __future__ import annotations

import math

SCHEMA = "marketcast.compile_check/2"
NUM = (int, float)
OPT_NUM = (int, float, type(None))
OPT_STR = (str, type(None))

TOP_FIELDS = {
    "schema": str, "generated_at": str, "model": str, "weights": OPT_STR, "device": str, "torch": str,
    "python": str, "cpu_count": (int, type(None)), "check_mode": str, "plan": dict, "thresholds": dict,
    "compile_applicable": bool, "notes": list, "modes": list, "recommended_mode": str,
    "symbol_recommendations": dict, "configured_mode": str, "production_ok": bool,
}
PLAN_FIELDS = {"iterations": int, "context": int, "horizon": int, "num_samples": int, "batch": int, "seed": int,
               "symbols": list}
THRESHOLD_FIELDS = {"max_output_delta": NUM, "max_recompiles": int, "min_speedup": NUM, "max_memory_delta": NUM}
MODE_FIELDS = {
    "mode": str, "applicable": bool, "verdict": str, "checks": list, "failed_checks": list, "errors": list,
    "accuracy": (dict, type(None)), "per_symbol": dict, "output_delta_rel": OPT_NUM, "latency_ms": dict,
    "speedup": OPT_NUM, "load_s": NUM, "warmup_s": NUM, "model_warmup_s": OPT_NUM, "compile_s": NUM, "cold_start_s": NUM,
    "start": OPT_STR, "memory": dict, "recompiles_warmup": int, "recompiles_after_warmup": int,
    "compiles_after_warmup": int, "repeat_delta_rel": OPT_NUM, "mae_delta_rel": OPT_NUM,
    "graph_breaks": int, "cudagraph_skips": int, "recompile_limit_hits": int, "compiled_guards": int,
    "calls": int, "successes": int, "success_rate": NUM, "fallback_reason": OPT_STR, "forecast_meta": dict,
    "start_probe": (dict, type(None)),
}
SYMBOL_FIELDS = {
    "mae": OPT_NUM, "rmse": OPT_NUM, "mape_pct": OPT_NUM, "mae_std": OPT_NUM, "latency_ms": dict,
    "calls": int, "successes": int, "success_rate": NUM, "recompiles_warmup": int,
    "recompiles_after_warmup": int, "peak_mb": OPT_NUM, "speedup": OPT_NUM, "output_delta_rel": OPT_NUM,
    "mae_delta_rel": OPT_NUM, "checks": list, "failed_checks": list, "verdict": str,
}
RECOMMENDATION_FIELDS = {"recommended_mode": str, "reason": str}
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


def _entry(entry: dict, spec: dict, where: str) -> list[str]:
    """A mode or a symbol entry: its fields, verdict, latency, checks and success rate."""
    problems = _fields(entry, spec, where)
    if problems:
        return problems
    if entry["verdict"] not in VERDICTS:
        problems.append(f"{where}.verdict: {entry['verdict']!r} not in {VERDICTS}")
    problems += _fields(entry["latency_ms"], LATENCY_FIELDS, f"{where}.latency_ms")
    for j, c in enumerate(entry["checks"]):
        problems += _fields(c, CHECK_FIELDS, f"{where}.checks[{j}]")
    if not 0.0 <= entry["success_rate"] <= 1.0:
        problems.append(f"{where}.success_rate: {entry['success_rate']} outside [0, 1]")
    return problems


def validate_report(report: dict) -> list[str]:
    """Every way ``report`` departs from the schema (empty list = valid)."""
    problems = _fields(report, TOP_FIELDS, "report")
    if problems:
        return problems
    if report["schema"] != SCHEMA:
        problems.append(f"schema: {report['schema']!r} is not {SCHEMA!r}")
    problems += _fields(report["plan"], PLAN_FIELDS, "plan")
    problems += _fields(report["thresholds"], THRESHOLD_FIELDS, "thresholds")
    if not report["modes"] or report["modes"][0].get("mode") != "eager":
        problems.append("modes: the first entry must be the eager reference")
    names = [m.get("mode") for m in report["modes"]]
    if report["recommended_mode"] not in names:
        problems.append(f"recommended_mode {report['recommended_mode']!r} is not one of the measured modes")
    symbols = report["plan"].get("symbols", [])
    if sorted(report["symbol_recommendations"]) != sorted(symbols):
        problems.append("symbol_recommendations: needs exactly one entry per symbol of the plan")
    for sym, rec in report["symbol_recommendations"].items():
        problems += _fields(rec, RECOMMENDATION_FIELDS, f"symbol_recommendations.{sym}")
        if rec.get("recommended_mode") not in names:
            problems.append(f"symbol_recommendations.{sym}: {rec.get('recommended_mode')!r} was not measured")
    for i, m in enumerate(report["modes"]):
        where = f"modes[{i}]"
        mode_problems = _entry(m, MODE_FIELDS, where)
        problems += mode_problems
        if mode_problems:
            continue
        if m["accuracy"] is not None:
            problems += _fields(m["accuracy"], ACCURACY_FIELDS, f"{where}.accuracy")
        for sym, entry in m["per_symbol"].items():
            problems += _entry(entry, SYMBOL_FIELDS, f"{where}.per_symbol.{sym}")
    return problems


def clean(value):
    """JSON cannot hold NaN/inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value




_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array",
               type(None): "null"}


def _object(spec: dict, **inner: dict) -> dict:
    """A JSON Schema object of ``spec``'s fields (all required), ``inner`` refining some of them."""
    props = {}
    for key, types in spec.items():
        names = list(dict.fromkeys(_JSON_TYPES[t] for t in _tuple(types)))
        if "number" in names and "integer" in names:
            names.remove("integer")  # a JSON number covers both
        props[key] = {"type": names[0] if len(names) == 1 else names}
        props[key].update({k: v for k, v in inner.get(key, {}).items() if k != "type"})
    return {"type": "object", "required": list(spec), "properties": props}


def json_schema() -> dict:
    """The same schema as a JSON Schema: ``src/marketcast/schemas/compile_check.schema.json`` is this, written out."""
    latency, checks = _object(LATENCY_FIELDS), {"items": _object(CHECK_FIELDS)}
    verdict = {"enum": list(VERDICTS)}
    symbol = _object(SYMBOL_FIELDS, latency_ms=latency, checks=checks, verdict=verdict)
    mode = _object(MODE_FIELDS, latency_ms=latency, checks=checks, verdict=verdict, accuracy=_object(ACCURACY_FIELDS),
                   per_symbol={"additionalProperties": symbol})
    top = _object(TOP_FIELDS, schema={"const": SCHEMA}, plan=_object(PLAN_FIELDS), thresholds=_object(THRESHOLD_FIELDS),
                  modes={"items": mode, "minItems": 1},
                  symbol_recommendations={"additionalProperties": _object(RECOMMENDATION_FIELDS)})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:marketcast:schema:compile_check",
            "title": "marketcast compile check --json (compile_check.json)",
            "description": "docs/compile_check_schema.md says what each field means; generated from "
                           "marketcast.compile.schema.json_schema().", **top}
