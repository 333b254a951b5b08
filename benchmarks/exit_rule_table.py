"""The exit rule's table (issue 53, docs/trading.md#exit-rule): per strategy, the gross total return of the
same decisions exited at the close (``--exit close``) and at the next open (``--exit next-open``, the default,
where ``trade run`` exits a stock), on the embedded SP500 and NASDAQ. The decisions are the same under both rules
but MaxDiff's: its offsets are learned from past windows scored with the rule's own exits (and one window later
under next-open), so each rule's columns use that rule's run's decisions ("no wash": the next-open run's).

Each symbol is backtested with the default settings but ``--windows 500`` (2017-01 to 2018-12) under both
rules, with the baseline forecaster. Three columns a strategy: ``close``; ``next-open, no wash`` (the
next-open rule's fills of every decision: the issue's "traded" column, which ignores the wash refusal); and
``next-open`` as the backtest scores it, where an entry against the previous window's queued close is
refused (:func:`marketcast.backtest.execution.wash_refused`). Gross: before fees, spread, slippage and borrow,
compounded over the windows (``prod(1 + gross) - 1``). The walk-forward row is the pick's net record under each
rule (its pick lags a window under next-open), as the loop trades the picks
(:meth:`marketcast.backtest.engine.Exits.traded`).

Holding (``--hold``, ``hold`` in the config, issue 53 item 3) gets two more columns, ``close, hold`` and
``next-open, hold``: each strategy's own decisions under that rule held while they stay on their side
(:func:`marketcast.backtest.holding.hold`, the rule ``backtest --hold`` applies to the walk-forward pick),
gross (no costs) like the other columns, unit size; the walk-forward row is ``backtest --hold``'s net record.

The JSON it writes is what docs/trading.md's table shows: ``--markdown`` prints that table (the rows between
``<!-- exit-rule-table: begin -->`` and ``<!-- exit-rule-table: end -->``), and
tests/backtest/test_exit_rule_table.py checks the docs against the JSON.

    PYTHONPATH=src python benchmarks/exit_rule_table.py [--windows 500 --out benchmarks/results/exit_rule_table.json]
    PYTHONPATH=src python benchmarks/exit_rule_table.py --markdown   # the docs' table from the results file
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from marketcast.backtest.config import BacktestConfig  # noqa: E402

SYMBOLS = ("SP500", "NASDAQ")
RESULTS = Path(__file__).resolve().parent / "results" / "exit_rule_table.json"
HOLD = True  # the results file's hold columns (a file written before --hold existed has none)
#: (JSON key, column heading) per strategy row, in the docs' order.
COLUMNS = (("close", "close"), ("next_open_no_wash", "next-open, no wash"), ("next_open", "next-open"))
HOLD_COLUMNS = (("close_hold", "close, hold"), ("next_open_hold", "next-open, hold"))


def total(gross: np.ndarray) -> float:
    return float(np.prod(1.0 + gross) - 1.0)


def symbol_table(symbol: str, windows: int) -> dict:
    from marketcast.backtest.engine import run_backtest
    from marketcast.backtest.fills import WASH, settle_all
    from marketcast.backtest.strategies import StrategyParams
    from marketcast.data import load_symbol
    from marketcast.forecast.baseline import BaselineForecaster

    bars = load_symbol(symbol)
    config = BacktestConfig(windows=windows)
    runs = {"close": run_backtest(bars, BaselineForecaster(), replace(config, exit="close")),
            "next_open": run_backtest(bars, BaselineForecaster(), replace(config, exit="next-open"))}
    if HOLD:
        for rule, key in (("close", "close_hold"), ("next-open", "next_open_hold")):
            runs[key] = run_backtest(bars, BaselineForecaster(), replace(config, exit=rule, hold=True))
    opened, frame = runs["next_open"], bars.frame
    rows = frame.index.get_indexer(opened.settle_times)
    o, h, lo, c = (frame[k].to_numpy() for k in ("open", "high", "low", "close"))
    nxt = np.where(rows + 1 < len(frame), o[np.minimum(rows + 1, len(frame) - 1)], np.nan)
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
    out = {}
    for name, run in opened.strategies.items():
        d = run.decisions
        unrefused = settle_all(d.side, d.entry_limit, d.take_profit, o[rows], h[rows], lo[rows], c[rows],
                               params.costs, params.fill_mode, params.same_bar, nxt)
        row = {key: total(r.strategies[name].settlements.gross) for key, r in runs.items() if "hold" not in key}
        for rule, key, source in (("close", "close_hold", "close"), ("next-open", "next_open_hold", "next_open")):
            # each rule's own decisions: MaxDiff's offsets are learned under the rule it is scored by
            decided = runs[source].strategies[name].decisions
            row[key] = total(_held(decided, frame, rows, bars.asset_class, rule).returns)
        out[name] = {**row, "next_open_no_wash": total(unrefused.gross),
                     "trades": {key: int(r.strategies[name].filled.sum()) for key, r in runs.items()
                                if "hold" not in key},
                     "refused_wash": int((run.settlements.reason == WASH).sum())}
    out["walk-forward (net)"] = {**{key: r.walk_forward["metrics"]["return"] for key, r in runs.items()},
                                 "next_open_no_wash": None,
                                 "trades": {key: int(r.walk_forward["filled"].sum()) for key, r in runs.items()},
                                 "refused_wash": None}
    closed = runs["close"]
    return {"first_decision": str(closed.decision_times[0].date()), "last_settle": str(closed.settle_times[-1].date()),
            "windows": closed.windows, "strategies": out}


def _held(d, frame, rows: np.ndarray, asset_class: str, rule: str):
    """One strategy's decisions ``d`` held while they agree, gross, unit size (:func:`holding.hold`); ``rows``
    each window's bar t+1 in ``frame``."""
    from marketcast.backtest.execution import session_last
    from marketcast.backtest.holding import hold
    from marketcast.backtest.costs import Costs

    bars = np.append(rows[0] - 1, rows)  # bar t of window 0, then each window's bar t+1
    ohlc = tuple(frame[k].to_numpy()[bars] for k in ("open", "high", "low", "close"))
    auction = session_last(frame.index, asset_class)[rows]
    return hold(d.side, d.entry_limit, d.take_profit, np.ones(len(rows)), ohlc, Costs(0.0), rule, auction,
                asset_class == "crypto")


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.2f} %"


