"""Benchmark: a sweep of one forecast job per cell (200 symbols, one cell each, baseline, 8 windows, context 64,
32 samples), the cheapest shape for Ray: ``--local`` against a local Ray with 2 CPUs on new and then warm
workers (start-up not counted). Checks the Ray store holds the rows of ``--local``.

    PYTHONPATH=src python benchmarks/sweep_one_cell_bench.py     (PYTHONPATH reaches the Ray workers too)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import ray
from sweep_bench import comparable, timed, write_data

from marketcast.runs.store import RunStore
from marketcast.sweep.execute import connect, shutdown
from marketcast.sweep.spec import load_spec

SYMBOLS, WINDOWS, CONTEXT = 200, 8, 64


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="sweep-one-cell-"))
    (folder / "bars").mkdir()
    write_data(folder / "bars", SYMBOLS, CONTEXT + WINDOWS + 60)
    path = folder / "spec.toml"
    path.write_text(f'[data]\ndir = "bars"\n\n[options]\nwindows = {WINDOWS}\ncontext = {CONTEXT}\n'
                    'num_samples = 32\n\n[grid]\nfill_mode = ["touch"]\n')
    spec = load_spec(path)
    local_s, _ = timed(spec, RunStore(folder / "local"), local=True)
    connect(ray, None, 2)
    try:
        new_s, _ = timed(spec, RunStore(folder / "new"))
        warm_s, _ = timed(spec, RunStore(folder / "warm"))
    finally:
        shutdown(ray)
    reference = comparable(RunStore(folder / "local")).drop(columns="kind")
    equal = all(comparable(RunStore(folder / way)).drop(columns="kind").equals(reference) for way in ("new", "warm"))
    print(f"{len(spec.cells())} cells, one job each: --local {local_s:.2f} s; local Ray 2 CPUs new workers "
          f"{new_s:.2f} s ({new_s / local_s:.2f}x), warm {warm_s:.2f} s ({warm_s / local_s:.2f}x); "
          f"stores equal: {equal}")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
