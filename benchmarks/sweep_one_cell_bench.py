"""Benchmark: a sweep of one forecast job per cell (200 symbols, one cell each, baseline, 8 windows, context 64,
32 samples), the cheapest shape for Ray, against ``--local``:

* a 2-node Ray cluster on this machine (a head and a second raylet, 1 CPU each, token authentication, started
  the way tests/sweep/test_sweep_cluster.py starts its cluster), joined with ``--address`` as ``sweep
  --address`` does (the connection counted), run alternately with ``--local`` in ``--pairs`` pairs: each pair's
  ratio, then their median (issue 48's row: at most 1.1x);
* unless ``--no-local-ray``, a local Ray with 2 CPUs on new and then warm workers (start-up not counted).

Every Ray store must hold the rows of the first ``--local`` store ("stores equal"); the load average is recorded
with each row (other jobs share the machine). Rows go to benchmarks/results/sweep_one_cell_bench.json.

    PYTHONPATH=src python benchmarks/sweep_one_cell_bench.py     (PYTHONPATH reaches the Ray workers too)
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
# the cluster's token, in the environment before Ray is imported (Ray reads it once); the local Ray rows then
# run with token authentication too
os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))

import ray  # noqa: E402
from common import RowReport  # noqa: E402
from rich.console import Console  # noqa: E402
from sweep_bench import comparable, timed, write_data  # noqa: E402

from marketcast.runs.store import RunStore  # noqa: E402
from marketcast.sweep.cluster_kit import NODES, free_port, stop  # noqa: E402
from marketcast.sweep.execute import connect, shutdown  # noqa: E402
from marketcast.sweep.spec import load_spec  # noqa: E402

WINDOWS, CONTEXT = 8, 64
RAY_BIN = str(Path(sys.executable).with_name("ray"))


class TwoNodes:
    """A head and a second raylet on this machine, 1 CPU each, with token authentication (this process's
    ``RAY_AUTH_*``, so ``connect`` joins it as a user would)."""

    def __init__(self) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.temp = tempfile.mkdtemp(prefix="r1c-", dir="/tmp")  # short: Ray's socket paths
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> TwoNodes:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
        port = self.address.rsplit(":", 1)[1]
        try:
            self.procs.append(subprocess.Popen(
                [RAY_BIN, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                 f"--temp-dir={self.temp}", "--block"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self._wait_for("1 1", env)
            self.procs.append(subprocess.Popen([RAY_BIN, "start", f"--address={self.address}", "--num-cpus=1",
                                                "--block"], env=env, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
            self._wait_for("2 2", env)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_for(self, nodes_cpus: str, env: dict) -> None:
        deadline, found = time.monotonic() + 180, ""
        while time.monotonic() < deadline and found != nodes_cpus:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("ray start ended early")
            done = subprocess.run([sys.executable, "-c", NODES.format(address=self.address)], env=env,
                                  capture_output=True, text=True, timeout=90, check=False)
            found = done.stdout.strip()
            time.sleep(0.5)
        if found != nodes_cpus:
            raise RuntimeError(f"the cluster did not come up: {found!r}, wanted {nodes_cpus!r} (nodes, CPUs)")

    def __exit__(self, *_) -> None:
        for proc in reversed(self.procs):
            stop(proc)


def _equal(folder: Path, way: str) -> bool:
    reference = comparable(RunStore(folder / "local-1")).drop(columns="kind")
    return comparable(RunStore(folder / way)).drop(columns="kind").equals(reference)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symbols", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=3, help="alternate --local / 2-node cluster pairs")
    parser.add_argument("--no-local-ray", action="store_true", help="skip the local Ray (2 CPUs) rows")
    parser.add_argument("--out", default="sweep_one_cell_bench.json")
    args = parser.parse_args()
    console = Console()
    folder = Path(tempfile.mkdtemp(prefix="sweep-one-cell-"))
    (folder / "bars").mkdir()
    write_data(folder / "bars", args.symbols, CONTEXT + WINDOWS + 60)
    path = folder / "spec.toml"
    path.write_text(f'[data]\ndir = "bars"\n\n[options]\nwindows = {WINDOWS}\ncontext = {CONTEXT}\n'
                    'num_samples = 32\n\n[grid]\nfill_mode = ["touch"]\n')
    spec = load_spec(path)
    report = RowReport(args.out, ["row", "seconds", "÷ --local", "stores equal", "load (1 min)"],
                       {"benchmark": "sweep_one_cell_bench", "cells": len(spec.cells()), "windows": WINDOWS,
                        "context": CONTEXT, "num_samples": 32}, console)

    def row(what: str, way: str, seconds: float, local_s: float | None) -> float | None:
        ratio = seconds / local_s if local_s else None
        equal = None if way.startswith("local-") else _equal(folder, way)
        load = os.getloadavg()[0]
        report.add({"what": what, "store": way, "seconds": seconds, "ratio_to_local": ratio, "stores_equal": equal},
                   [what, f"{seconds:.2f} s", f"{ratio:.2f}x" if ratio else "", str(equal) if equal is not None else "",
                    f"{load:.2f}"])
        return ratio

    ratios, equal = [], True
    with TwoNodes() as cluster:
        for n in range(1, args.pairs + 1):
            local_s, _ = timed(spec, RunStore(folder / f"local-{n}"), local=True)
            row(f"pair {n}: --local", f"local-{n}", local_s, None)
            cluster_s, _ = timed(spec, RunStore(folder / f"cluster-{n}"), address=cluster.address)
            ratios.append(row(f"pair {n}: 2-node cluster, --address", f"cluster-{n}", cluster_s, local_s))
            equal &= _equal(folder, f"cluster-{n}")
    console.print(f"2-node cluster ÷ --local, {args.pairs} pairs: " + ", ".join(f"{r:.2f}x" for r in ratios)
                  + f"; median {statistics.median(ratios):.2f}x")
    if not args.no_local_ray:
        local_s, _ = timed(spec, RunStore(folder / "local-0"), local=True)
        row("--local", "local-0", local_s, None)
        connect(ray, None, 2)
        try:
            for way in ("new", "warm"):
                seconds, _ = timed(spec, RunStore(folder / way))
                row(f"local Ray 2 CPUs, {way} workers (start not counted)", way, seconds, local_s)
                equal &= _equal(folder, way)
        finally:
            shutdown(ray)
    report.finish(cluster_ratios=ratios, cluster_median_ratio=statistics.median(ratios), stores_equal=equal)
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