def columns(report: dict) -> tuple[tuple[str, str], ...]:
    return COLUMNS + (HOLD_COLUMNS if report.get("hold") else ())


def markdown(report: dict) -> str:
    """docs/trading.md's table from a results file: a row per strategy, the columns per symbol."""
    cols = columns(report)
    head = ["strategy"] + [f"{symbol} {title}" for symbol in report["symbols"] for _, title in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    first = next(iter(report["symbols"].values()))["strategies"]
    for name in first:
        cells = [name]
        for got in report["symbols"].values():
            row = got["strategies"][name]
            for key, _ in cols:
                refused = row["refused_wash"]
                cells.append(pct(row[key]) + (f" ({refused} refused)" if key == "next_open" and refused is not None
                                              else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=500)
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--markdown", action="store_true", help="print the docs' table from --out and stop")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.out).read_text())))
        return
    from common import write_report
    from rich.console import Console
    from rich.table import Table

    console = Console()
    report = {"windows": args.windows, "model": "baseline", "return": "gross, compounded", "hold": HOLD,
              "symbols": {}}
    for symbol in SYMBOLS:
        got = report["symbols"][symbol] = symbol_table(symbol, args.windows)
        table = Table(title=f"{symbol}: {got['windows']} windows {got['first_decision']} → {got['last_settle']}, "
                            "gross total return")
        cols = columns(report)
        for title in ("strategy", *(t for _, t in cols), "refused as wash"):
            table.add_column(title, justify="left" if title == "strategy" else "right")
        for name, row in got["strategies"].items():
            table.add_row(name, *(pct(row[key]) for key, _ in cols),
                          "—" if row["refused_wash"] is None else str(row["refused_wash"]))
        console.print(table)
    write_report(args.out, report, console)


if __name__ == "__main__":
    main()
