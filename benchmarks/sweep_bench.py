"""Benchmark: where Ray pays for a sweep. 40 symbols x 2 fill modes x 3 strategy settings (240 cells) with the
baseline, all in one run, on the same seeded synthetic bars and the same spec:

* one process: ``run_sweep(local=True)`` (``marketcast sweep --local``), no Ray;
* local Ray with each of ``--workers`` CPUs (default 2,4,8,16, those up to 2x this machine's cores): its
  start-up timed apart, then ``run_sweep`` twice, on new worker processes and on the warm ones;
* with ``--address``: ``run_sweep`` on that cluster (already running, e.g. the two-node one of
  docs/scaling.md);
* six ``run_many`` calls (what six ``marketcast backtest`` runs compute: every grid point forecasts again),
  without reports or store;
* with ``--toto``: Toto (base config, random weights, CPU) forecasting one symbol's windows, for seconds per
  window (weights do not change the time).

Every store is checked to hold the rows of the one-process store; a table goes to the terminal and the numbers
to ``--out`` (JSON). Bars are synthetic random walks: their strategy returns say nothing about any market.

    PYTHONPATH=src python benchmarks/sweep_bench.py [--symbols 40 --windows 70 --context 512 --samples 256
                                                      --workers 2,4,8,16 --address HOST:PORT --toto --out FILE]
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
from marketcast.runs.store import RunStore  # noqa: E402
from marketcast.sweep.execute import connect, shutdown  # noqa: E402
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


def timed(spec, store: RunStore, **how) -> tuple[float, object]:
    started = time.perf_counter()
    outcome = run_sweep(spec, store, **how)
    return time.perf_counter() - started, outcome


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


def workers_here(asked: str) -> list[int]:
    """The asked CPU counts a local Ray makes sense with here: up to twice this machine's cores."""
    counts = [int(n) for n in asked.split(",") if n.strip()]
    return [n for n in counts if n <= 2 * (os.cpu_count() or 1)] or counts[:1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--symbols", type=int, default=40)
    ap.add_argument("--windows", type=int, default=70)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--workers", default="2,4,8,16", help="CPU counts of the local Rays to time (comma-separated)")
    ap.add_argument("--address", help="also time the sweep on this running Ray cluster")
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

    rows, stores = [], {}  # (what, seconds, start-up seconds or None)
    local_s, outcome = timed(spec, RunStore(folder / "local"), local=True)
    assert outcome.ok == cells, outcome
    rows.append(("one process, no Ray (sweep --local)", local_s, None))
    reference = comparable(RunStore(folder / "local"))
    results: dict = {"cells": cells, "symbols": args.symbols, "windows_per_symbol": args.windows,
                     "context": args.context, "samples": args.samples, "local_s": local_s, "ray": {}}
    for n in workers_here(args.workers):
        t0 = time.perf_counter()
        connect(ray, None, n)
        start = time.perf_counter() - t0
        try:
            new_s, new = timed(spec, stores.setdefault(f"ray{n}", RunStore(folder / f"ray{n}")))
            warm_s, warm = timed(spec, RunStore(folder / f"ray{n}-warm"))  # the workers the first sweep started
        finally:
            shutdown(ray)
        assert new.ok == warm.ok == cells, (new, warm)
        results["ray"][str(n)] = {"start_s": start, "new_workers_s": new_s, "warm_workers_s": warm_s}
        rows += [(f"local Ray, {n} CPUs, new workers", new_s, start), (f"local Ray, {n} CPUs, warm workers", warm_s,
                                                                        None)]
    if args.address:
        t0 = time.perf_counter()
        connect(ray, args.address, None)
        join = time.perf_counter() - t0
        try:
            nodes = len([n for n in ray.nodes() if n.get("Alive")])
            cpus = int(ray.cluster_resources().get("CPU", 0))
            cluster_s, cluster = timed(spec, stores.setdefault("cluster", RunStore(folder / "cluster")))
        finally:
            shutdown(ray)
        assert cluster.ok == cells, cluster
        results["cluster"] = {"address": args.address, "nodes": nodes, "cpus": cpus, "join_s": join,
                              "seconds": cluster_s}
        rows.append((f"Ray cluster at {args.address}: {nodes} nodes, {cpus} CPUs", cluster_s, join))
    equal = {name: bool(comparable(store).drop(columns="kind").equals(reference.drop(columns="kind")))
             for name, store in stores.items()}

    bars = [load_symbol(s, data_dir=folder / "bars") for s in spec.symbols]
    t0 = time.perf_counter()
    for cell in spec.cells()[:: args.symbols]:  # one cell per grid point: its config
        run_many(bars, BaselineForecaster(), cell.config)
    backtests = time.perf_counter() - t0
    rows.append(("six run_many calls (six backtests, no store)", backtests, None))

    results.update({
        "six_run_many_s": backtests, "stores_equal": equal,
        "table": [{"what": what, "seconds": sec, "cells_per_s": cells / sec, "start_s": st} for what, sec, st in rows],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "processor": platform.processor(),
                    "load_average": os.getloadavg()},
    })
    if args.toto:
        results["toto_cpu"] = toto_per_window(args.windows, args.context, args.samples)

    table = Table(title=f"Sweep benchmark: {args.symbols} symbols x 2 fill modes x 3 settings = {cells} cells, "
                        f"baseline, {args.windows} windows, context {args.context}, {args.samples} samples")
    for col in ("what", "seconds", "cells/s", "x one process", "start-up s"):
        table.add_column(col, justify="left" if col == "what" else "right")
    for what, seconds, start in rows:
        table.add_row(what, f"{seconds:.2f}", f"{cells / seconds:.1f}", f"{local_s / seconds:.2f}",
                      "" if start is None else f"{start:.1f}")
    console = Console()
    console.print(table)
    console.print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; stores equal to the "
                  f"one-process store: {equal}")
    if args.toto:
        toto = results["toto_cpu"]
        console.print(f"Toto base (random weights, CPU, eager): {toto['windows']} windows in {toto['seconds']:.2f} s "
                      f"= {1000 * toto['per_window']:.1f} ms a window")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
