"""Benchmark: ``marketcast runs query`` with a query that never ends stops within its time limit plus 2 s, and
within 2 s of SIGINT (issue 56, "Done when").

Three endless queries (``WITH RECURSIVE`` without an end, ``sum`` over ``range(10^13)``, a triple cross join),
each run ``--repeats`` times in a fresh process on an empty store:

* under ``--timeout LIMIT``: the wall time from the command's start (its signal handlers in, the moment the tests
  wait for too) to its exit (must be <= LIMIT + 2 s; opening the store and importing DuckDB count), also kept
  from the process start (Python's start-up and imports: seconds on a loaded machine), the exit code (2) and
  the line;
* with no time limit given (30 s) and SIGINT sent ``--after`` seconds after the command installed its handler:
  the wall time from the signal to the exit (must be <= 2 s) and the exit code (130).

The same wall time of ``SELECT 1`` is the command's fixed cost on the machine, for scale. Prints a table
(median and max per query) and writes benchmarks/results/query_bounds.json.

    PYTHONPATH=src python benchmarks/query_bounds.py [--repeats 5 --limit 2 --after 1.5 --out FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(1, str(ROOT))  # the tests' probe of a running command

from common import RESULTS, load_average, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from marketcast.signals import handles as handles_sigterm  # noqa: E402  (the command's own handlers are in)

QUERIES = {
    "recursive": "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t",
    "range 10^13": "SELECT sum(range) FROM range(10000000000000)",
    "cross join": "SELECT count(*) FROM range(100000) a, range(100000) b, range(100000) c",
}
SLACK_S = 2.0  # the bound past the time limit, and after SIGINT


def _command(store: Path, sql: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "marketcast.commands", "runs", "query", "--store", str(store), *extra, sql]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}


def _started(proc: subprocess.Popen) -> float:
    """The moment ``proc``'s command is running (its signal handlers are in; Python's start-up and the imports
    before it are the machine's, not the query's)."""
    while proc.poll() is None and not handles_sigterm(proc.pid):
        time.sleep(0.005)
    return time.monotonic()


def under_limit(store: Path, sql: str, limit: float) -> tuple[float, float, int, str]:
    """Seconds from the process start and from the command's start to its exit under ``--timeout limit``, the
    exit code and the last stderr line."""
    launched = time.monotonic()
    proc = subprocess.Popen(_command(store, sql, "--timeout", f"{limit:g}"), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    running = _started(proc)
    _, err = proc.communicate(timeout=limit + 120)
    ended = time.monotonic()
    return ended - launched, ended - running, proc.returncode, (err.strip().splitlines() or [""])[-1]


def after_sigint(store: Path, sql: str, after: float) -> tuple[float, int, str]:
    """Seconds from SIGINT (sent ``after`` s into the query) to exit, the exit code and the last stderr line."""
    proc = subprocess.Popen(_command(store, sql), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    _started(proc)
    time.sleep(after)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return time.monotonic() - sent, proc.returncode, (err.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit", type=float, default=2.0, help="--timeout of the time-limit runs, seconds")
    parser.add_argument("--after", type=float, default=1.5, help="seconds into the query when SIGINT is sent")
    parser.add_argument("--out", default=str(RESULTS / "query_bounds.json"))
    args = parser.parse_args()
    console = Console()
    rows, report = [], {"limit_s": args.limit, "sigint_after_s": args.after, "slack_s": SLACK_S,
                        "repeats": args.repeats, "load_average_before": load_average(), "queries": {}}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs"
        # the command's fixed cost on this machine (store, DuckDB and pandas imports, printing): a query that ends
        report["select_1_command_start_to_exit_s"] = [under_limit(store, "SELECT 1", 30)[1] for _ in range(args.repeats)]
        for name, sql in QUERIES.items():
            limited = [under_limit(store, sql, args.limit) for _ in range(args.repeats)]
            stopped = [after_sigint(store, sql, args.after) for _ in range(args.repeats)]
            walls, stops = [w for _, w, _, _ in limited], [w for w, _, _ in stopped]
            ok = (all(w <= args.limit + SLACK_S and c == 2 for _, w, c, _ in limited)
                  and all(w <= SLACK_S and c == 130 for w, c, _ in stopped))
            report["queries"][name] = {
                "sql": sql, "limit_wall_from_process_start_s": [w for w, _, _, _ in limited],
                "limit_wall_from_command_start_s": walls, "limit_codes": [c for _, _, c, _ in limited],
                "limit_line": limited[0][3], "sigint_to_exit_s": stops, "sigint_codes": [c for _, c, _ in stopped],
                "sigint_line": stopped[0][2], "within_bounds": ok}
            rows.append((name, walls, stops, ok))
    report["load_average_after"] = load_average()
    table = Table(title=f"runs query: endless queries under --timeout {args.limit:g} and after SIGINT "
                        f"({args.repeats} runs each; 'SELECT 1' takes "
                        f"{statistics.median(report['select_1_command_start_to_exit_s']):.2f} s from command start)")
    for column in ("query", "limit: command start -> exit median / max (s)", "bound (s)", "SIGINT -> exit median / max (s)",
                   "bound (s)", "ok"):
        table.add_column(column)
    for name, walls, stops, ok in rows:
        table.add_row(name, f"{statistics.median(walls):.2f} / {max(walls):.2f}", f"{args.limit + SLACK_S:g}",
                      f"{statistics.median(stops):.2f} / {max(stops):.2f}", f"{SLACK_S:g}", "yes" if ok else "NO")
    console.print(table)
    report["all_within_bounds"] = all(ok for *_, ok in rows)
    write_report(args.out, report, console)


if __name__ == "__main__":
    main()
