"""Benchmark: a 5,000-window x 8-strategy walk-forward backtest with the baseline forecaster.

Times, in one run on the same bars and settings, every phase of the backtest: building the windows
(``make_batch``), the forecaster's one batched call, deciding and settling all eight strategies, their
metrics, the walk-forward pick and forecast skill (``simulate``), and rendering the reports (JSON, Markdown,
trades.csv; no plots), and prints the time spent outside forecasting (target: under 1 s). Then (b) one
forecaster call per window, for the batched speed-up as a ratio (``--skip-one-by-one`` skips it). Bars: a
seeded synthetic daily random walk with
``windows + context + 1`` rows, so every window has its full context. Strategy returns on these bars are
recorded only as a fingerprint of the run: synthetic wicks are independent of the close, which flatters
limit-entry strategies, so they say nothing about any market.

    PYTHONPATH=src python benchmarks/backtest_bench.py [--windows 5000 --context 512 --samples 256 --out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import timed, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import decision_ends, forecast_windows, simulate  # noqa: E402
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

    report = {
        "windows": result.windows, "forecast_windows": len(ends), "strategies": list(result.strategies),
        "context": args.context, "samples": args.samples, "seed": args.seed,
        "make_batch_s": t_batch, "forecast_batched_s": t_forecast, "forecast_one_by_one_s": t_single,
        "batched_speedup": ratio, "simulate_s": t_sim, "decide_settle_s": t_walk, "walk_forward_pick_s": t_pick,
        "render_reports_s": t_reports, "outside_forecasting_s": outside, "total_batched_s": outside + t_forecast,
        "best_strategy": result.best_strategy,
        "returns": {n: r.metrics["return"] for n, r in result.strategies.items()},
        "numpy": np.__version__,
    }
    write_report(args.out, report, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
