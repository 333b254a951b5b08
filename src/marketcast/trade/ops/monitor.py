"""One JSON line per cycle (latency, quotes, compile and memory, the chosen strategies, the orders), and what
``marketcast trade status`` reads from them.

Records are append-only and keyed by (``clock``, ``decision_ts``): a cycle re-run after a crash appends a
second record for the same bar, and the summary keeps the last one. What must add up after kills (cycles, orders,
fills) is counted from the journal instead (:mod:`marketcast.trade.ops.status`). A line that cannot be written
whole (a full disk) is cut back off and ends the run with :class:`~marketcast.errors.StateError`.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from pathlib import Path

from marketcast.errors import StateError
from marketcast.trade.journal.files import append_line, private_dir

RECORDS = "records.jsonl"


def peak_memory_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def recompiles() -> int:
    """Dynamo recompiles so far; 0 without importing torch when no model loaded it."""
    if "torch" not in sys.modules:
        return 0
    from marketcast.runtime.counters import recompile_count

    return recompile_count()


class Monitor:
    """Appends cycle records to ``state_dir/records.jsonl``. Recompiles count from the end of the warm-up
    (:meth:`warmed`), and the first record after it carries the warm-up and the models skipped on the way."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = private_dir(state_dir) / RECORDS
        self._recompiles_at_start = recompiles()
        self.warm_memory_mb = peak_memory_mb()
        self._once: dict = {}

    def warmed(self, warmup: dict | None, skipped: list[dict] | None = None) -> None:
        """The model is loaded and warm: count recompiles and memory growth from here."""
        self._recompiles_at_start, self.warm_memory_mb = recompiles(), peak_memory_mb()
        self._once = {k: v for k, v in (("warmup", warmup), ("models_skipped", skipped)) if v}

    def record(self, **fields) -> dict:
        rec = {"written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "recompiles_since_start": recompiles() - self._recompiles_at_start,
               "peak_memory_mb": round(peak_memory_mb(), 1), **self._once, **fields}
        append_line(self.path, json.dumps(rec, sort_keys=True, default=str) + "\n")
        self._once = {}
        return rec


def read_records(state_dir: str | Path) -> list[dict]:
    """All records, the last one per (clock, decision bar), in bar order (a torn last line from a kill is
    skipped)."""
    path = Path(state_dir) / RECORDS
    if not path.exists():
        return []
    by_bar: dict[tuple[str, str], dict] = {}
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:  # named here: the runner's generic line cannot say which file it was
        raise StateError(f"{path}: byte {exc.start:,} is not UTF-8 text, so this is no records file of marketcast "
                         "(damaged); move it away and the next cycle starts a new one") from None
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(rec, dict):  # a line of other JSON (a number, a list) is no record: skipped as torn
            continue
        by_bar[(str(rec.get("decision_ts")), str(rec.get("clock") or ""))] = rec
    return [by_bar[k] for k in sorted(by_bar)]


def max_drawdown(equity: list) -> float | None:
    """The deepest fall of the recorded equity from its running peak, as a negative fraction of the peak: the
    backtest's sign, as quantstats (0.0: never below a peak; None: no equity recorded). Cycles without an equity
    figure are skipped."""
    from marketcast.backtest.metrics import equity_drawdown

    recorded = [v for v in equity if v is not None and not math.isnan(v) and v > 0]
    return 0.0 - equity_drawdown(recorded) if recorded else None  # 0.0 - 0.0 is 0.0, never -0.0


def summarise(records: list[dict]) -> dict:
    """What the records say over all cycles: the venue, equity, quotes, forecast latency, compile state, memory
    and the last warm-up. ``fallbacks_to_eager`` is the number of models that fell back to eager in any cycle:
    a fallback lasts for the process, so summing cycles would count it again every cycle."""
    if not records:
        return {}
    latencies: dict[str, list[float]] = {}
    for r in records:
        for model, sec in (r.get("forecast_latency_s") or {}).items():
            latencies.setdefault(model, []).append(sec)
    quotes = [r.get("quotes", {}) for r in records]
    fell_back = {m for r in records for m in r.get("eager_fallback_models") or ()}
    warm = next((r["warmup"] for r in reversed(records) if r.get("warmup")), None)
    last = records[-1]
    return {
        "mode": last.get("mode"),
        "broker": last.get("broker"),
        "endpoint": last.get("endpoint"),
        "equity_first": records[0].get("equity"),
        "equity_last": last.get("equity"),
        "max_drawdown": max_drawdown([r.get("equity") for r in records]),
        "quotes_real": sum(q.get("real", 0) for q in quotes),
        "quotes_synthetic": sum(q.get("synthetic", 0) for q in quotes),
        "mean_forecast_latency_ms": {m: round(1000 * sum(v) / len(v), 2) for m, v in latencies.items()},
        "warmup": None if warm is None else f"{warm['model']} {warm['seconds']:.2f} s ({warm['shape']})",
        "compile_mode": last.get("compile_mode"),
        "recompiles_since_start": last.get("recompiles_since_start"),
        "fallbacks_to_eager": len(fell_back),
        "eager_fallback_models": sorted(fell_back),
        "peak_memory_mb": max(r.get("peak_memory_mb", 0) for r in records),
    }
