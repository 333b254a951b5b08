"""Benchmark: a sweep of 40 symbols x 2 fill modes x 3 strategy settings (240 cells) with the baseline, on a
local Ray versus one process doing the same cells, and the per-window throughput a cluster estimate needs.

All in one run, on the same seeded synthetic bars and the same spec:

* one process: the sweep's own steps (load, forecast once per symbol, settle each cell, build its rows,
  write the store) called in a loop, no Ray;
* local Ray: ``run_sweep`` on a Ray started with ``--num-cpus`` (its start-up timed apart), twice: on new
  worker processes, then on the warm ones the first run left;
* six ``run_many`` calls (what six ``marketcast backtest`` runs compute: every grid point forecasts again),
  without reports or store;
* with ``--toto``: Toto (base config, random weights, CPU) forecasting one symbol's windows, for seconds per
  window (weights do not change the time).

Both sweeps' stores are checked to hold equal rows. Bars are synthetic random walks: their strategy returns
say nothing about any market.

    PYTHONPATH=src python benchmarks/sweep_bench.py [--symbols 40 --windows 70 --context 512 --samples 256
                                                      --num-cpus 2 --toto --out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.engine import run_many  # noqa: E402
from marketcast.data import load_symbol  # noqa: E402
from marketcast.forecast.baseline import BaselineForecaster  # noqa: E402
from marketcast.runs.rows import RunContext  # noqa: E402
from marketcast.runs.store import RunStore  # noqa: E402
from marketcast.sweep import tasks  # noqa: E402
from marketcast.sweep.execute import connect  # noqa: E402
from marketcast.sweep.plan import plan_jobs  # noqa: E402
from marketcast.sweep.runner import run_sweep  # noqa: E402
from marketcast.sweep.spec import load_spec  # noqa: E402

SETTINGS = """
[[settings]]
name = "median"

[[settings]]
name = "mean-wide"
point = "mean"
ci_band = [0.3, 0.7]

[[settings]]
name = "p40-wider-guard"
point = "p40"
ci_multiplier = 1.5
"""


def write_data(folder: Path, symbols: int, rows: int) -> list[str]:
    names = [f"SYM{i:03d}" for i in range(symbols)]
    for i, name in enumerate(names):
        rng = np.random.default_rng(i)
        close = 100 * np.exp(np.cumsum(rng.normal(0.0002, 0.011, rows)))
        open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0, 0.003, rows))
        high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, 0.005, rows)))
        low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, 0.005, rows)))
        index = pd.bdate_range("2010-01-04", periods=rows, tz="UTC", name="timestamp")
        pd.DataFrame({"open": open_, "high": high, "low": low, "close": close}, index=index).to_csv(
            folder / f"{name}.csv")
    return names


def one_process(spec, store: RunStore) -> dict:
    """The sweep's steps in a loop: what each Ray task and actor does, in this process."""
    cells = spec.cells()
    ctx = RunContext(run_id="one-process", kind="sweep", spec_hash=spec.spec_hash, code_version="bench")
    store.write_info(ctx.run_id, {"kind": "sweep", "created_at": "0", "cells_total": len(cells)})
    jobs = plan_jobs(list(enumerate(cells)), spec.symbol_paths())
    servers, split, rows, pending = {}, {"load": 0.0, "forecast": 0.0, "settle": 0.0}, [], 0
    started = time.perf_counter()
    for job in jobs:
        server = servers.setdefault(job.model_key, tasks.ForecastServer(job.first.model_options()))
        t0 = time.perf_counter()
        loaded = tasks.load(job.symbol, job.path, job.first)
        t1 = time.perf_counter()
        forecasted = server.forecast(loaded, job.config)
        t2 = time.perf_counter()
        for cell_rows in tasks.settle(ctx, loaded, forecasted, job.cells, len(job.cells)):
            rows += cell_rows
            pending += 1
        t3 = time.perf_counter()
        if pending >= 64:
            store.write_rows(ctx.run_id, rows)
            rows, pending = [], 0
        split["load"] += t1 - t0
        split["forecast"] += t2 - t1
        split["settle"] += t3 - t2
    store.write_rows(ctx.run_id, rows)
    return {"seconds": time.perf_counter() - started, **split, "jobs": len(jobs), "cells": len(cells)}


def comparable(store: RunStore) -> pd.DataFrame:
    rows = store.query("SELECT * EXCLUDE (run_id, spec_hash, code_version, finished_at, seconds, record) "
                       "FROM rows")
    rows["strategy"] = rows["strategy"].fillna("")
    return rows.sort_values(["cell_index", "strategy"]).reset_index(drop=True)


