"""What the benchmark scripts share: timing a call and writing the JSON report beside the printed table."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path


def timed(fn, *args) -> tuple[float, object]:
    """Seconds one call of ``fn(*args)`` took, and its result."""
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def write_report(path: str | Path, report: dict, console) -> None:
    """``report`` plus the machine it ran on, as JSON at ``path`` (folders created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpu_count": os.cpu_count(), "python": platform.python_version(),
               "processor": platform.processor() or platform.machine()}
    out.write_text(json.dumps({**report, **machine}, indent=2) + "\n")
    console.print(f"wrote {out}")
