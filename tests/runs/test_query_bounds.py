"""Every query bounded and interruptible (issue 56 item 2), through the installed command: ``runs query`` under
a time limit and a row limit and stopped by SIGINT/SIGTERM; store and settings files that are FIFOs or devices;
a Ray address that does not answer; option values that would make the work unbounded. Each: its exit code, one
line, nothing left behind. The wall-clock figures (within the limit + 2 s, within 2 s of SIGINT) are the
benchmark's (benchmarks/query_bounds.py); here a generous pytest-timeout only guards against a hang."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import marketcast
from marketcast.commands import main
from marketcast.runs.read import StoreReader
from tests.spine.test_interrupts import handles_sigterm  # the command's own handlers are in: it runs
from tests.spine.test_special_outputs import make_special as special_file

ENDLESS = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
HUGE = "SELECT * FROM range(10000000000000)"  # 10^13 rows
CROSS = "SELECT count(*) FROM range(100000) a, range(100000) b, range(100000) c"


def one_line(capsys, argv: list[str], code: int) -> tuple[str, str]:
    """(the one stderr line, stdout) of ``marketcast ARGV``, which must end with ``code``."""
    assert main(argv) == code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0], out


def make_special(path: Path, kind: str) -> Path:
    return special_file(path, kind, (1, 5))  # a device with the numbers of /dev/zero, which streams without end


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- runs query: time limit, row limit, signals ------------------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize("sql", [ENDLESS, CROSS])
def test_an_endless_query_stops_at_its_time_limit_with_one_line(tmp_path, capsys, sql):
    line, out = one_line(capsys, ["runs", "query", "--store", str(tmp_path / "runs"), "--timeout", "1", sql], 2)
    assert line == ("error: query stopped at its time limit of 1 s; narrow it (a WHERE on run_id or symbol, a "
                    "LIMIT) or give it more time with --timeout SECONDS")
    assert out == "" and listing(tmp_path) == []


@pytest.mark.timeout(120)
def test_rows_past_the_row_limit_are_cut_and_said_so(tmp_path, capsys):
    line, out = one_line(capsys, ["runs", "query", "--store", str(tmp_path / "runs"), "--max-rows", "3", "--json",
                                  "SELECT * FROM range(10) ORDER BY range DESC"], 0)
    assert [row["range"] for row in json.loads(out)] == [9, 8, 7]  # the first 3 in the query's own order
    assert line == "warning: the query returned more than 3 rows; showing the first 3 (add a LIMIT, or raise --max-rows)"
    # 10^13 rows: the limit stops DuckDB producing them, so the answer comes at once, not at the time limit
    line, out = one_line(capsys, ["runs", "query", "--store", str(tmp_path / "runs"), "--max-rows", "2", "--json",
                                  HUGE], 0)
    assert [row["range"] for row in json.loads(out)] == [0, 1] and "more than 2 rows" in line
    assert main(["runs", "query", "--store", str(tmp_path / "runs"), "--max-rows", "10", "--json",
                 "SELECT * FROM range(10)"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 10 and err == ""  # exactly the limit: nothing was cut, nothing said


@pytest.mark.parametrize("sql", ["SELECT 1 AS x;", "SELECT 1 AS x; -- the end", "SELECT 1 AS x -- one\n;",
                                 "SELECT 1 AS x;;", "SELECT 1 AS x /* ; */"])
def test_a_closing_semicolon_or_comment_still_reads_under_the_row_limit(tmp_path, capsys, sql):
    assert main(["runs", "query", "--store", str(tmp_path / "runs"), "--json", sql]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [{"x": 1}] and err == ""
    assert main(["runs", "query", "--store", str(tmp_path / "runs"), "--json", "SELECT ';' AS x"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"x": ";"}]  # a ';' inside a string is no statement's end


@pytest.mark.parametrize("option, value", [("--timeout", "0"), ("--timeout", "86401"), ("--timeout", "nan"),
                                           ("--max-rows", "0"), ("--max-rows", "10000001")])
def test_the_limits_themselves_are_bounded(tmp_path, capsys, option, value):
    line, _ = one_line(capsys, ["runs", "query", "--store", str(tmp_path / "runs"), option, value, "SELECT 1"], 2)
    assert line.startswith(f"error: Invalid value for '{option}'")


def start_query(store: Path, sql: str) -> subprocess.Popen:
    src = str(Path(marketcast.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "marketcast.commands", "runs", "query", "--store", str(store),
                             "--timeout", "200", sql], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum, code, line", [
    (signal.SIGINT, 130, "error: interrupted"),
    (signal.SIGTERM, 143, "error: terminated (SIGTERM); temporary files removed"),
])
@pytest.mark.parametrize("sql", [ENDLESS, HUGE.replace("*", "sum(range)"), CROSS])
def test_a_signal_stops_a_running_query_with_its_code_and_one_line(tmp_path, signum, code, line, sql):
    proc = start_query(tmp_path / "runs", sql)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and not handles_sigterm(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.0)  # the store opened, the query running on its worker thread
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # a failed wait: never leave the query running
            proc.kill()
            proc.communicate()
    assert (proc.returncode, err.strip().splitlines(), out) == (code, [line], "")
    assert listing(tmp_path) == []


# --- files the store and the settings read -----------------------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_a_special_run_json_is_named_damage_not_a_hang(tmp_path, capsys, kind):
    root = tmp_path / "runs"
    (root / "r1").mkdir(parents=True)
    node = make_special(root / "r1" / "run.json", kind)
    line, _ = one_line(capsys, ["runs", "list", "--store", str(root)], 0)
    assert line.startswith("warning: skipped 1 damaged file of the run store: ") and str(node) in line
    line, _ = one_line(capsys, ["runs", "show", "r1", "--store", str(root)], 3)
    assert line.startswith(f"error: {node} cannot be read (is a ") and "not a regular file" in line
    assert listing(tmp_path) == ["runs", "runs/r1", "runs/r1/run.json"]


@pytest.mark.timeout(60)
def test_a_fifo_as_a_runs_lock_is_no_writer_and_no_hang(tmp_path):
    (tmp_path / "r1").mkdir()
    os.mkfifo(tmp_path / "r1" / ".lock")
    assert StoreReader(tmp_path).writing("r1") is False


@pytest.mark.timeout(120)
def test_fifos_as_a_runs_part_and_manifest_are_skipped_and_named(tmp_path, capsys):
    root = tmp_path / "runs"
    (root / "r1").mkdir(parents=True)
    (root / "r1" / "run.json").write_text('{"run_id": "r1", "kind": "sweep", "status": "done", '
                                         '"created_at": "2030-01-01T00:00:00"}')
    part, manifest = root / "r1" / "part-0001.parquet", root / "r1" / "manifest.json"
    os.mkfifo(part)
    os.mkfifo(manifest)
    line, out = one_line(capsys, ["runs", "query", "--store", str(root), "--json", "SELECT count(*) AS n FROM rows"], 0)
    assert json.loads(out) == [{"n": 0}]
    assert line == (f"warning: skipped 2 damaged files of the run store: {manifest} cannot be read (is a named pipe "
                    f"(FIFO), not a regular file); {part} is a named pipe (FIFO), not a regular file; move them away "
                    "or re-run what wrote it")


def test_a_fifo_as_the_paper_clock_file_is_one_line(tmp_path):
    from marketcast.errors import ConfigError
    from marketcast.trade.launch import file_clock

    os.mkfifo(tmp_path / "clock")
    with pytest.raises(ConfigError, match=r"--clock-file .*clock: is a named pipe \(FIFO\), not a regular file"):
        file_clock(tmp_path / "clock")()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_a_special_settings_file_is_one_line_not_a_hang(tmp_path, capsys, monkeypatch, kind):
    node = make_special(tmp_path / "env", kind)
    line, _ = one_line(capsys, ["compile", "status", "--env-file", str(node)], 2)
    assert line.startswith(f"error: {node}: is a ") and line.endswith("pass a settings file of KEY=VALUE lines")
    monkeypatch.chdir(tmp_path)  # .env.compile is read from the working folder
    make_special(tmp_path / ".env.compile", kind)
    line, _ = one_line(capsys, ["trade", "replay", "--start", "2020-01-02", "--end", "2020-02-03",
                                "--state-dir", str(tmp_path / "state")], 2)
    assert line.startswith("error: .env.compile: is a ")
    assert listing(tmp_path) == [".env.compile", "env"]  # no state folder


# --- Ray's address -----------------------------------------------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.timeout(120)
def test_a_ray_address_that_does_not_answer_is_one_line_before_ray(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "spec.toml"
    spec.write_text('[grid]\nfill_mode = ["touch"]\n')
    store = ["--store", str(tmp_path / "runs")]
    monkeypatch.setenv("RAY_ADDRESS", "banana:99999")
    line, _ = one_line(capsys, ["sweep", str(spec), *store], 2)
    assert line.startswith("error: Ray address 'banana:99999': port 99999 is not 1 to 65535")
    port = _closed_port()
    line, _ = one_line(capsys, ["sweep", str(spec), *store, "--address", f"127.0.0.1:{port}"], 6)
    assert line.startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port} (Connection refused)")
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert listing(tmp_path) == ["spec.toml"]  # no store, no run


# --- option values that make the work unbounded ------------------------------------------------------------------

@pytest.mark.parametrize("argv, option", [
    (["backtest", "--samples", "1000000000"], "--samples"),
    (["forecast", "SP500", "--samples", "100001"], "--samples"),
    (["forecast", "SP500", "--horizon", "10001"], "--horizon"),
    (["finetune", "--until", "2016-12-30", "--out", "tuned", "--batch-size", "65537"], "--batch-size"),
    (["sweep", "spec.toml", "--max-cells", "10000001"], "--max-cells"),
])
def test_unbounded_option_values_are_refused_in_one_line(tmp_path, capsys, monkeypatch, argv, option):
    monkeypatch.chdir(tmp_path)
    line, _ = one_line(capsys, argv, 2)
    assert line.startswith(f"error: Invalid value for '{option}'") and "less than or equal to" in line
    assert listing(tmp_path) == []


def test_a_specs_num_samples_past_the_limit_is_refused(tmp_path, capsys):
    from marketcast.backtest.config import BacktestConfig
    from marketcast.errors import ConfigError

    with pytest.raises(ConfigError, match=r"--samples must be 1 to 100,000, got 1,000,000,000"):
        BacktestConfig(num_samples=1_000_000_000)
    assert BacktestConfig(num_samples=100_000).num_samples == 100_000
