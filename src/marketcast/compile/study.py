"""The per-symbol study: which mode to run for each symbol, and why.

Like the original system's five-symbol study (latency, sigma of MAE over repeats, compiled-vs-eager MAE
delta, a mode per symbol), but every number comes from the same windows and seeds in every mode, and a mode is
recommended only when it passes every gate on that symbol; among those, the fastest.
"""

from __future__ import annotations

from typing import Sequence

from marketcast.compile.plan import EAGER


def _fmt(value, spec: str = ".3g") -> str:
    return "n/a" if value is None else str(value) if isinstance(value, (bool, str)) else format(value, spec)


def _failed(entry: dict | None, result: dict) -> str:
    """Why a compiled mode did not pass on a symbol, one short clause per failed gate."""
    if entry is None:
        return "did not run" + (f" ({result['errors'][0]})" if result.get("errors") else "")
    if entry.get("verdict") == "N/A":
        return "ran no compiled code"
    parts = []
    for c in entry.get("checks", []):
        if not c["passed"]:
            parts.append(f"{c['name']} {_fmt(c['value'])} (needs {c['op']} {_fmt(c['threshold'], 'g')})")
    return ", ".join(parts)


def _why(mode: dict, eager: dict) -> str:
    lat, e_lat = mode["latency_ms"], eager["latency_ms"]
    spread = mode["mae_std"] / mode["mae"] if mode.get("mae_std") is not None and mode.get("mae") else None
    return (f"{_fmt(mode['speedup'], '.2f')}x eager (p50 {_fmt(lat['p50'], '.1f')}±{_fmt(lat.get('std'), '.1f')} vs "
            f"{_fmt(e_lat['p50'], '.1f')}±{_fmt(e_lat.get('std'), '.1f')} ms), output delta "
            f"{_fmt(mode['output_delta_rel'], '.1e')}, MAE delta "
            f"{_fmt(mode['mae_delta_rel'], '.2%')} (sampling sigma of MAE {_fmt(spread, '.2%')}), "
            f"{mode['recompiles_after_warmup']} recompiles after warm-up")


def recommend(symbol: str, results: Sequence[dict]) -> dict:
    """``{recommended_mode, reason}`` for one symbol; ``results[0]`` is eager, the rest compiled modes."""
    eager = results[0]["per_symbol"].get(symbol)
    if eager is None or eager.get("verdict") != "PASS":
        done = eager["successes"] if eager else 0
        return {"recommended_mode": EAGER,
                "reason": f"eager itself failed on {symbol} ({done} repeats succeeded): fix that before compiling"}
    compiled = list(results[1:])
    if not compiled:
        return {"recommended_mode": EAGER, "reason": "no compile mode was measured (compile is not applicable)"}
    passing = [(r["mode"], r["per_symbol"][symbol]) for r in compiled
               if r["per_symbol"].get(symbol, {}).get("verdict") == "PASS"]
    if passing:
        mode, entry = max(passing, key=lambda p: p[1]["speedup"] or 0.0)
        return {"recommended_mode": mode, "reason": _why(entry, eager)}
    why = "; ".join(f"{r['mode']}: {_failed(r['per_symbol'].get(symbol), r)}" for r in compiled)
    return {"recommended_mode": EAGER, "reason": f"no compiled mode passed on {symbol} ({why})"}
