"""Benchmark: a 5,000-window x 8-strategy walk-forward backtest with the baseline forecaster.

Times, in one run on the same bars and settings, every phase of the backtest: building the windows
(``make_batch``), the forecaster's one batched call, deciding and settling all eight strategies, their
metrics, the walk-forward pick and forecast skill (``simulate``), and rendering the reports (JSON, Markdown,
trades.csv; no plots), and prints the time spent outside forecasting (target: under 1 s). Then (b) one
forecaster call per window, for the batched speed-up as a ratio (``--skip-one-by-one`` skips it). Then (c)
what calibration and sizing add: ``simulate`` again with ``--calibrate conformal`` / ``quantile`` (every
field recalibrated walk-forward, :func:`marketcast.backtest.engine.calibrated_forecast`) and with ``--sizing
kelly`` / ``cvar``, in CPU seconds of this process (stable on a busy machine), each the best of ``--repeats``
runs interleaved with as many plain runs, as a share of the backtest's compute (windows + one batched forecast
+ simulate + pick) and of the whole backtest with its reports (target: calibration adds <= 10 %). Bars: a
seeded synthetic daily random walk with
``windows + context + 1`` rows, so every window has its full context. Strategy returns on these bars are
recorded only as a fingerprint of the run: synthetic wicks are independent of the close, which flatters
limit-entry strategies, so they say nothing about any market.

    PYTHONPATH=src python benchmarks/backtest_bench.py [--windows 5000 --context 512 --samples 256 --out FILE]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import timed, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import (  # noqa: E402
    calibrated_forecast, decision_ends, forecast_windows, simulate,
)
from marketcast.backtest.orders import Bar  # noqa: E402
from marketcast.backtest.report import render_outputs  # noqa: E402
from marketcast.backtest.strategies import StrategyParams  # noqa: E402
from marketcast.backtest.vectorised import walk  # noqa: E402
from marketcast.data.bars import Bars  # noqa: E402
from marketcast.forecast.base import make_batch  # noqa: E402
from marketcast.forecast.baseline import BaselineForecaster  # noqa: E402


def synthetic_bars(n: int, seed: int = 0) -> Bars:
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0.0002, 0.011, n)))
    open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0, 0.003, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, 0.005, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, 0.005, n)))
    index = pd.date_range("2000-01-03", periods=n, freq="B", tz="UTC", name="timestamp")
    frame = pd.DataFrame({"open": open_, "high": high, "low": low, "close": close}, index=index)
    return Bars("SYNTH", frame, "stock", f"synthetic seed {seed}")



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=5000)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-one-by-one", action="store_true", help="skip the one-call-per-window forecast")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each calibration / sizing variant (best kept)")
    ap.add_argument("--out", default="benchmarks/results/backtest_bench.json")
    args = ap.parse_args(argv)

    config = BacktestConfig(windows=args.windows, context=args.context, num_samples=args.samples, seed=args.seed)
    bars = synthetic_bars(args.windows + args.context + 1, args.seed)
    ends = decision_ends(len(bars), config)
    forecaster = BaselineForecaster()
    _ = bars.annualisation  # the calendar, loaded before any timing (run_many does the same before forecasting)

    t_batch, batch = timed(make_batch, bars.frame, ends, config.context, 1, bars.calendar)
    t_forecast, batched = timed(forecaster.forecast, batch, 1, config.num_samples, config.seed)
    t_sim, result = timed(simulate, bars, batched, ends, config)
    t_pick, _ = timed(lambda: result.walk_forward)  # computed on first use (reports, tables)
    t_reports, files = timed(render_outputs, [result])
    views, frame = result.views, bars.frame
    settled = ends[:-1] + 1
    nxt = Bar(*(frame[c].to_numpy()[settled] for c in ("open", "high", "low", "close")))
    params = StrategyParams.from_config(config, bars.asset_class)
    t_walk, _ = timed(lambda: [walk(name, views, nxt, params) for name in config.strategies])
    outside = t_batch + t_sim + t_pick + t_reports

    # (c) in CPU seconds of this process (time.process_time: what a busy machine's other processes do not
    # change), each variant's simulate interleaved with a plain one, best of --repeats each; the added time is
    # the difference of the bests, the baseline the CPU time of windows + forecast + simulate + pick
    def cpu(fn, *a) -> float:
        t0 = time.process_time()
        fn(*a)
        return time.process_time() - t0

    c_batch = min(cpu(make_batch, bars.frame, ends, config.context, 1, bars.calendar) for _ in range(args.repeats))
    c_forecast = min(cpu(forecaster.forecast, batch, 1, config.num_samples, config.seed) for _ in range(args.repeats))
    c_pick = min(cpu(lambda: config.selection.walk_forward({n: r.returns for n, r in result.strategies.items()},
                                                            {n: r.filled for n, r in result.strategies.items()}))
                 for _ in range(args.repeats))
    c_reports = cpu(render_outputs, [result])
    labels = {"--calibrate conformal": dict(calibrate="conformal"), "--calibrate quantile": dict(calibrate="quantile"),
              "--sizing kelly": dict(sizing="kelly"), "--sizing cvar": dict(sizing="cvar"),
              "--calibrate conformal --sizing kelly": dict(calibrate="conformal", sizing="kelly")}
    plain_runs, runs, walls, plain_walls = [], {label: [] for label in labels}, {label: [] for label in labels}, []
    for _ in range(args.repeats):
        for label, change in labels.items():
            for sink, wall_sink, cfg in ((plain_runs, plain_walls, config),
                                         (runs[label], walls[label], replace(config, **change))):
                w0 = time.perf_counter()
                sink.append(cpu(simulate, bars, batched, ends, cfg))
                wall_sink.append(time.perf_counter() - w0)
    t_plain = min(plain_runs)
    variants = {label: min(times) - t_plain for label, times in runs.items()}
    wall_added = {label: min(times) - min(plain_walls) for label, times in walls.items()}
    baseline = c_batch + c_forecast + t_plain + c_pick
    full = baseline + c_reports
    t_cal = {m: min(cpu(calibrated_forecast, batched, bars, ends, replace(config, calibrate=m))
                    for _ in range(args.repeats)) for m in ("conformal", "quantile")}
    t_single = None
    if not args.skip_one_by_one:
        t_single, _ = timed(forecast_windows, forecaster, [(bars, ends)], config, False)

    rows = [
        ("build the windows (make_batch)", t_batch),
        ("forecast, one batched call", t_forecast),
        ("simulate: decide, settle, metrics, skill (8 strategies)", t_sim),
        ("  of which decide + settle (vectorised.walk, 8 strategies)", t_walk),
        ("walk-forward pick (selection rule, every window)", t_pick),
        ("render reports (JSON, Markdown, trades.csv)", t_reports),
        ("outside forecasting: windows + simulate + pick + reports", outside),
        ("backtest total (batched)", outside + t_forecast),
    ]
    if t_single is not None:
        rows.insert(2, ("forecast, one call per window (windows built one by one)", t_single))
    console = Console(width=120)
    table = Table(title=f"Backtest benchmark: {result.windows} windows x {len(result.strategies)} strategies, "
                        f"baseline, {args.samples} samples, context {args.context}")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    table.add_column("windows/s", justify="right")
    for name, sec in rows:
        table.add_row(name, f"{sec:.3f}", f"{len(ends) / sec:,.0f}")
    console.print(table)
    console.print(f"outside forecasting: [bold]{outside:.2f} s[/] (target < 1 s); reports "
                  f"{sum(len(v) for v in files.values()) / 1e6:.1f} MB ({os.cpu_count()} CPUs, "
                  f"{platform.processor() or platform.machine()})")
    ratio = None if t_single is None else t_single / t_forecast
    if ratio is not None:
        console.print(f"batched vs one-window-at-a-time forecasting: [bold]{ratio:.1f}x[/] faster")

    extra = Table(title=f"What calibration and sizing add ({len(ends)} windows; CPU seconds, best of "
                        f"{args.repeats})")
    extra.add_column("variant")
    extra.add_column("+CPU s", justify="right")
    extra.add_column(f"/compute {baseline:.2f}", justify="right")
    extra.add_column(f"/backtest {full:.2f}", justify="right")
    extra.add_column("+wall s", justify="right")
    extra.add_column(f"/wall total {outside + t_forecast:.2f}", justify="right")
    for method, sec in t_cal.items():
        extra.add_row(f"  recalibrate 3 fields, {method}, alone", f"{sec:.3f}", f"{sec / baseline:.1%}",
                      f"{sec / full:.1%}", "", "")
    total_wall = outside + t_forecast
    for label, sec in variants.items():
        extra.add_row(f"simulate {label}", f"{sec:+.3f}", f"{sec / baseline:+.1%}", f"{sec / full:+.1%}",
                      f"{wall_added[label]:+.3f}", f"{wall_added[label] / total_wall:+.1%}")
    console.print(extra)
    console.print("compute: windows + one batched forecast + simulate + pick; backtest: the same plus the "
                  "reports, what `marketcast backtest` runs; wall: seconds on the clock (best of the interleaved "
                  "runs) against the first table's 'backtest total (batched)' (target: calibration adds <= 10 %)")

    report = {
        "windows": result.windows, "forecast_windows": len(ends), "strategies": list(result.strategies),
        "context": args.context, "samples": args.samples, "seed": args.seed,
        "make_batch_s": t_batch, "forecast_batched_s": t_forecast, "forecast_one_by_one_s": t_single,
        "batched_speedup": ratio, "simulate_s": t_sim, "decide_settle_s": t_walk, "walk_forward_pick_s": t_pick,
        "render_reports_s": t_reports, "outside_forecasting_s": outside, "total_batched_s": outside + t_forecast,
        "cpu_simulate_plain_best_s": t_plain, "cpu_compute_s": baseline, "cpu_backtest_with_reports_s": full,
        "cpu_recalibrate_s": t_cal, "cpu_added_s": variants, "wall_added_s": wall_added,
        "wall_added_share_of_total": {k: v / (outside + t_forecast) for k, v in wall_added.items()},
        "added_share_of_compute": {k: v / baseline for k, v in variants.items()},
        "added_share_of_backtest": {k: v / full for k, v in variants.items()},
        "best_strategy": result.best_strategy,
        "returns": {n: r.metrics["return"] for n, r in result.strategies.items()},
        "numpy": np.__version__,
    }
    write_report(args.out, report, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
