"""Nothing half-written, every check before the work (issue 56, through the installed command): a backtest, a sweep
or a replay that meets a full disk exits 3 in one line and leaves no run, no lock and no state folder behind; an
output that cannot be written is refused before the replay; a settings file that is not KEY=VALUE lines is exit 2
naming its first bad line; a ``journal.db`` that is a folder or a link to a FIFO or a device is exit 3 (the
README's "a corrupt or foreign state database").

The full disk is a real one: a small tmpfs mounted in the test's own folder, filled to a given number of free
pages. Where the machine does not let this process mount one, those tests are skipped with the reason
(tests/spine/test_disk_full.py meets the writers with a fake write that raises ENOSPC instead). FIFOs and device
nodes are made in the test's folder, never under /dev."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import marketcast
from tests.sweep.helpers import small_spec, write_bars

SRC = str(Path(marketcast.__file__).resolve().parents[1])
STAGE = re.compile(r"^\[\d+/\d+\] ")  # a piped command's progress line
REPLAY = ["trade", "replay", "--from", "2017-03-01", "--to", "2017-03-10"]
PAGE = 4096


def marketcast_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    environ = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
               **(env or {})}
    return subprocess.run([sys.executable, "-m", "marketcast.commands", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=timeout)


def one_error(done: subprocess.CompletedProcess, code: int) -> str:
    """The one ``error:`` line of ``done`` (progress lines aside), after checking its exit code."""
    lines = [line for line in done.stderr.splitlines() if not STAGE.match(line)]
    assert done.returncode == code, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    return lines[0]


def everything(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.fixture
def small_disk(tmp_path):
    """``fill(free_pages)``: a 512 KiB tmpfs at ``tmp_path/disk`` with only ``free_pages`` pages left free."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; tests/spine/test_disk_full.py fakes the full disk instead")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here ({mounted.stderr.strip()}); tests/spine/test_disk_full.py "
                    "fakes the full disk instead")

    def fill(free_pages: int) -> Path:
        filler = disk / ".filler"
        filler.write_bytes(b"")
        with open(filler, "ab") as fh:
            while os.statvfs(disk).f_bavail > free_pages:
                fh.write(b"\0" * PAGE)
                fh.flush()
        assert os.statvfs(disk).f_bavail == free_pages
        return disk

    try:
        yield fill
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


# --- 1. a full disk: no planned run, no interrupted run without cells, no lock, no state --------------------

def test_a_backtest_whose_run_store_fills_up_exits_3_and_records_no_run(tmp_path, small_disk):
    disk = small_disk(2)  # run.json fits, its part does not
    store, out = disk / "runs", tmp_path / "bt"
    done = marketcast_cli("backtest", "SP500", "-n", "6", "-s", "8", "-c", "32", "--no-spa", "--output-dir", str(out),
                          cwd=tmp_path, env={"MARKETCAST_RUN_STORE": str(store)})
    line = one_error(done, 3)
    assert str(store) in line and ".parquet: cannot write" in line and "No space left on device" in line, line
    assert everything(store) == []  # no run.json listed as planned, no part, no temporary file
    assert everything(out) == []  # no report folder: the run was not recorded
    listed = marketcast_cli("runs", "list", "--json", cwd=tmp_path, env={"MARKETCAST_RUN_STORE": str(store)})
    assert listed.returncode == 0 and listed.stdout.strip() == "[]", listed.stderr


@pytest.mark.parametrize("free_pages", [1, 2])  # run.json does not fit / its first part does not
def test_a_sweep_whose_store_fills_up_leaves_no_run_and_no_lock(tmp_path, small_disk, free_pages):
    disk = small_disk(free_pages)
    write_bars(tmp_path / "bars", ["S0", "S1"], n=60)
    (tmp_path / "spec.toml").write_text(small_spec())
    done = marketcast_cli("sweep", "spec.toml", "--local", "--store", str(disk / "runs"), cwd=tmp_path)
    line = one_error(done, 3)
    assert str(disk / "runs") in line and "No space left on device" in line, line
    assert everything(disk / "runs") == []  # no run.json (planned or interrupted), no .lock, no part


