"""SIGTERM at seeded random moments of a real ``marketcast backtest --html`` process: it ends with 143 (or 0 when
it was done first), leaves no temporary file or lock, run folders that are whole (the new one there or not at
all), no run-store run without rows that is not marked planned or interrupted, and the next command works."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import marketcast
from marketcast.signals import handles
from marketcast.report.page import bundle_name

SEED = 20261126
MOMENTS = 20
ARGS = ["backtest", "SP500", "--windows", "6", "--samples", "16", "--context", "64", "--no-spa", "--html"]
OUTPUTS = sorted(["SP500.json", "report.html", "summary.md", "trades.csv"])  # the page loads the root's bundle
TERMINATED = "error: terminated (SIGTERM); temporary files removed"
# a signal after the run was recorded says so: the run and its reports stay, whole
RECORDED = re.compile(r"error: terminated \(SIGTERM\) after the run finished and was recorded \(backtest-[0-9a-f-]+\); "
                      r"its reports are in .+/out/backtest-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}")


def handles_sigterm(pid: int) -> bool:
    return handles(pid, signal.SIGTERM)


def start(args: list[str], env: dict) -> subprocess.Popen:
    src = str(Path(marketcast.__file__).resolve().parents[1])
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "marketcast.commands", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def wait_until_running(proc: subprocess.Popen) -> bool:
    """True once ``proc`` handles SIGTERM; False when it ended first."""
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if handles_sigterm(proc.pid):
            return True
        time.sleep(0.002)
    assert proc.poll() is not None, "the command never installed its SIGTERM handler"
    return False


def terminate_at(proc: subprocess.Popen, delay: float) -> tuple[int, str]:
    """SIGTERM ``delay`` seconds after ``proc`` started its command; its exit code and stderr."""
    if wait_until_running(proc):
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def runs_without_rows(store: Path) -> list[str]:
    """Runs with a run.json, no part and a status other than planned/interrupted: a view would show them as
    finished with nothing in them."""
    bad = []
    for info_path in store.glob("*/run.json"):
        info = json.loads(info_path.read_text())
        written = [*info_path.parent.glob("part-*.parquet"), *info_path.parent.glob("compact-*.parquet")]
        if not written and info.get("status") not in ("planned", "interrupted"):
            bad.append(f"{info['run_id']} ({info.get('status')})")
    return bad


def check_whole(out: Path) -> None:
    """The root holds the shared Plotly file, ``latest`` and whole run folders only (each named by a run the store
    holds with its rows, holding that run's files and nothing else); ``latest`` names the newest."""
    names = sorted(p.name for p in out.iterdir())
    runs = [n for n in names if n.startswith("backtest-")]
    assert runs and names == sorted([*runs, "latest", bundle_name()]), names  # no stage, lock or temporary link
    assert os.readlink(out / "latest") == runs[-1]
    for run in runs:
        assert sorted(p.name for p in (out / run).iterdir()) == OUTPUTS
        assert json.loads((out / run / "SP500.json").read_text())["runs"] == 6
        assert (out / run / "report.html").read_text().rstrip().endswith("</html>")
        assert (out / run / "trades.csv").stat().st_size > 0 and (out / run / "summary.md").stat().st_size > 0
        assert list((out.parent / "runs" / run).glob("part-*.parquet")), run  # recorded before it appeared


@pytest.mark.slow
def test_sigterm_at_random_moments_of_a_backtest_leaves_nothing_half_written(tmp_path):
    env = {"MARKETCAST_RUN_STORE": str(tmp_path / "runs")}
    args = [*ARGS, "--output-dir", str(tmp_path / "out")]
    begun = time.monotonic()
    proc = start(args, env)
    assert wait_until_running(proc)
    began = time.monotonic()
    _, err = proc.communicate(timeout=600)
    length = time.monotonic() - began  # how long the command runs here, now: the moments spread over it
    assert proc.returncode == 0, err
    check_whole(tmp_path / "out")

    rng = random.Random(SEED)
    codes = []
    for moment in range(MOMENTS):
        delay = rng.uniform(0, 1.1 * length)
        code, err = terminate_at(start(args, env), delay)
        codes.append(code)
        where = f"moment {moment}, {delay:.2f} s: exit {code}, stderr {err!r}"
        assert code in (0, 143), where
        if code == 143:
            said = [line for line in err.splitlines() if not line.startswith("[")]  # less the step lines
            assert said == [TERMINATED] or (len(said) == 1 and RECORDED.fullmatch(said[0])), where
        assert temporaries(tmp_path) == [], where
        assert not (tmp_path / ".out.lock").exists(), where
        check_whole(tmp_path / "out")  # the previous folder or the new one, never a mix, never gone
        assert runs_without_rows(tmp_path / "runs") == [], where
    assert codes.count(143) >= MOMENTS // 4, codes  # the moments fall inside the command, most of them

    proc = start(args, env)  # and the next command works
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    check_whole(tmp_path / "out")
    listing = start(["runs", "list", "--store", str(tmp_path / "runs")], env)
    _, err = listing.communicate(timeout=600)
    assert listing.returncode == 0, err
    assert time.monotonic() - begun < 850  # inside the suite's 900 s timeout
