"""benchmarks/store_bench.py runs end to end at a tiny size and writes its JSON (not a timing test)."""

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "store_bench.py"


def test_store_bench_small_runs_and_writes_its_json(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(BENCH), "--small", "--out", str(out), "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    size = report["sizes"][0]
    assert size["cells"] == 200 and size["parts_before"] == 4 and size["files_after"] == 1
    assert size["runs"] == 20 and "show_s" in size and "report_s" in size and "list_s" in size
