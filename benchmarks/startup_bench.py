"""Benchmark: how long marketcast takes to answer, in fresh processes, next to ``python -c pass``.

Runs, interleaved, ``--repeats`` times each: ``python -c pass``, ``python -c "import pandas"``, ``import
marketcast.commands``, ``marketcast --help``, ``marketcast data check`` (the embedded SP500 written as a CSV) and
the default ``make run`` backtest (``marketcast backtest``: SP500 and NASDAQ, 70 windows, the baseline, every
statistic on). Prints wall and CPU seconds (median, min and max: other processes share the machine, so the
spread is part of the answer) against the targets, and each command's paired ratio to ``import pandas`` (the
median over rounds of its wall time over the same round's ``import pandas``: a loaded machine slows both),
then the top imports of ``--help`` and of the backtest by ``python -X importtime``. One warm-up round first
(bytecode and the calendar cache, as after ``make run`` has run once) is not counted. The bytecode is kept
under the run's temporary folder (``PYTHONPYCACHEPREFIX``) even where ``PYTHONDONTWRITEBYTECODE`` is set, so
marketcast's modules are timed as pandas' are (from bytecode) and the source tree gets no ``__pycache__``;
``--env-bytecode`` leaves that to the environment (under ``PYTHONDONTWRITEBYTECODE`` marketcast's modules are
then compiled at every start, while installed packages such as pandas read the bytecode they were installed
with).

    PYTHONPATH=src python benchmarks/startup_bench.py [--repeats 7 --out FILE --env-bytecode]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from common import write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

TARGETS = {"marketcast --help": 0.5, "marketcast backtest": 1.5}  # seconds of wall time, from the issue
RATIO_TARGETS = {"marketcast --help": 0.5, "marketcast backtest": 2.0}  # x `import pandas`, paired (issue 47)
PANDAS = "import pandas"
HEAVY = ("torch", "matplotlib", "scipy", "pandas", "numpy", "exchange_calendars", "arch", "pyarrow")


def commands(folder: Path) -> dict[str, list[str]]:
    from marketcast.data import load_symbol

    csv = folder / "SP500.csv"
    load_symbol("SP500").frame.to_csv(csv)
    cli = [sys.executable, "-m", "marketcast.commands"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        PANDAS: [sys.executable, "-c", "import pandas"],
        "import marketcast.commands": [sys.executable, "-c", "import marketcast.commands"],
        "marketcast --help": [*cli, "--help"],
        "marketcast data check": [*cli, "data", "check", str(csv)],
        "marketcast backtest": [*cli, "backtest", "--output-dir", str(folder / "out")],
    }


def run(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one command; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def top_imports(argv: list[str], env: dict, count: int = 8) -> list[tuple[str, float]]:
    """The ``count`` slowest imports of a command with their cumulative seconds (nested ones excluded)."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):  # a top-level import, with its children
            rows.append((name.strip(), int(cumulative) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:count]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/results/startup_bench.json")
    ap.add_argument("--env-bytecode", action="store_true",
                    help="keep bytecode only as the environment says (PYTHONDONTWRITEBYTECODE: none for marketcast)")
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "120"}
    console = Console(width=150)

    with tempfile.TemporaryDirectory() as tmp:
        if args.env_bytecode:
            bytecode = ("no bytecode kept for marketcast (PYTHONDONTWRITEBYTECODE)" if
                        os.environ.get("PYTHONDONTWRITEBYTECODE") else "bytecode as the environment keeps it")
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            bytecode = "bytecode kept from the warm-up"
        cmds = commands(Path(tmp))
        for argv_ in cmds.values():  # warm-up: bytecode compiled, calendar cached
            run(argv_, env)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
        load = [os.getloadavg()[0]]
        for _ in range(args.repeats):
            for name, argv_ in cmds.items():
                times[name].append(run(argv_, env))
            load.append(os.getloadavg()[0])
        offenders = {name: top_imports(cmds[name], env) for name in ("marketcast --help", "marketcast backtest")}
        probe = "import sys; from marketcast.commands import main; main(['--help']); print(' '.join(sorted(sys.modules)))"
        loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True).stdout
        help_modules = set(loaded.strip().splitlines()[-1].split())

    table = Table(title=f"Start-up, {args.repeats} interleaved runs each ({os.cpu_count()} CPUs, load average "
                        f"{min(load):.1f} .. {max(load):.1f} during the runs; {bytecode})")
    for col in ("command", "wall median s", "wall min .. max s", "CPU median s", "target", "", "x import pandas",
                "target x", ""):
        table.add_column(col, justify="left" if col == "command" else "right")
    summary = {}
    for name, rows in times.items():
        wall, cpu = [w for w, _ in rows], [c for _, c in rows]
        target = TARGETS.get(name)
        verdict = "" if target is None else ("ok" if statistics.median(wall) <= target else "SLOW")
        ratio = statistics.median(w / p for w, (p, _) in zip(wall, times[PANDAS]))  # paired: same round
        ratio_target = RATIO_TARGETS.get(name)
        ratio_verdict = "" if ratio_target is None else ("ok" if ratio <= ratio_target else "SLOW")
        table.add_row(name, f"{statistics.median(wall):.2f}", f"{min(wall):.2f} .. {max(wall):.2f}",
                      f"{statistics.median(cpu):.2f}", "" if target is None else f"<= {target:g}", verdict,
                      f"{ratio:.2f}", "" if ratio_target is None else f"<= {ratio_target:g}", ratio_verdict)
        summary[name] = {"wall_s": wall, "cpu_s": cpu, "wall_median_s": statistics.median(wall),
                         "cpu_median_s": statistics.median(cpu), "target_s": target,
                         "ratio_to_import_pandas": ratio, "ratio_target": ratio_target}
    console.print(table)
    for name, rows in offenders.items():
        console.print(f"[bold]{name}[/]: slowest top-level imports (python -X importtime, cumulative): "
                      + ", ".join(f"{mod} {sec:.3f} s" for mod, sec in rows))
    heavy = sorted({m.split(".")[0] for m in help_modules} & set(HEAVY))
    console.print(f"modules --help imports among {', '.join(HEAVY)}: {', '.join(heavy) or 'none'}")

    report = {"repeats": args.repeats, "load_average": load, "bytecode": bytecode, "commands": summary,
              "top_imports": {k: [{"module": m, "cumulative_s": s} for m, s in v] for k, v in offenders.items()},
              "help_heavy_imports": heavy}
    write_report(args.out, report, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
