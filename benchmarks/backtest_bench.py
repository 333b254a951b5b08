"""Benchmark: a 5,000-window x 8-strategy walk-forward backtest with the baseline forecaster.

Times, in one run on the same bars and settings, (a) forecasting all windows in one batched call and
(b) one forecaster call per window, then the decide/settle/metrics pass of all eight strategies, and
reports the batched speed-up as a ratio. Bars: a seeded synthetic daily random walk with
``windows + context + 1`` rows, so every window has its full context. Strategy returns on these bars are
recorded only as a fingerprint of the run: synthetic wicks are independent of the close, which flatters
limit-entry strategies, so they say nothing about any market.

    PYTHONPATH=src python benchmarks/backtest_bench.py [--windows 5000 --context 512 --samples 256 --out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import decision_ends, forecast_windows, simulate  # noqa: E402
from marketcast.data.bars import Bars  # noqa: E402
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
    ap.add_argument("--out", default="benchmarks/results/backtest_bench.json")
    args = ap.parse_args(argv)

    config = BacktestConfig(windows=args.windows, context=args.context, num_samples=args.samples, seed=args.seed)
    bars = synthetic_bars(args.windows + args.context + 1, args.seed)
    ends = decision_ends(len(bars), config)
    forecaster = BaselineForecaster()

    t0 = time.perf_counter()
    (batched,) = forecast_windows(forecaster, [(bars, ends)], config, batched=True)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    forecast_windows(forecaster, [(bars, ends)], config, batched=False)
    t_single = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = simulate(bars, batched, ends, config)
    t_sim = time.perf_counter() - t0

    rows = [
        ("forecast, one batched call", t_batched, len(ends) / t_batched),
        ("forecast, one call per window", t_single, len(ends) / t_single),
        ("decide + settle + metrics, 8 strategies", t_sim, len(ends) / t_sim),
        ("backtest total (batched)", t_batched + t_sim, len(ends) / (t_batched + t_sim)),
    ]
    console = Console()
    table = Table(title=f"Backtest benchmark: {result.windows} windows x {len(result.strategies)} strategies, "
                        f"baseline, {args.samples} samples, context {args.context}")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    table.add_column("windows/s", justify="right")
    for name, sec, rate in rows:
        table.add_row(name, f"{sec:.2f}", f"{rate:,.0f}")
    console.print(table)
    ratio = t_single / t_batched
    console.print(f"batched vs one-window-at-a-time forecasting: [bold]{ratio:.1f}x[/] faster "
                  f"({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})")

    report = {
        "windows": result.windows, "forecast_windows": len(ends), "strategies": list(result.strategies),
        "context": args.context, "samples": args.samples, "seed": args.seed,
        "forecast_batched_s": t_batched, "forecast_one_by_one_s": t_single, "batched_speedup": ratio,
        "simulate_s": t_sim, "total_batched_s": t_batched + t_sim,
        "best_strategy": result.best_strategy,
        "returns": {n: r.metrics["return"] for n, r in result.strategies.items()},
        "cpu_count": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
