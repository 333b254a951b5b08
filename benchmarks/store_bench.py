"""Run store at scale, on realistic records: ``runs show|compare|list``, ``report RUN SYMBOL`` and compaction.

The records come from real cells: four real baseline backtests at 70 windows (SP500 and NASDAQ, seeds 0 and
1), each cell a copy of one of them with its numbers perturbed per cell (the trailing digits of every float
in the record, and the metric columns scaled), so no two cells share a record and the files compress as a
real sweep's do (the kB a cell on disk are printed). The layout is a sweep's: the symbol varies fastest (one
symbol per ten cells, the seed the other axis), and one cell is retried (its second attempt in the last
part). Everything is written through the store's own writer: run A as a sweep writes it (parts of 64 cells,
folded every ``FOLD_PARTS`` parts while its lock is held, :func:`marketcast.runs.compact.fold`), then left
``interrupted`` and read before its final compaction; run B in bulk (parts of 2,048 cells), differing from
A in 1 % of its cells, and compacted. Every command runs as its own ``marketcast`` process (start-up
included), timed and with its peak RSS (GNU ``time``); ``report RUN SYMBOL`` is ``--no-html`` (the
synthetic symbols have no bars for a page). ``runs list`` reads a store of ``--runs`` runs (small ones as a
backtest records them). Each size's row is printed as soon as it is measured and the result file written
after each size. ``--small`` is a tiny run for CI (not for timing).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report  # noqa: E402

SWEEP_PART = 64  # cells a part as a sweep flushes them (flush_cells)
BULK_PART = 2048  # cells a part where the benchmark writes in bulk
DIGITS = 2  # trailing digits of each float in a record drawn afresh per cell
MARKETCAST = str(Path(sys.executable).with_name("marketcast"))
TIME = "/usr/bin/time"  # GNU time: the peak RSS of the command alone
TARGETS = {"show_s": 3.0, "show_mb": 1024, "compare_s": 5.0, "list_s": 1.0, "report_s": 3.0, "files_after": 5,
           "uncompacted_x": 3.0}


class Template:
    """The rows of one real cell, and where its numbers are perturbed."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        text = rows[0]["record"]
        self.record = np.frombuffer(text.encode(), dtype=np.uint8).copy()
        ends = [m.end() for m in re.finditer(r"\.\d{4,}", text)]
        self.digits = np.array([e - k for e in ends for k in range(1, DIGITS + 1)], dtype=np.int64)
        from marketcast.runs.cells import setting_names

        settings = set(setting_names())  # results vary per cell, settings only along the grid's axes
        self.floats = [[k for k, v in row.items() if type(v) is float and k not in settings] for row in rows]

    def cell(self, rng: np.random.Generator) -> list[dict]:
        record = self.record.copy()
        record[self.digits] = rng.integers(48, 58, len(self.digits), dtype=np.uint8)
        scale = 1.0 + 0.01 * float(rng.standard_normal())
        out = [{**row, **{k: row[k] * scale for k in keys}} for row, keys in zip(self.rows, self.floats)]
        out[0]["record"] = record.tobytes().decode()
        return out


def templates(windows: int) -> list[Template]:
    """Four real baseline cells: SP500 and NASDAQ, seeds 0 and 1."""
    from marketcast.backtest import BacktestConfig, run_many
    from marketcast.data import load_symbol
    from marketcast.forecast.baseline import BaselineForecaster
    from marketcast.runs.cells import Cell
    from marketcast.runs.rows import RunContext, fingerprint, ok_rows

    out = []
    for symbol in ("SP500", "NASDAQ"):
        bars = load_symbol(symbol)
        for seed in (0, 1):
            config = BacktestConfig(windows=windows, context=64, num_samples=32, seed=seed)
            result = run_many([bars], BaselineForecaster(), config)[0]
            out.append(Template(ok_rows(RunContext("x", "sweep", "bench", "bench"), Cell(symbol=symbol, config=config),
                                        0, result, fingerprint(bars), 0.1)))
    return out


