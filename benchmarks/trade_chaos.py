"""SIGKILL chaos for the live loop on both clocks: kill a real loop process against the fake Alpaca after every
order POST the broker booked and after every cancel it took (the reply never reaches the loop), restart it each
time, and compare with an uninterrupted run: duplicates, lost fills, broker refusals, and the books (orders,
fills, cash, positions) must match. The loop trades the embedded SP500 on NYSE sessions beside ETH/USD on a
seeded synthetic 24/7 series (marketcast.trade.test_kit.synthetic: a random walk with a bar every calendar day,
not market data), holding positions overnight; so kills land on weekend crypto cycles, and (crypto orders are
good-till-cancelled: a bar's leftovers go cancel -> confirm -> close) between a cancel and the submit after it.

    python benchmarks/trade_chaos.py [--start 2018-03-01 --end 2018-06-29 --out benchmarks/results/trade_chaos.json]

Needs the dev extras (alpaca-py). One replay over the span, run month by month: a row is printed as each month
ends (the kills so far, and the books compared with the uninterrupted run's at that day), then the totals.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]

import pandas as pd  # noqa: E402
from rich.console import Console  # noqa: E402

from common import RESULTS, write_report  # noqa: E402
from marketcast.trade.test_kit.chaos import chaos, lost_fills, reference  # noqa: E402

COLUMNS = ("through", "kills", "weekend crypto", "cancel -> submit", "orders posted (reference)", "duplicates",
           "lost fills", "refusals", "books equal")


def month_ends(start: str, end: str) -> tuple[str, ...]:
    """The last calendar day of each month in [start, end) (the span's own end closes the last row)."""
    days = pd.date_range(start, end, freq="ME")
    return tuple(f"{d:%Y-%m-%d}" for d in days if f"{d:%Y-%m-%d}" < end)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="2018-03-01")
    ap.add_argument("--end", default="2018-06-29")
    ap.add_argument("--out", default=str(RESULTS / "trade_chaos.json"))
    args = ap.parse_args()
    console = Console(soft_wrap=True)  # a row stays one line in a narrow terminal or a log
    started = time.perf_counter()
    stages = month_ends(args.start, args.end)
    rows: list[dict] = []
    console.print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    with tempfile.TemporaryDirectory(prefix="marketcast-chaos-") as tmp:
        ref = reference(Path(tmp) / "reference", args.start, args.end, stages)
        ref.at[args.end] = ref.books

        def row(through: str, run) -> None:
            expected = ref.at[through]
            got = {"through": through, "kills": run.killed, "weekend_crypto": run.weekend_kills,
                   "cancel_submit": run.cancel_submit_kills, "orders_posted": len(set(run.posts)),
                   "reference_orders": len(expected["orders"]), "duplicates": len(run.posts) - len(set(run.posts)),
                   "lost_fills": lost_fills(expected, run.books), "refusals": len(run.rejections),
                   "books_equal": run.books == expected}
            rows.append(got)
            cells = [through, got["kills"], got["weekend_crypto"], got["cancel_submit"],
                     f"{got['orders_posted']} ({got['reference_orders']})", got["duplicates"], got["lost_fills"],
                     got["refusals"], "yes" if got["books_equal"] else "NO"]
            console.print("| " + " | ".join(str(c) for c in cells) + " |")

        run = chaos(Path(tmp) / "crashed", args.start, args.end, set(range(1, ref.posts + 1)),
                    set(range(1, ref.deletes + 1)), timeout_s=600, stages=stages, on_stage=row)
    last = rows[-1]
    report = {
        "span": f"{args.start} .. {args.end}", "kills": run.killed, "kills_on_post": ref.posts,
        "kills_on_delete": ref.deletes, "kills_on_weekend_crypto": run.weekend_kills,
        "kills_between_cancel_and_submit": run.cancel_submit_kills, "process_runs": run.killed + len(stages) + 1,
        "days_ending_with_a_position": ref.overnight, "orders_posted": last["orders_posted"],
        "reference_orders": last["reference_orders"], "duplicates": last["duplicates"],
        "lost_fills": last["lost_fills"], "broker_refusals": last["refusals"],
        "books_equal": all(r["books_equal"] for r in rows), "finished": run.returncode == 0, "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
    console.print(f"total: {run.killed} kills ({ref.posts} after a POST, {ref.deletes} after a DELETE), "
                  f"{run.weekend_kills} on weekend crypto cycles, {run.cancel_submit_kills} between a cancel and "
                  f"its submit; days ending with a position {ref.overnight}; {report['seconds']} s")
    write_report(args.out, report, console)
    ok = report["finished"] and report["books_equal"] and last["duplicates"] == last["lost_fills"] == 0
    return 0 if ok and last["refusals"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
