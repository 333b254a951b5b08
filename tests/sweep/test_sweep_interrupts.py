"""SIGTERM at seeded random moments of a real ``marketcast sweep``: exit 143 (or 0 when it was done first), the run
marked interrupted (never left ``running``), no temporary file, Ray shut down, and ``sweep --resume`` finishes
the very run that was stopped."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import pytest

from marketcast.runs.store import RunStore
from tests.spine.test_interrupts import TERMINATED, runs_without_rows, start, temporaries, terminate_at

from .helpers import small_spec, write_bars

SEED = 143
MOMENTS = 20  # the count; each stopped sweep is checked, and every RESUME_EVERY-th is resumed to the end
RESUME_EVERY = 4  # a sweep process costs ~10 s here: 20 stops and 5 resumes take about 4 minutes
SPEC = small_spec(grid='point = ["median", "mean"]', tail="[ray]\nflush_cells = 1\ncells_per_task = 1\n")


def _sweep(spec: Path, store: Path, address: str | None, *extra: str):
    where = ["--address", address] if address else ["--num-cpus", "2"]
    return start(["sweep", str(spec), "--store", str(store), *where, *extra], {})


def _only_run(store: Path) -> dict | None:
    infos = [json.loads(p.read_text()) for p in store.glob("*/run.json")]
    assert len(infos) <= 1, infos
    return infos[0] if infos else None


def _check_after(tmp_path: Path, store: Path, code: int, err: str, where: str) -> dict | None:
    assert code in (0, 143), where
    if code == 143:
        assert err.splitlines()[-1] == TERMINATED and "Traceback" not in err, where
    assert temporaries(tmp_path) == [], where
    assert runs_without_rows(store) == [], where
    info = _only_run(store)
    if info is not None:
        assert info["status"] in (("done",) if code == 0 else ("planned", "interrupted", "done")), where
    return info


def _resume_and_check(spec: Path, store: Path, address: str | None, info: dict | None, where: str) -> None:
    proc = _sweep(spec, store, address, *(["--resume"] if info else []))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"{where}: {err}"
    finished = _only_run(store)
    assert finished["status"] == "done" and (info is None or finished["run_id"] == info["run_id"]), where
    cells = RunStore(store).query("SELECT count(DISTINCT cell_id) AS n FROM cells", run_ids=[finished["run_id"]])
    assert int(cells["n"].iloc[0]) == finished["cells_total"], where


@pytest.mark.slow
def test_sigterm_at_random_moments_of_a_sweep_then_resume(tmp_path, ray_address):
    write_bars(tmp_path / "bars", ["S0", "S1"], n=60)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    proc = _sweep(spec, tmp_path / "whole", ray_address)
    began = time.monotonic()
    _, err = proc.communicate(timeout=600)
    length = time.monotonic() - began
    assert proc.returncode == 0, err
    assert _only_run(tmp_path / "whole")["status"] == "done"

    rng = random.Random(SEED)
    codes = []
    for moment in range(MOMENTS):
        store = tmp_path / f"store{moment}"
        delay = rng.uniform(0, length)
        code, err = terminate_at(_sweep(spec, store, ray_address), delay)
        codes.append(code)
        where = f"moment {moment}, {delay:.2f} s: exit {code}, stderr {err!r}"
        info = _check_after(tmp_path, store, code, err, where)
        if moment % RESUME_EVERY == RESUME_EVERY - 1:
            _resume_and_check(spec, store, ray_address, info, where)
    assert codes.count(143) >= 2, codes


def _descendants(pid: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        of = todo.pop()
        children = [p for p, parent in parents.items() if parent == of]
        found.update(children)
        todo += children
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_sweep_on_its_own_ray_shuts_ray_down_on_sigterm(tmp_path):
    """Without --address the sweep starts Ray itself: SIGTERM while it starts Ray or runs the cells (as soon as Ray's
    processes are up; 12 symbols keep it busy for longer) still shuts Ray down."""
    write_bars(tmp_path / "bars", [f"S{i}" for i in range(12)], n=60)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    store = tmp_path / "store"
    proc = _sweep(spec, store, None)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        info = _only_run(store)
        if info and info["status"] == "running" and len(_descendants(proc.pid)) >= 2:  # Ray's processes are up
            break
        time.sleep(0.005)
    assert proc.poll() is None, proc.communicate()[1]
    ray_processes = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    info = _check_after(tmp_path, store, proc.returncode, err, f"exit {proc.returncode}, stderr {err!r}")
    assert proc.returncode == 143 and info["status"] == "interrupted", err
    deadline = time.monotonic() + 60  # ray.shutdown stopped them; a worker notices its raylet is gone
    while time.monotonic() < deadline and any(_alive(p) for p in ray_processes):
        time.sleep(0.1)
    assert [p for p in ray_processes if _alive(p)] == []
    _resume_and_check(spec, store, None, info, "after the local Ray")
