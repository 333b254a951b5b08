"""Benchmark: one long/flat signal through vectorbt's ``Portfolio.from_signals`` and through marketcast, in one run.

The signal: long bar t+1 (bought at its open, sold at its close) when close_t is above the mean close of the 20
bars up to t, else flat; on the embedded SP500 (5,031 daily bars, 5,030 windows). Both sides trade the same
open-to-close round trips and pay the same fee:

* marketcast: the signal as each window's forecast, traded by ``all_signals`` (long when close, high and low
  forecasts are all up; flat when they disagree) through the engine's own ``walk`` (decide + settle every
  window), then compounded; fee ``f`` per side on the entry notional, net = close / open - 1 - 2f.
* vectorbt: each bar is two ticks (its open, then its close); entries on the open tick, exits on the close
  tick. vectorbt charges a fee on each order's value, so the open tick pays 0 and the close tick
  2f * open / close: the same money as marketcast's 2f of the entry notional.

The script asserts both total returns agree (relative 1e-9) and prints the time of marketcast over vectorbt
(the median of interleaved repeats; vectorbt's first call, which compiles its numba kernels, is reported on
its own). A second marketcast row times ``simulate``, the whole per-symbol step of a backtest (every metric,
the PSR and a 1,000-resample bootstrap of the Sharpe ratio, forecast skill), which vectorbt computes only on
request (``pf.stats()``), timed beside it.

    PYTHONPATH=src python benchmarks/vectorbt_compare.py [--fee 0.0005 --repeats 25 --out FILE]

Needs the ``bench`` extra (``make bench`` installs it; vectorbt itself without its dependencies, as its
pandas>=3 pin is only metadata: this script checks its results on our pandas).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import timed, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import simulate  # noqa: E402
from marketcast.backtest.orders import Bar, Costs  # noqa: E402
from marketcast.backtest.strategies import StrategyParams  # noqa: E402
from marketcast.backtest.vectorised import walk  # noqa: E402
from marketcast.backtest.views import ForecastViews  # noqa: E402
from marketcast.data import load_symbol  # noqa: E402
from marketcast.forecast.base import Forecast  # noqa: E402

STRATEGY = "all_signals"
LOOKBACK = 20


def long_flat_signal(close: np.ndarray) -> np.ndarray:
    """``[n - 1]``: long bar t+1 when close_t is above the mean of closes t-19..t (flat for the first 19)."""
    total = np.concatenate([[0.0], np.cumsum(close)])
    mean = np.full(len(close), np.inf)
    mean[LOOKBACK - 1:] = (total[LOOKBACK:] - total[:-LOOKBACK]) / LOOKBACK
    return (close > mean)[:-1]


def signal_returns(signal: np.ndarray) -> dict[str, np.ndarray]:
    """The forecast returns that make ``all_signals`` trade the signal: all up when long, mixed when flat."""
    up = np.where(signal, 1e-3, -1e-3)
    return {"close": up, "high": np.full(len(signal), 1e-3), "low": up}


def marketcast_return(o, h, lo, c, signal, fee) -> float:
    """The engine's hot path: the signal's views, every window decided and settled, compounded."""
    rets = signal_returns(signal)
    views = ForecastViews(np.arange(len(signal)), c[:-1], rets["close"], rets["high"], rets["low"], rets["close"],
                          rets["close"], np.zeros(len(signal)))  # no ATR: all_signals trades at market
    run = walk(STRATEGY, views, Bar(o[1:], h[1:], lo[1:], c[1:]), StrategyParams(costs=Costs(fee)))
    return float(np.prod(1.0 + run.fills.net) - 1.0)


def marketcast_simulate(bars, signal, fee):
    """The whole per-symbol backtest step with every metric, from the signal as a one-sample forecast."""
    c = bars.frame["close"].to_numpy()
    rets = signal_returns(signal)
    prices = np.stack([c[:-1] * (1.0 + rets[f]) for f in ("close", "high", "low")], axis=1)[:, :, None, None]
    config = BacktestConfig(windows=len(signal), context=LOOKBACK, num_samples=1, fee=fee, spread=0.0, slippage=0.0,
                            borrow_rate=0.0, strategies=(STRATEGY,), include_latest=False)  # the fee alone, as vectorbt
    return simulate(bars, Forecast(prices), np.arange(len(signal)), config)


def vectorbt_portfolio(vbt, o, c, signal, fee):
    """Two ticks a bar (open, close); enter on the open tick, exit on the close tick, the fee on the exit."""
    n = len(signal)
    ticks = np.column_stack([o[1:], c[1:]]).ravel()
    entries = np.zeros(2 * n, dtype=bool)
    exits = np.zeros(2 * n, dtype=bool)
    entries[0::2], exits[1::2] = signal, signal
    fees = np.zeros(2 * n)
    fees[1::2] = 2.0 * fee * o[1:] / c[1:]
    return vbt.Portfolio.from_signals(ticks, entries, exits, fees=fees, init_cash=1.0, freq="12h")



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fee", type=float, default=0.0005)
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--out", default="benchmarks/results/vectorbt_compare.json")
    args = ap.parse_args(argv)

    t_import, vbt = timed(__import__, "vectorbt")
    bars = load_symbol("SP500")
    o, h, lo, c = (bars.frame[k].to_numpy(dtype=np.float64) for k in ("open", "high", "low", "close"))
    signal = long_flat_signal(c)

    t_first, pf = timed(lambda: vectorbt_portfolio(vbt, o, c, signal, args.fee).total_return())
    ours = marketcast_return(o, h, lo, c, signal, args.fee)
    theirs = float(vectorbt_portfolio(vbt, o, c, signal, args.fee).total_return())
    full = marketcast_simulate(bars, signal, args.fee).strategies[STRATEGY]
    trades = int(full.filled.sum())
    if not (np.isclose(ours, theirs, rtol=1e-9, atol=0) and ours == full.metrics["return"]):
        raise SystemExit(f"returns differ: marketcast {ours!r} (simulate {full.metrics['return']!r}), "
                         f"vectorbt {theirs!r}")
    stats_time, _ = timed(lambda: vectorbt_portfolio(vbt, o, c, signal, args.fee).stats())  # warm its stats

    runs: dict[str, list[float]] = {"vectorbt": [], "marketcast": [], "vectorbt_stats": [], "marketcast_simulate": []}
    for _ in range(args.repeats):  # interleaved, so load from other processes falls on both alike
        runs["vectorbt"].append(timed(lambda: vectorbt_portfolio(vbt, o, c, signal, args.fee).total_return())[0])
        runs["marketcast"].append(timed(marketcast_return, o, h, lo, c, signal, args.fee)[0])
        runs["vectorbt_stats"].append(timed(lambda: vectorbt_portfolio(vbt, o, c, signal, args.fee).stats())[0])
        runs["marketcast_simulate"].append(timed(marketcast_simulate, bars, signal, args.fee)[0])
    med = {k: statistics.median(v) for k, v in runs.items()}
    spread = {k: (min(v), max(v)) for k, v in runs.items()}
    ratio = med["marketcast"] / med["vectorbt"]
    ratio_full = med["marketcast_simulate"] / med["vectorbt_stats"]

    console = Console()
    table = Table(title=f"One long/flat signal, SP500 {len(signal):,} windows, {trades:,} open-to-close trades, "
                        f"fee {args.fee:g} per side; median of {args.repeats} interleaved repeats")
    for col in ("run", "median ms", "min .. max ms"):
        table.add_column(col, justify="left" if col == "run" else "right")
    rows = [("vectorbt from_signals + total_return", "vectorbt"),
            ("marketcast walk (decide + settle) + total return", "marketcast"),
            ("vectorbt from_signals + stats()", "vectorbt_stats"),
            ("marketcast simulate (every metric, bootstrap, skill)", "marketcast_simulate")]
    for label, key in rows:
        table.add_row(label, f"{1e3 * med[key]:.2f}", f"{1e3 * spread[key][0]:.2f} .. {1e3 * spread[key][1]:.2f}")
    console.print(table)
    console.print(f"total return: marketcast {ours:+.12f}, vectorbt {theirs:+.12f} (difference {ours - theirs:.1e})")
    console.print(f"vectorbt {vbt.__version__}: import {t_import:.2f} s; first from_signals call (numba JIT) "
                  f"{t_first:.2f} s, first stats() {stats_time:.2f} s; excluded from the medians")
    console.print(f"[bold]marketcast / vectorbt: {ratio:.2f}x[/] (signal to return); {ratio_full:.2f}x with every "
                  f"metric (simulate vs stats()); {os.cpu_count()} CPUs")

    report = {
        "symbol": "SP500", "windows": len(signal), "trades": trades, "fee_per_side": args.fee,
        "strategy": STRATEGY, "repeats": args.repeats, "return_marketcast": ours, "return_vectorbt": theirs,
        "median_s": med, "min_max_s": spread, "ratio_marketcast_over_vectorbt": ratio,
        "ratio_simulate_over_stats": ratio_full, "vectorbt_import_s": t_import, "vectorbt_first_call_s": t_first,
        "vectorbt_first_stats_s": stats_time, "vectorbt": vbt.__version__, "numpy": np.__version__,
    }
    write_report(args.out, report, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