def test_a_sweep_given_a_file_as_its_data_dir_records_nothing(tmp_path):
    write_bars(tmp_path / "bars", ["S0", "S1"], n=60)
    (tmp_path / "spec.toml").write_text(small_spec())
    done = marketcast_cli("sweep", "spec.toml", "--local", "--data-dir", "bars/S0.csv", "--store", "runs",
                          cwd=tmp_path)
    assert "bars/S0.csv: is a file, not a data directory" in one_error(done, 2)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("free_pages", [0, 1, 8, 40])  # the lock, journal.db, its WAL, broker.db meet the full disk
@pytest.mark.parametrize("command", [REPLAY, ["trade", "run", "--once"]])
def test_a_replay_or_a_loop_on_a_full_disk_leaves_no_state_folder(tmp_path, small_disk, free_pages, command):
    disk = small_disk(free_pages)
    state = disk / "new" / "state"
    done = marketcast_cli(*command, "--state-dir", str(state), cwd=tmp_path)
    line = one_error(done, 3)
    assert str(state) in line and ("No space left on device" in line or "disk is full" in line
                                   or "disk I/O error" in line), line
    assert everything(disk) == [".filler"]  # no loop.lock, trade.log, journal.db or broker.db: not even new/


# --- 2. an output that cannot be written is refused before the replay ---------------------------------------

@pytest.mark.parametrize("png", ["/proc/x.png", "fifo.png"])
def test_a_replay_png_that_cannot_be_written_is_refused_before_the_replay(tmp_path, png):
    if png == "fifo.png":
        os.mkfifo(tmp_path / png)
    done = marketcast_cli(*REPLAY, "--state-dir", str(tmp_path / "state"), "--png", png, cwd=tmp_path, timeout=120)
    assert "--png" in one_error(done, 3)
    assert not (tmp_path / "state").exists()  # no journal.db, broker.db or loop.lock
    assert everything(tmp_path) == ([png] if png == "fifo.png" else [])


# --- 3. a settings file that is not KEY=VALUE lines ---------------------------------------------------------

@pytest.mark.parametrize("command", [["status"], ["enable"], ["mode", "default"]])
def test_a_csv_given_as_the_env_file_is_refused_at_its_first_line(tmp_path, command):
    bars = tmp_path / "bars.csv"
    text = "# exported bars\n\ntimestamp,open,high,low,close\n2021-01-04,1,2,0.5,1.5\n"
    bars.write_text(text)
    done = marketcast_cli("compile", *command, "--env-file", str(bars), cwd=tmp_path, timeout=120)
    line = one_error(done, 2)
    assert line.startswith(f"error: {bars}: line 3 is not KEY=VALUE ('timestamp,open,high,low,close')"), line
    assert bars.read_text() == text and everything(tmp_path) == ["bars.csv"]  # untouched, no temporary file


def test_an_env_file_that_is_a_fifo_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "settings.env")
    done = marketcast_cli("compile", "status", "--env-file", "settings.env", cwd=tmp_path, timeout=60)
    assert "settings.env: is a named pipe (FIFO), not a regular file" in one_error(done, 2)


# --- 4. a journal.db that is a folder or a link to a special file: the README's exit 3 ----------------------

def _journal(state: Path, kind: str) -> None:
    state.mkdir()
    journal = state / "journal.db"
    if kind == "folder":
        journal.mkdir()
    elif kind == "link to a fifo":
        os.mkfifo(state.parent / "pipe")
        journal.symlink_to(state.parent / "pipe")
    else:
        try:
            os.mknod(state.parent / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:
            pytest.skip("this process may not create character devices (mknod needs CAP_MKNOD)")
        journal.symlink_to(state.parent / "zero")


@pytest.mark.parametrize("kind, says", [("folder", "is a folder, not a file"),
                                        ("link to a fifo", "is a named pipe (FIFO), not a regular file"),
                                        ("link to a device", "is a character device, not a regular file")])
@pytest.mark.parametrize("command", [["trade", "status"], ["trade", "orders"], REPLAY])
def test_a_journal_that_is_no_file_is_exit_3_and_left_as_it_is(tmp_path, kind, says, command):
    state = tmp_path / "state"
    _journal(state, kind)
    before = everything(tmp_path)
    done = marketcast_cli(*command, "--state-dir", str(state), cwd=tmp_path, timeout=120)
    line = one_error(done, 3)
    assert f"{state / 'journal.db'}: {says}" in line, line
    assert everything(tmp_path) == before  # nothing made beside it: no broker.db, loop.lock or trade.log
