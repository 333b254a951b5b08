"""Run store at scale: ``runs show|compare|list``, ``report RUN SYMBOL`` and compaction on synthetic stores.

Each store is written with the store's own writer (``RunStore.write_rows``, parts of 64 cells as a sweep
flushes them) from the rows of one real baseline cell of the embedded SP500 (``marketcast.runs.rows.ok_rows``),
copied with its own cell id, plan index, symbol (one in ten cells a symbol) and seed (the grid's axis): no
Ray, no forecasting. Every command runs as its own ``marketcast`` process (start-up included), timed and with
its peak RSS (``os.wait4``). ``report RUN SYMBOL`` is ``--no-html``: the synthetic symbols have no bars for
a page, so it measures reading the symbol's records and writing their JSON, Markdown and CSV.
The two large runs are compacted with ``runs compact`` (what the end of a sweep does) before they are read;
``runs list`` then reads a store of ``--runs`` runs: the two large ones and small ones recorded as a backtest
records them (one part and its ``summary.json``). The last table is the growth from the first size to the
last against the growth in cells (linear: at most the cells' ratio). ``--small`` is a tiny run for CI (not
for timing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report  # noqa: E402

CELLS_PER_PART = 64
MARKETCAST = str(Path(sys.executable).with_name("marketcast"))


def _template() -> list[dict]:
    """The rows of one real baseline cell (SP500, 15 windows)."""
    from marketcast.backtest import BacktestConfig, run_many
    from marketcast.data import load_symbol
    from marketcast.forecast.baseline import BaselineForecaster
    from marketcast.runs.cells import Cell
    from marketcast.runs.rows import RunContext, fingerprint, ok_rows

    config = BacktestConfig(windows=15, context=64, num_samples=32)
    bars = load_symbol("SP500")
    result = run_many([bars], BaselineForecaster(), config)[0]
    return ok_rows(RunContext("x", "sweep", "bench", "bench"), Cell(symbol="SP500", config=config), 0, result,
                   fingerprint(bars), 0.1)


def build_run(store, run_id: str, cells: int, template: list[dict], per_part: int = CELLS_PER_PART) -> None:
    """A sweep run of ``cells`` cells (axis: seed 0..9; a symbol per ten cells) in parts of ``per_part``."""
    store.write_info(run_id, {"kind": "sweep", "created_at": f"2030-01-01T00:00:00.{len(run_id):06d}",
                              "cells_total": cells, "status": "done", "spec_hash": "bench", "code_version": "bench"})
    for start in range(0, cells, per_part):
        rows = []
        for i in range(start, min(cells, start + per_part)):
            shared = {"run_id": run_id, "cell_id": f"{run_id}-{i:07d}", "cell_index": i, "symbol": f"S{i // 10:05d}",
                      "seed": i % 10}
            rows += [{**row, **shared} for row in template]
        store.write_rows(run_id, rows)


def command(args: list[str]) -> tuple[float, float, int]:
    """``(seconds, peak RSS in MB, exit code)`` of one ``marketcast`` process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([MARKETCAST, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # compare exits 1 on a FAIL verdict
        raise SystemExit(f"marketcast {' '.join(args)} failed ({code}): {proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return seconds, usage.ru_maxrss / 1024, code


def files(folder: Path) -> int:
    return len(list(folder.glob("*.parquet")))


def add_small_runs(store, runs: int, template: list[dict]) -> None:
    """``runs`` runs of 10 cells as ``marketcast backtest`` records them: one part and its summary."""
    for r in range(runs):
        run_id = f"r{r:05d}"
        store.write_info(run_id, {"kind": "backtest", "created_at": f"2029-01-01T00:00:00.{r:06d}", "cells_total": 10,
                                  "spec_hash": "bench", "code_version": "bench"})
        rows = [{**row, "run_id": run_id, "cell_id": f"{run_id}-{i}", "cell_index": i, "symbol": f"S{i:05d}"}
                for i in range(10) for row in template]
        store.write_rows(run_id, rows)
        store.write_summary(run_id, rows)


def bench_size(root: Path, cells: int, template: list[dict], console: Console, runs: int) -> dict:
    from marketcast.runs.store import RunStore

    store = RunStore(root)
    t0 = time.perf_counter()
    build_run(store, "run-a", cells, template)
    build_run(store, "run-b", cells, template)
    built = time.perf_counter() - t0
    console.print(f"{cells} cells: built two runs in {built:.1f} s")
    out = {"cells": cells, "build_s": built, "parts_before": files(store.run_dir("run-a"))}
    store_opt = ["--store", str(root)]
    out["show_parts_s"], out["show_parts_rss_mb"], _ = command(["runs", "show", "run-a", *store_opt])
    out["compact_s"], out["compact_rss_mb"], _ = command(["runs", "compact", "run-a", *store_opt])
    command(["runs", "compact", "run-b", *store_opt])
    out["files_after"] = files(store.run_dir("run-a"))
    out["show_s"], out["show_rss_mb"], _ = command(["runs", "show", "run-a", *store_opt])
    out["compare_s"], out["compare_rss_mb"], _ = command(["runs", "compare", "run-a", "run-b", *store_opt])
    out["compare_json_s"], out["compare_json_rss_mb"], _ = command(["runs", "compare", "run-a", "run-b", "--json",
                                                                    *store_opt])
    report_dir = root / "report"
    out["report_s"], out["report_rss_mb"], _ = command(["report", "run-a", "S00003", "--no-html", "--output-dir",
                                                        str(report_dir), *store_opt])
    shutil.rmtree(report_dir, ignore_errors=True)
    add_small_runs(store, max(0, runs - 2), template)
    out["runs"] = runs
    out["list_s"], out["list_rss_mb"], _ = command(["runs", "list", *store_opt])
    out["list_json_s"], _, _ = command(["runs", "list", "--json", *store_opt])
    return out


def growth(results: list[dict]) -> dict:
    """Last size / first size, for the cells and for each time and memory figure read back from the store."""
    first, last = results[0], results[-1]
    keys = ["show_s", "show_rss_mb", "compare_s", "compare_rss_mb", "compare_json_s", "report_s", "report_rss_mb",
            "list_s", "compact_s", "compact_rss_mb"]
    return {"cells": last["cells"] / first["cells"], **{k: last[k] / first[k] for k in keys}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated cells per run")
    ap.add_argument("--runs", type=int, default=1000, help="runs in the store 'runs list' reads")
    ap.add_argument("--small", action="store_true", help="a tiny run for CI: 200 cells, 20 runs")
    ap.add_argument("--workdir", default=None, help="where the stores are built (default: a temporary folder)")
    ap.add_argument("--out", default="benchmarks/results/store_bench.json")
    args = ap.parse_args(argv)
    sizes = [200] if args.small else [int(s) for s in args.sizes.split(",")]
    runs = 20 if args.small else args.runs
    console = Console(width=200)
    template = _template()
    work = Path(tempfile.mkdtemp(prefix="store_bench-", dir=args.workdir))
    try:
        results = []
        for cells in sizes:
            results.append(bench_size(work / f"s{cells}", cells, template, console, runs))
            shutil.rmtree(work / f"s{cells}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"run store ({len(template)} rows a cell; every command a marketcast process)")
    for col in ("cells", "build s", "parts", "show (parts) s", "compact s", "compact MB", "files after", "show s",
                "show MB", "compare s", "compare MB", "compare --json s", "report SYMBOL s", "report MB",
                f"list s ({runs} runs)", "list --json s"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(f"{r['cells']:,}", f"{r['build_s']:.1f}", str(r["parts_before"]), f"{r['show_parts_s']:.2f}",
                      f"{r['compact_s']:.2f}", f"{r['compact_rss_mb']:.0f}", str(r["files_after"]),
                      f"{r['show_s']:.2f}", f"{r['show_rss_mb']:.0f}", f"{r['compare_s']:.2f}",
                      f"{r['compare_rss_mb']:.0f}", f"{r['compare_json_s']:.2f}", f"{r['report_s']:.2f}",
                      f"{r['report_rss_mb']:.0f}", f"{r['list_s']:.2f}", f"{r['list_json_s']:.2f}")
    console.print(table)
    grown = growth(results) if len(results) > 1 else None
    if grown:
        ratios = Table(title=f"growth from {results[0]['cells']:,} to {results[-1]['cells']:,} cells (linear or "
                             f"better: at most {grown['cells']:.0f}x)")
        for key in grown:
            ratios.add_column(key, justify="right")
        ratios.add_row(*(f"{v:.2f}x" for v in grown.values()))
        console.print(ratios)
    write_report(args.out, {"benchmark": "store_bench", "rows_per_cell": len(template), "sizes": results,
                            "growth": grown, "targets": {"show_s": 3.0, "show_mb": 1024, "compare_s": 5.0,
                                                         "list_s": 1.0, "report_s": 3.0, "files_after": 5}},
                 console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
