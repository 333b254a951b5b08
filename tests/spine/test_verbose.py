"""Numbers first: the default backtest fits one screen per symbol, ``--verbose`` prints every table with its notes,
and an unknown level is one line and exit 2 before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "MARKETCAST_RUN_STORE": str(cwd / "runs")}  # no COLUMNS: piped output, as a log sees it
    return subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def lines(done: subprocess.CompletedProcess) -> list[str]:
    return done.stdout.splitlines() + done.stderr.splitlines()


def test_default_run_prints_at_most_40_lines_and_verbose_prints_the_notes(tmp_path):
    plain = run("--output-dir", str(tmp_path / "a"), cwd=tmp_path)  # 2 embedded symbols x 70 windows, baseline
    assert plain.returncode == 0, plain.stderr
    assert "[1/4] backtest" in plain.stderr  # the progress lines print on a pipe too, and count
    assert len(lines(plain)) <= 40, "\n".join(lines(plain))
    for symbol in ("SP500", "NASDAQ"):
        assert f"{symbol} verdict" in plain.stdout
    assert "Multiple testing" not in plain.stdout and "DSR pick (Bailey" not in plain.stdout
    verbose = run("--output-dir", str(tmp_path / "b"), "--verbose", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    # what moved behind --verbose: every table and its notes, said once per table
    for text in ("In sample: 8 strategies", "Multiple testing: is the best better than luck?", "DSR pick (Bailey",
                 "Calibration of baseline for bar t+1", "Walk-forward: at each bar"):
        assert text in verbose.stdout, text
    assert len(lines(verbose)) > 3 * len(lines(plain))
    # the numbers the default cut are still in the JSON, the same with and without --verbose
    for symbol in ("SP500", "NASDAQ"):
        a, b = (json.loads((tmp_path / d / "latest" / f"{symbol}.json").read_text()) for d in ("a", "b"))
        for doc in (a, b):  # when and how fast: the only keys that differ between two runs
            del doc["generated_at"], doc["forecast_meta"]["latency_s"]
        assert a == b and a["selection"]["dsr_pick"] is not None


def test_an_unknown_verbose_level_is_one_line_and_exit_2_before_any_work(tmp_path):
    for flags in (("-vv",), ("--verbose", "--verbose"), ("-vvv",)):
        done = run("--output-dir", str(tmp_path / "out"), *flags, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "--verbose" in done.stderr and "is unknown" in done.stderr
        assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