def cell_rows(run_id: str, i: int, cells: int, shapes: list[Template], salt: int, attempt: int = 0) -> list[dict]:
    """Cell ``i`` of a run of ``cells``: symbol fastest (``cells // 10`` symbols), seed the other axis."""
    symbols = max(1, cells // 10)
    rows = shapes[i % len(shapes)].cell(np.random.default_rng((salt, i, attempt)))
    shared = {"run_id": run_id, "cell_id": f"{run_id}-{i:07d}", "cell_index": i, "symbol": f"S{i % symbols:05d}",
              "seed": i // symbols}
    if attempt:
        shared["attempt"] = attempt
    return [{**row, **shared} for row in rows]


def differs(i: int) -> bool:
    """The 1 % of cells where run B differs from run A."""
    return i % 100 == 37


def build_run(store, run_id: str, cells: int, shapes: list[Template], *, sweep: bool, fold_parts: int) -> None:
    """A run of ``cells`` cells; ``sweep``: as a sweep writes it (parts of 64, folded, one retried cell, left
    interrupted), else in bulk parts with 1 % of the cells perturbed differently (run B)."""
    store.write_info(run_id, {"kind": "sweep", "created_at": f"2030-01-01T00:00:00.{len(run_id):06d}",
                              "cells_total": cells, "status": "interrupted" if sweep else "done",
                              "spec_hash": "bench", "code_version": "bench"})
    per_part = SWEEP_PART if sweep else BULK_PART
    with store.lock(run_id):
        for written, start in enumerate(range(0, cells, per_part), start=1):
            rows = []
            for i in range(start, min(cells, start + per_part)):
                rows += cell_rows(run_id, i, cells, shapes, salt=1 if not sweep and differs(i) else 0)
            if sweep and start + per_part >= cells:
                rows += cell_rows(run_id, 7, cells, shapes, salt=0, attempt=1)  # the retried cell
            store.write_rows(run_id, rows)
            if sweep and written % fold_parts == 0:
                store.fold(run_id)


def command(args: list[str], fail_ok: bool = False) -> tuple[float, float]:
    """``(seconds, peak RSS in MB)`` of one ``marketcast`` process, its memory read by ``/usr/bin/time``: a
    child forked from this process (which holds the records it built) reports this process's RSS as its own
    peak in ``wait4``. ``fail_ok``: exit 1 is an answer (compare's FAIL verdict)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t0 = time.perf_counter()
        done = subprocess.run([TIME, "-f", "%M", "-o", rss.name, MARKETCAST, *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
        seconds = time.perf_counter() - t0
        if done.returncode not in ((0, 1) if fail_ok else (0,)):
            raise SystemExit(f"marketcast {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
        kb = [line for line in rss.read().splitlines() if line.strip().isdigit()]
    return seconds, int(kb[-1]) / 1024


def files(folder: Path) -> int:
    return len(list(folder.glob("*.parquet")))


def add_small_runs(store, runs: int, shape: Template) -> None:
    """``runs`` runs of 10 cells as ``marketcast backtest`` records them: one part and its summary."""
    for r in range(runs):
        run_id = f"r{r:05d}"
        store.write_info(run_id, {"kind": "backtest", "created_at": f"2029-01-01T00:00:00.{r:06d}", "cells_total": 10,
                                  "spec_hash": "bench", "code_version": "bench"})
        rows = [{**row, "run_id": run_id, "cell_id": f"{run_id}-{i}", "cell_index": i, "symbol": f"S{i:05d}"}
                for i in range(10) for row in shape.rows]
        store.write_rows(run_id, rows)
        store.write_summary(run_id, rows)


def views(store_opt: list[str], root: Path, symbol: str, prefix: str) -> dict:
    """``runs show A``, ``runs compare A B``, ``report A SYMBOL`` as processes."""
    out = {}
    out[f"{prefix}show_s"], out[f"{prefix}show_mb"] = command(["runs", "show", "run-a", *store_opt])
    out[f"{prefix}compare_s"], out[f"{prefix}compare_mb"] = command(["runs", "compare", "run-a", "run-b", *store_opt],
                                                                     fail_ok=True)
    report_dir = root / "report"
    out[f"{prefix}report_s"], out[f"{prefix}report_mb"] = command(
        ["report", "run-a", symbol, "--no-html", "--output-dir", str(report_dir), *store_opt])
    shutil.rmtree(report_dir, ignore_errors=True)
    return out


def bench_size(root: Path, cells: int, shapes: list[Template], runs: int, fold_parts: int) -> dict:
    from marketcast.runs.store import RunStore

    store = RunStore(root)
    t0 = time.perf_counter()
    build_run(store, "run-b", cells, shapes, sweep=False, fold_parts=fold_parts)
    out = {"cells": cells}
    out["compact_s"], out["compact_mb"] = command(["runs", "compact", "run-b", "--store", str(root)])
    build_run(store, "run-a", cells, shapes, sweep=True, fold_parts=fold_parts)
    out["build_s"] = time.perf_counter() - t0
    folder = store.run_dir("run-a")
    out["files_uncompacted"] = files(folder)
    out["kb_per_cell"] = sum(p.stat().st_size for p in folder.glob("*.parquet")) / cells / 1024
    print(f"{cells:,} cells: built in {out['build_s']:.0f} s (run A: {out['files_uncompacted']} files while "
          f"interrupted, {out['kb_per_cell']:.1f} kB a cell on disk; run B compacted in {out['compact_s']:.1f} s)",
          flush=True)
    store_opt = ["--store", str(root)]
    out.update(views(store_opt, root, "S00003", "uncompacted_"))
    out["compact_a_s"], out["compact_a_mb"] = command(["runs", "compact", "run-a", *store_opt])
    out["files_after"] = files(folder)
    out.update(views(store_opt, root, "S00003", ""))
    add_small_runs(store, max(0, runs - 2), shapes[0])
    out["runs"] = runs
    out["list_s"], out["list_mb"] = command(["runs", "list", *store_opt])
    return out


COLUMNS = [("cells", "{:,}"), ("build_s", "{:.0f}"), ("kb_per_cell", "{:.1f}"), ("files_uncompacted", "{}"),
           ("files_after", "{}"), ("compact_s", "{:.1f}"), ("compact_mb", "{:.0f}"), ("show_s", "{:.2f}"),
           ("show_mb", "{:.0f}"), ("compare_s", "{:.2f}"), ("compare_mb", "{:.0f}"), ("report_s", "{:.2f}"),
           ("report_mb", "{:.0f}"), ("list_s", "{:.2f}"), ("list_mb", "{:.0f}"), ("uncompacted_show_s", "{:.2f}"),
           ("uncompacted_show_mb", "{:.0f}"), ("uncompacted_compare_s", "{:.2f}"), ("uncompacted_report_s", "{:.2f}")]


def row_text(r: dict) -> str:
    return " | ".join(fmt.format(r[k]) for k, fmt in COLUMNS)


def growth(results: list[dict]) -> dict:
    """Last size / first size, for the cells and each time and memory figure."""
    first, last = results[0], results[-1]
    keys = [k for k, _ in COLUMNS if k.endswith(("_s", "_mb")) and k != "build_s"]
    return {"cells": last["cells"] / first["cells"], **{k: last[k] / first[k] for k in keys}}


def main(argv: list[str] | None = None) -> int:
    from marketcast.runs.compact import FOLD_PARTS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated cells per run")
    ap.add_argument("--runs", type=int, default=1000, help="runs in the store 'runs list' reads")
    ap.add_argument("--small", action="store_true", help="a tiny run for CI: 200 cells, 20 runs, 8 windows")
    ap.add_argument("--workdir", default=None, help="where the stores are built (default: a temporary folder)")
    ap.add_argument("--out", default="benchmarks/results/store_bench.json")
    args = ap.parse_args(argv)
    sizes = [200] if args.small else [int(s) for s in args.sizes.split(",")]
    runs = 20 if args.small else args.runs
    fold_parts = 2 if args.small else FOLD_PARTS
    shapes = templates(8 if args.small else 70)
    print(f"records of {len(shapes[0].rows)} rows a cell, {len(shapes[0].rows[0]['record']):,} characters of "
          f"record; folded every {fold_parts} parts", flush=True)
    print(" | ".join(k for k, _ in COLUMNS), flush=True)
    work = Path(tempfile.mkdtemp(prefix="store_bench-", dir=args.workdir))
    results: list[dict] = []
    try:
        for cells in sizes:
            results.append(bench_size(work / f"s{cells}", cells, shapes, runs, fold_parts))
            shutil.rmtree(work / f"s{cells}")
            print(row_text(results[-1]), flush=True)
            grown = growth(results) if len(results) > 1 else None
            write_report(args.out, {"benchmark": "store_bench", "rows_per_cell": len(shapes[0].rows),
                                    "record_chars": len(shapes[0].rows[0]["record"]), "fold_parts": fold_parts,
                                    "sizes": results, "growth": grown, "targets": TARGETS}, Console())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if len(results) > 1:
        print("growth " + ", ".join(f"{k} {v:.2f}x" for k, v in growth(results).items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