def toto_per_window(windows: int, context: int, samples: int) -> dict:
    """The forecaster call ``forecast_windows`` makes for one symbol (random weights give meaningless prices,
    so the call is timed directly rather than through the backtest's price check)."""
    from marketcast.backtest.config import BacktestConfig
    from marketcast.backtest.engine import decision_ends
    from marketcast.forecast.base import make_batch
    from marketcast.forecast.toto import TotoConfig, TotoForecaster

    forecaster = TotoForecaster.from_config(TotoConfig.base(), compile="eager")
    frame = load_symbol("SP500").frame
    ends = decision_ends(len(frame), BacktestConfig(windows=windows, context=context))
    forecaster.forecast(make_batch(frame, ends[:2], context, horizon=1), 1, samples)  # warm-up
    started = time.perf_counter()
    forecaster.forecast(make_batch(frame, ends, context, horizon=1), 1, samples)
    seconds = time.perf_counter() - started
    return {"windows": len(ends), "seconds": seconds, "per_window": seconds / len(ends)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--symbols", type=int, default=40)
    ap.add_argument("--windows", type=int, default=70)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--toto", action="store_true", help="also time Toto (base config) per window on the CPU")
    ap.add_argument("--out", default="benchmarks/results/sweep_bench.json")
    args = ap.parse_args(argv)

    import ray

    folder = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    (folder / "bars").mkdir()
    write_data(folder / "bars", args.symbols, args.context + args.windows + 60)
    spec_path = folder / "bench.toml"
    spec_path.write_text(f'[data]\ndir = "bars"\n\n[options]\nwindows = {args.windows}\ncontext = {args.context}\n'
                         f'num_samples = {args.samples}\n\n[grid]\nfill_mode = ["touch", "penetrate"]\n{SETTINGS}')
    spec = load_spec(spec_path)
    cells = len(spec.cells())

    serial = one_process(spec, RunStore(folder / "one"))

    t0 = time.perf_counter()
    connect(ray, None, args.num_cpus)
    ray_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    outcome = run_sweep(spec, RunStore(folder / "ray"))
    ray_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()  # again, on the worker processes the first sweep started (a new model actor)
    warm = run_sweep(spec, RunStore(folder / "ray-warm"))
    ray_warm = time.perf_counter() - t0
    ray.shutdown()
    assert outcome.ok == warm.ok == cells, (outcome, warm)
    equal = comparable(RunStore(folder / "one")).drop(columns="kind").equals(
        comparable(RunStore(folder / "ray")).drop(columns="kind"))
    busy = {name: float(RunStore(folder / name).query("SELECT sum(seconds) AS s FROM cells")["s"][0])
            for name in ("one", "ray", "ray-warm")}  # seconds the cells themselves took, where they ran

    bars = [load_symbol(s, data_dir=folder / "bars") for s in spec.symbols]
    t0 = time.perf_counter()
    for cell in spec.cells()[:: args.symbols]:  # one cell per grid point: its config
        run_many(bars, BaselineForecaster(), cell.config)
    backtests = time.perf_counter() - t0

    windows = args.symbols * (args.windows + 1)
    results = {
        "cells": cells, "symbols": args.symbols, "windows_per_symbol": args.windows, "context": args.context,
        "samples": args.samples, "num_cpus": args.num_cpus, "one_process": serial, "ray_start_s": ray_start,
        "ray_sweep_s": ray_seconds, "ray_sweep_warm_s": ray_warm, "six_run_many_s": backtests,
        "stores_equal": bool(equal), "cell_seconds": busy,
        "speedup_ray_vs_one_process": serial["seconds"] / ray_seconds,
        "speedup_ray_warm_vs_one_process": serial["seconds"] / ray_warm,
        "speedup_ray_with_start_vs_one_process": serial["seconds"] / (ray_seconds + ray_start),
        "forecast_windows_per_s": windows / serial["forecast"],
        "settle_cell_ms": 1000 * serial["settle"] / cells,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "processor": platform.processor(),
                    "load_average": os.getloadavg()},
    }
    if args.toto:
        results["toto_cpu"] = toto_per_window(args.windows, args.context, args.samples)

    table = Table(title=f"Sweep benchmark: {args.symbols} symbols x 2 fill modes x 3 settings = {cells} cells, "
                        f"baseline, {args.windows} windows, context {args.context}, {args.samples} samples")
    for col in ("what", "seconds", "cells/s", "× one process", "cell s"):
        table.add_column(col, justify="left" if col == "what" else "right")
    rows = [("one process (the sweep's steps in a loop)", serial["seconds"], busy["one"]),
            (f"local Ray, {args.num_cpus} CPUs (after start-up, new workers)", ray_seconds, busy["ray"]),
            (f"local Ray, {args.num_cpus} CPUs (same again, warm workers)", ray_warm, busy["ray-warm"]),
            (f"local Ray, {args.num_cpus} CPUs (with its {ray_start:.1f} s start-up)", ray_seconds + ray_start, None),
            ("six run_many calls (six backtests, no store)", backtests, None)]
    for name, seconds, cell_s in rows:
        table.add_row(name, f"{seconds:.2f}", f"{cells / seconds:.1f}", f"{serial['seconds'] / seconds:.2f}",
                      "" if cell_s is None else f"{cell_s:.2f}")
    console = Console()
    console.print(table)
    console.print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; 'cell s': the cells' own "
                  "seconds (settle + rows + a share of the forecast) summed, where they ran")
    console.print(f"one process: load {serial['load']:.2f} s, forecast {serial['forecast']:.2f} s "
                  f"({results['forecast_windows_per_s']:.0f} windows/s), settle + rows {serial['settle']:.2f} s "
                  f"({results['settle_cell_ms']:.1f} ms a cell); stores equal: {equal}")
    if args.toto:
        toto = results["toto_cpu"]
        console.print(f"Toto base (random weights, CPU, eager): {toto['windows']} windows in {toto['seconds']:.2f} s "
                      f"= {1000 * toto['per_window']:.1f} ms a window")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
