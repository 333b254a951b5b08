"""One JSON line per cycle, and the summary ``marketcast trade status`` prints.

Records are append-only and keyed by ``decision_ts``: a cycle re-run after a crash appends a second
record for the same bar, and the summary keeps the last one. A line that cannot be written whole (a full
disk) is cut back off and ends the run with :class:`~marketcast.errors.StateError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path

from marketcast.errors import StateError

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
    """Appends cycle records to ``state_dir/records.jsonl``."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / RECORDS
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._recompiles_at_start = recompiles()

    def record(self, **fields) -> dict:
        rec = {"written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "recompiles_since_start": recompiles() - self._recompiles_at_start,
               "peak_memory_mb": round(peak_memory_mb(), 1), **fields}
        append_line(self.path, json.dumps(rec, sort_keys=True, default=str) + "\n")
        return rec


def append_line(path: Path, line: str) -> None:
    """Append ``line`` whole or not at all (on a failed write the file is cut back to its old size)."""
    data = line.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateError(f"{path}: {exc.strerror}; check the folder's permissions and free space") from None
    size = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise StateError(f"{path}: {exc.strerror}; free disk space and run again (the record was not "
                         f"written)") from None
    finally:
        os.close(fd)


def read_records(state_dir: str | Path) -> list[dict]:
    """All records, last one per decision bar, in bar order (a torn last line from a kill is skipped)."""
    path = Path(state_dir) / RECORDS
    if not path.exists():
        return []
    by_bar: dict[str, dict] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        by_bar[str(rec.get("decision_ts"))] = rec
    return [by_bar[k] for k in sorted(by_bar)]


def summarise(records: list[dict]) -> dict:
    """Totals and latest values over all cycles. ``fallbacks_to_eager`` is the number of models that fell
    back to eager in any cycle: a fallback lasts for the process, so summing cycles would count it again
    every cycle."""
    if not records:
        return {"cycles": 0}
    latencies: dict[str, list[float]] = {}
    for r in records:
        for model, sec in (r.get("forecast_latency_s") or {}).items():
            latencies.setdefault(model, []).append(sec)
    quotes = [r.get("quotes", {}) for r in records]
    fell_back = {m for r in records for m in r.get("eager_fallback_models") or ()}
    last = records[-1]
    return {
        "cycles": len(records),
        "first_bar": records[0].get("decision_ts"),
        "last_bar": last.get("decision_ts"),
        "mode": last.get("mode"),
        "broker": last.get("broker"),
        "endpoint": last.get("endpoint"),
        "equity_first": records[0].get("equity"),
        "equity_last": last.get("equity"),
        "orders_submitted": sum(r.get("orders_submitted", 0) for r in records),
        "orders_filled": sum(r.get("orders_filled", 0) for r in records),
        "orders_cancelled": sum(r.get("orders_cancelled", 0) for r in records),
        "orders_rejected": sum(r.get("orders_rejected", 0) for r in records),
        "orders_refused": sum(r.get("orders_refused", 0) for r in records),
        "quotes_real": sum(q.get("real", 0) for q in quotes),
        "quotes_synthetic": sum(q.get("synthetic", 0) for q in quotes),
        "mean_forecast_latency_ms": {m: round(1000 * sum(v) / len(v), 2) for m, v in latencies.items()},
        "compile_mode": last.get("compile_mode"),
        "recompiles_since_start": last.get("recompiles_since_start"),
        "fallbacks_to_eager": len(fell_back),
        "eager_fallback_models": sorted(fell_back),
        "peak_memory_mb": max(r.get("peak_memory_mb", 0) for r in records),
    }
