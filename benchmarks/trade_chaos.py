"""SIGKILL chaos for the live loop: kill a real loop process against the fake Alpaca after every order POST the
broker booked and after every cancel it took (the reply never reaches the loop), restart it each time, and
compare with an uninterrupted run: duplicates, lost orders, broker refusals, and the books (orders, fills,
cash, positions) must match. A stock (SP500) and a crypto pair (NASDAQ's bars as NQ/USD): crypto orders are
good-till-cancelled, so each bar's leftovers go cancel -> confirm -> close, and a kill lands between them.

    python benchmarks/trade_chaos.py [--start 2018-03-01 --end 2018-06-29 --out out/bench/trade_chaos.json]

Needs the dev extras (alpaca-py); runs every kill point of the span (170 POSTs and 58 DELETEs for the
default span: 228 kills, one process start each).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from common import write_report  # noqa: E402
from marketcast.trade.test_kit.chaos import chaos, reference  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="2018-03-01")
    ap.add_argument("--end", default="2018-06-29")
    ap.add_argument("--out", default="out/bench/trade_chaos.json")
    args = ap.parse_args()
    console = Console()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="marketcast-chaos-") as tmp:
        ref = reference(Path(tmp) / "reference", args.start, args.end)
        run = chaos(Path(tmp) / "crashed", args.start, args.end, set(range(1, ref.posts + 1)),
                    set(range(1, ref.deletes + 1)), timeout_s=600)
    duplicates = len(run.posts) - len(set(run.posts))
    lost = len({o[0] for o in ref.books["orders"]} - set(run.posts))
    report = {
        "span": f"{args.start} .. {args.end}", "kills": run.killed, "kills_on_post": ref.posts,
        "kills_on_delete": ref.deletes, "process_runs": run.killed + 1, "orders_posted": len(set(run.posts)),
        "reference_orders": len(ref.books["orders"]), "duplicates": duplicates, "lost": lost,
        "broker_refusals": len(run.rejections), "books_equal": run.books == ref.books, "finished": run.returncode == 0,
        "seconds": round(time.perf_counter() - started, 1),
    }
    table = Table(title="trade chaos: SIGKILL after every booked POST and taken DELETE")
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in report.items():
        table.add_row(key, str(value))
    console.print(table)
    write_report(args.out, report, console)
    ok = report["finished"] and report["books_equal"] and duplicates == lost == report["broker_refusals"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
