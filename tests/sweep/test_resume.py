"""A sweep killed with SIGKILL at several points and resumed gives the store an uninterrupted run gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

import marketcast
from marketcast.runs.store import RunStore
from marketcast.sweep.runner import run_sweep
from marketcast.sweep.spec import load_spec

from .helpers import write_bars

SPEC = """
[data]
dir = "bars"

[options]
windows = 40
context = 64
num_samples = 64

[grid]
fill_mode = ["touch", "penetrate"]
point = ["median", "mean"]

[ray]
flush_cells = 1
cells_per_task = 1
whole_jobs = false
"""  # jobs split, a part per cell (whole jobs come back a task of forecast calls at a time)
VOLATILE = ["run_id", "finished_at", "seconds", "record"]


def _sweep(spec: Path, store: Path, address: str, *extra: str) -> subprocess.Popen:
    src = str(Path(marketcast.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "marketcast.commands", "sweep", str(spec), "--store", str(store),
                             "--address", address, *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _kill_after(proc: subprocess.Popen, store: Path, parts: int) -> None:
    """SIGKILL ``proc`` once the store holds ``parts`` parts (0: once the run exists)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        runs = list(store.glob("*/run.json"))
        if runs and len(list(store.glob("*/part-*.parquet"))) >= parts:
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.stderr.read()}"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def _rows(store: RunStore) -> pd.DataFrame:
    (run,) = store.run_ids()
    rows = store.query("SELECT * FROM rows", run_ids=[run]).drop(columns=VOLATILE)
    rows["strategy"] = rows["strategy"].fillna("")
    return rows.sort_values(["cell_index", "strategy"]).reset_index(drop=True)


def test_killed_sweeps_resume_to_the_store_of_an_uninterrupted_run(tmp_path, ray_address):
    write_bars(tmp_path / "bars", [f"S{i}" for i in range(6)], n=120)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    reference = RunStore(tmp_path / "reference")
    whole = run_sweep(load_spec(spec), reference)
    assert (whole.planned, whole.ok, whole.failed) == (24, 24, 0)

    killed = RunStore(tmp_path / "killed")
    _kill_after(_sweep(spec, killed.root, ray_address), killed.root, parts=0)  # as soon as the run exists
    _kill_after(_sweep(spec, killed.root, ray_address, "--resume"), killed.root, parts=8)  # half-way, resumed
    (run,) = killed.run_ids()
    before = killed.finished(run)
    assert 8 <= len(before) < 24
    resumed = run_sweep(load_spec(spec), killed, resume=True)
    assert (resumed.run_id, resumed.skipped, resumed.ok) == (run, len(before), 24)

    cells = killed.query("SELECT cell_id FROM cells")
    assert len(cells) == 24 and cells["cell_id"].is_unique  # no cell counted twice
    pd.testing.assert_frame_equal(_rows(killed), _rows(reference))
    parts = killed.parts(run)
    again = run_sweep(load_spec(spec), killed, resume=True)  # nothing left to do: no new part
    assert (again.skipped, again.ok) == (24, 24) and killed.parts(run) == parts
