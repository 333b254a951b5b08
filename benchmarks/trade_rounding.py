"""Measurement: what the broker's price grid changes in a paper replay (docs/trading.md quotes its table).

Runs ``trade replay`` over a period with the CLI's defaults (baseline model, default gates, the embedded SP500
and NASDAQ), then settles every order twice on the bar after its decision with the backtest's own rule: as
decided (unrounded, what the backtest trades) and as sent (the limit and take-profit on the penny grid, buy
prices down and sell prices up), at the quantity that was sent. It counts the fills that differ (price moved,
fill gained or lost) and sums what they did to equity. The sizing effect (a sell limit rounded up can buy one
share fewer) is not in the difference; the orders whose quantity differs from sizing at the decision's price
are counted apart (with two symbols every entry is sized to half the equity, so that is exact).

    PYTHONPATH=src python benchmarks/trade_rounding.py [--from 2015-01-01 --to 2015-12-31 --out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.backtest.fills import settle  # noqa: E402
from marketcast.backtest.orders import Bar, Costs, Decision  # noqa: E402
from marketcast.data import load_symbol  # noqa: E402
from marketcast.forecast import load_forecaster  # noqa: E402
from marketcast.trade.loop.cycle import LoopConfig  # noqa: E402
from marketcast.trade.ops.monitor import read_records  # noqa: E402
from marketcast.trade.venues.paper import PaperBroker  # noqa: E402
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner  # noqa: E402
from marketcast.trade.replay import replay  # noqa: E402
from marketcast.trade.journal.state import Journal  # noqa: E402

SYMBOLS = ("SP500", "NASDAQ")


def measure(start: str, end: str, state: Path) -> dict:
    bars = {s: load_symbol(s) for s in SYMBOLS}
    result = replay(bars, BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, seed=0)), state, start,
                    end, LoopConfig(SYMBOLS))
    journal, broker = Journal(state / "journal.db"), PaperBroker(state / "broker.db", bars, hold=True)
    equity = {r["decision_ts"]: r["equity"] for r in read_records(state)}
    cap = LoopConfig(SYMBOLS).portfolio.per_symbol_cap
    rows = {"orders": 0, "fills_raw": 0, "fills_sent": 0, "price_moved": 0, "gained": 0, "lost": 0,
            "pnl_raw": 0.0, "pnl_sent": 0.0, "max_entry_move": 0.0, "qty_differs": 0}
    for i in journal.intents():
        if i.status != "submitted" or i.kind != "entry":
            continue
        d = json.loads(i.decision)
        raw = Decision(d["side"], d["entry_limit"], d["take_profit"])
        sent = Decision(d["side"], i.limit_price, i.take_profit)
        frame = bars[i.symbol].frame
        nxt = frame.iloc[frame.index.get_loc(i.decision_ts) + 1]
        bar, costs = Bar(nxt.open, nxt.high, nxt.low, nxt.close), Costs.for_asset("stock")
        a, b = settle(raw, bar, costs), settle(sent, bar, costs)
        rows["orders"] += 1
        rows["fills_raw"] += a.filled
        rows["fills_sent"] += b.filled
        rows["gained"] += b.filled and not a.filled
        rows["lost"] += a.filled and not b.filled
        if a.filled and b.filled and (a.entry_price, a.exit_price) != (b.entry_price, b.exit_price):
            rows["price_moved"] += 1
            rows["max_entry_move"] = max(rows["max_entry_move"], abs(a.entry_price - b.entry_price))
        rows["pnl_raw"] += i.qty * a.entry_price * a.net_return if a.filled else 0.0
        rows["pnl_sent"] += i.qty * b.entry_price * b.net_return if b.filled else 0.0
        if raw.entry_limit is not None and int(cap * equity[i.decision_ts] / raw.entry_limit) != int(i.qty):
            rows["qty_differs"] += 1
    rows["equity_end"] = float(result.equity.iloc[-1])
    rows["equity_difference"] = rows["pnl_sent"] - rows["pnl_raw"]
    journal.close()
    broker.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="start", default="2015-01-01")
    ap.add_argument("--to", dest="end", default="2015-12-31")
    ap.add_argument("--out", default="benchmarks/results/trade_rounding.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args.start, args.end, Path(tmp))
    table = Table(title=f"penny grid vs the backtest's prices, paper replay {args.start} .. {args.end}")
    table.add_column("what")
    table.add_column("value", justify="right")
    for k, v in rows.items():
        table.add_row(k, f"{v:,.4f}" if isinstance(v, float) else str(v))
    Console().print(table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"from": args.start, "to": args.end, **rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
