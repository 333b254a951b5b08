"""Run store at scale: ``runs show|compare|list``, ``report RUN SYMBOL`` and compaction on synthetic stores.

Each store is written with the store's own writer (``RunStore.write_rows``, parts of 64 cells as a sweep
flushes them) from the rows of one real baseline cell of the embedded SP500 (``marketcast.runs.rows.ok_rows``),
copied with its own cell id, plan index, symbol (one in ten cells a symbol) and seed (the grid's axis): no
Ray, no forecasting. Every command runs as its own ``marketcast`` process (start-up included), timed and with
its peak RSS (``os.wait4``). ``report RUN SYMBOL`` is ``--no-html``: the synthetic symbols have no bars to
draw fans from, so it measures reading the symbol's records and writing their JSON, Markdown and CSV.
``--small`` is a tiny run for CI (not for timing).
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


def bench_size(root: Path, cells: int, template: list[dict], console: Console) -> dict:
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
    report_dir = root / "report"
    out["report_s"], out["report_rss_mb"], _ = command(["report", "run-a", "S00003", "--no-html", "--output-dir",
                                                        str(report_dir), *store_opt])
    shutil.rmtree(report_dir, ignore_errors=True)
    return out


def bench_list(root: Path, runs: int, template: list[dict]) -> dict:
    from marketcast.runs.store import RunStore

    store = RunStore(root)
    for r in range(runs):
        build_run(store, f"r{r:05d}", 10, template)
    seconds, rss, _ = command(["runs", "list", "--store", str(root)])
    return {"runs": runs, "list_s": seconds, "list_rss_mb": rss}


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
            results.append(bench_size(work / f"s{cells}", cells, template, console))
            shutil.rmtree(work / f"s{cells}")
        listing = bench_list(work / "list", runs, template)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"run store ({len(template)} rows a cell; every command a marketcast process)")
    for col in ("cells", "build s", "parts", "show (parts) s", "compact s", "files after", "show s", "show MB",
                "compare s", "compare MB", "report SYMBOL s", "report MB"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(f"{r['cells']:,}", f"{r['build_s']:.1f}", str(r["parts_before"]), f"{r['show_parts_s']:.2f}",
                      f"{r['compact_s']:.2f}", str(r["files_after"]), f"{r['show_s']:.2f}", f"{r['show_rss_mb']:.0f}",
                      f"{r['compare_s']:.2f}", f"{r['compare_rss_mb']:.0f}", f"{r['report_s']:.2f}",
                      f"{r['report_rss_mb']:.0f}")
    console.print(table)
    console.print(f"runs list with {listing['runs']} runs: {listing['list_s']:.2f} s, {listing['list_rss_mb']:.0f} MB")
    write_report(args.out, {"benchmark": "store_bench", "rows_per_cell": len(template), "sizes": results,
                            "list": listing, "targets": {"show_s": 3.0, "show_mb": 1024, "compare_s": 5.0,
                                                         "list_s": 1.0, "report_s": 3.0, "files_after": 5}},
                 console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
