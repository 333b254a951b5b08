"""The exit rule's table (issue 53, docs/trading.md#exit-rule): per strategy, the gross total return of the
same decisions exited at the close (``--exit close``, what the backtest scored until now) and at the next open
(``--exit next-open``, where ``trade run`` exits a stock), on the embedded SP500 and NASDAQ.

Each symbol is backtested with the default settings but ``--windows 500`` (2017-01 to 2018-12) under both
rules, with the baseline forecaster. Three columns a strategy: ``close``; ``next-open, no wash`` (the
next-open rule's fills of every decision: the issue's "traded" column, which ignores the wash refusal); and
``next-open`` as the backtest now scores it, where an entry against the previous window's queued close is
refused (:func:`marketcast.backtest.execution.wash_refused`). Gross: before fees, spread, slippage and borrow,
compounded over the windows (``prod(1 + gross) - 1``). The walk-forward row is the pick's net record under each
rule (its pick lags a window under next-open).

    PYTHONPATH=src python benchmarks/exit_rule_table.py [--windows 500 --out benchmarks/results/exit_rule_table.json]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import run_backtest  # noqa: E402
from marketcast.backtest.fills import settle_all  # noqa: E402
from marketcast.backtest.strategies import StrategyParams  # noqa: E402
from marketcast.data import load_symbol  # noqa: E402
from marketcast.forecast.baseline import BaselineForecaster  # noqa: E402

SYMBOLS = ("SP500", "NASDAQ")


def total(gross: np.ndarray) -> float:
    return float(np.prod(1.0 + gross) - 1.0)


def symbol_table(symbol: str, windows: int) -> dict:
    bars = load_symbol(symbol)
    config = BacktestConfig(windows=windows)
    closed = run_backtest(bars, BaselineForecaster(), config)
    opened = run_backtest(bars, BaselineForecaster(), replace(config, exit="next-open"))
    frame = bars.frame
    rows = frame.index.get_indexer(opened.settle_times)
    o, h, lo, c = (frame[k].to_numpy() for k in ("open", "high", "low", "close"))
    nxt = np.where(rows + 1 < len(frame), o[np.minimum(rows + 1, len(frame) - 1)], np.nan)
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
    out = {}
    for name, run in opened.strategies.items():
        d = run.decisions
        unrefused = settle_all(d.side, d.entry_limit, d.take_profit, o[rows], h[rows], lo[rows], c[rows],
                               params.costs, params.fill_mode, params.same_bar, nxt)
        refused = int((run.settlements.reason == 4).sum())
        out[name] = {"close": total(closed.strategies[name].settlements.gross),
                     "next_open_no_wash": total(unrefused.gross), "next_open": total(run.settlements.gross),
                     "trades_close": int(closed.strategies[name].filled.sum()),
                     "trades_next_open": int(run.filled.sum()),
                     "refused_wash": refused}
    out["walk-forward (net)"] = {"close": closed.walk_forward["metrics"]["return"], "next_open_no_wash": None,
                                 "next_open": opened.walk_forward["metrics"]["return"],
                                 "trades_close": int(closed.walk_forward["filled"].sum()),
                                 "trades_next_open": int(opened.walk_forward["filled"].sum()), "refused_wash": None}
    return {"first_decision": str(closed.decision_times[0].date()), "last_settle": str(closed.settle_times[-1].date()),
            "windows": closed.windows, "strategies": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=500)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "exit_rule_table.json"))
    args = parser.parse_args()
    console = Console()
    report = {"windows": args.windows, "model": "baseline", "return": "gross, compounded", "symbols": {}}
    pct = lambda x: "—" if x is None else f"{100 * x:+.2f} %"  # noqa: E731
    for symbol in SYMBOLS:
        got = report["symbols"][symbol] = symbol_table(symbol, args.windows)
        table = Table(title=f"{symbol}: {got['windows']} windows {got['first_decision']} → {got['last_settle']}, "
                            "gross total return")
        for col in ("strategy", "close", "next-open, no wash", "next-open", "refused as wash"):
            table.add_column(col, justify="left" if col == "strategy" else "right")
        for name, row in got["strategies"].items():
            table.add_row(name, pct(row["close"]), pct(row["next_open_no_wash"]), pct(row["next_open"]),
                          "—" if row["refused_wash"] is None else str(row["refused_wash"]))
        console.print(table)
    write_report(args.out, report, console)


if __name__ == "__main__":
    main()
