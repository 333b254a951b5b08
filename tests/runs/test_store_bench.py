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
    # run A: 4 parts of 64 cells (the last with the retried cell), folded every 2 parts; 1 file once compacted
    assert size["cells"] == 200 and size["files_uncompacted"] == 2 and size["files_after"] == 1
    assert size["runs"] == 20 and report["rows_per_cell"] == 9 and report["fold_parts"] == 2
    assert {"show_s", "uncompacted_show_s", "report_s", "list_s", "compare_s"} <= set(size)
