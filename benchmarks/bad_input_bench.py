"""Benchmark: how fast and how light bad input is refused, in fresh processes (issue: checked before any work).

Cases, each a whole ``marketcast`` process, run ``--repeats`` times:

* ``data check`` of a header plus 200 MB of text lines (refused at row 1 from the first rows, without holding the
  file in memory; it took 90 s and 2.17 GB before);
* ``data check`` of a header plus one 200 MB line (refused as that line is read; 54 s and 1.76 GB before);
* ``sweep`` of a 1,000,000-cell spec (refused from its axes' lengths; nothing for 120 s before);
* ``python -c pass`` for scale.

Prints wall seconds and peak RSS (median, min, max) against the targets (2 s and 200 MB for the garbage files,
1 s for the grid: the median wall time and the largest RSS are held to them) and writes JSON. Every case must
exit 2 with one line.

    PYTHONPATH=src python benchmarks/bad_input_bench.py [--repeats 3 --out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from common import RESULTS, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

SIZE = 200_000_000
TARGETS = {"garbage lines": (2.0, 200), "one giant line": (2.0, 200), "1,000,000-cell grid": (1.0, None)}


def make_inputs(folder: Path) -> dict[str, list[str]]:
    """The bad files and the command lines that read them."""
    line = "lorem ipsum dolor sit amet, consectetur adipiscing, elit sed do, eiusmod tempor\n"
    lines, giant = (line * (2**20 // len(line))).encode(), b"x" * 2**20  # written a MiB at a time: a child's
    for name, chunk in (("garbage.csv", lines), ("giant.csv", giant)):  # peak RSS starts from this process's
        with open(folder / name, "wb") as fh:
            fh.write(b"timestamp,open,high,low,close\n")
            for _ in range(SIZE // len(chunk)):
                fh.write(chunk)
    axis = ", ".join(str(i) for i in range(1000))
    fees = ", ".join(f"{i / 1e6:g}" for i in range(1000))
    (folder / "grid.toml").write_text(f'name = "grid"\n[data]\nsymbols = ["SP500"]\n[grid]\nseed = [{axis}]\n'
                                      f"fee = [{fees}]\n")
    cli = [sys.executable, "-m", "marketcast.commands"]
    return {"python -c pass": [sys.executable, "-c", "pass"],
            "garbage lines": [*cli, "data", "check", str(folder / "garbage.csv")],
            "one giant line": [*cli, "data", "check", str(folder / "giant.csv")],
            "1,000,000-cell grid": [*cli, "sweep", str(folder / "grid.toml"), "--local", "--store",
                                    str(folder / "runs")]}


def run(argv: list[str], env: dict) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) and exit code of one process (its own rusage, from wait4)."""
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 2):
        raise SystemExit(f"{' '.join(argv)} exited {child.returncode}: {child.stderr.read().decode()[-300:]}")
    return wall, usage.ru_maxrss / 1024, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "bad_input_bench.json"))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    console = Console()
    rows, report = [], {"repeats": args.repeats, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cases = make_inputs(Path(tmp))
        for name, argv in cases.items():
            runs = [run(argv, env) for _ in range(args.repeats)]
            walls, rss = [r[0] for r in runs], [r[1] for r in runs]
            codes = sorted({r[2] for r in runs})
            target_s, target_mb = TARGETS.get(name, (None, None))
            fast = target_s is None or statistics.median(walls) <= target_s
            ok = fast and (target_mb is None or max(rss) <= target_mb)
            report["cases"][name] = {"wall_s": walls, "peak_rss_mb": rss, "exit_codes": codes,
                                     "target_s": target_s, "target_mb": target_mb, "met": ok}
            rows.append([name, f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})",
                         f"{statistics.median(rss):.0f} ({min(rss):.0f}-{max(rss):.0f})", ",".join(map(str, codes)),
                         "—" if target_s is None else f"≤ {target_s:g} s" + (f", {target_mb} MB" if target_mb else ""),
                         "—" if target_s is None else ("yes" if ok else "NO")])
    table = Table(title=f"bad input refused (median (min-max) of {args.repeats}; load {os.getloadavg()[0]:.2f})")
    for column in ("case", "wall s", "peak RSS MB", "exit", "target", "met"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    write_report(args.out, report, console)


if __name__ == "__main__":
    main()
