"""``benchmarks/sweep_bench.py`` runs end to end at a tiny size: exit 0 (every store equal to the one-process
store) and its JSON written. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_benchmark_runs_at_a_tiny_size(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_bench.py"), "--symbols", "2",
                           "--windows", "4", "--context", "32", "--samples", "8", "--workers", "2",
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["cells"] == 12 and results["stores_equal"] == {"ray2": True}
    assert [row["what"] for row in results["table"]] == [
        "one process, no Ray (sweep --local)", "local Ray, 2 CPUs, new workers", "local Ray, 2 CPUs, warm workers",
        "six run_many calls (six backtests, no store)"]
    assert "cells/s" in done.stdout
