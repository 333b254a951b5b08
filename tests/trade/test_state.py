"""The state folder fails closed under real conditions: corrupted bytes, a full database (SQLite's own
SQLITE_FULL via ``max_page_count``), a full disk (/dev/full: a genuine ENOSPC), a second loop (flock)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marketcast.data import load_symbol
from marketcast.errors import ConfigError, StateError
from marketcast.trade.journal.lock import StateLock
from marketcast.trade.journal.state import Intent, Journal

SRC = str(Path(__file__).resolve().parents[2] / "src")


def trade(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``marketcast trade ...`` at 2018-07-20 21:30 UTC, after the close of the data's last bar."""
    env = {**{k: v for k, v in os.environ.items() if k != "ADD_LATEST"}, "PYTHONPATH": SRC, "COLUMNS": "250"}
    clock = cwd / "clock"
    clock.write_text("2018-07-20T21:30:00Z")
    if args[0] == "run":
        args = [*args, "--clock-file", str(clock)]
    return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    for sym in ("SP500", "NASDAQ"):  # history up to a bar whose signals pass the default gates
        load_symbol(sym).frame.loc[:"2018-07-20"].to_csv(folder / f"{sym}.csv")
    return folder


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def intent(n: int) -> Intent:
    return Intent(f"mc-{n:024d}", "2024-01-02T00:00:00+00:00", "maxdiff", "SP500", "buy", 1, "limit", 100.0, None,
                  "day")


def test_a_corrupt_journal_is_one_line_exit_3_and_the_broker_is_not_touched(tmp_path, data_dir):
    state = tmp_path / "state"
    run = ["run", "--once", "--data-dir", str(data_dir), "--state-dir", str(state)]
    assert trade(run, tmp_path).returncode == 0
    journal = state / "journal.db"
    raw = bytearray(journal.read_bytes())
    raw[:16] = b"this is garbage!"  # the SQLite header
    journal.write_bytes(bytes(raw))
    (state / "journal.db-wal").unlink(missing_ok=True)
    before = digest(state)
    out = trade(run, tmp_path)
    assert out.returncode == 3 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"error: {journal}: file is not a database; the file is damaged: restore it from a backup or move it away "
        f"(the loop will not trade on it)"]
    after = digest(state)
    assert after["broker.db"] == before["broker.db"] and after["journal.db"] == before["journal.db"]


def test_a_damaged_page_is_reported_when_read(tmp_path):
    path = tmp_path / "journal.db"
    journal = Journal(path)
    for n in range(400):
        journal.record_intent(intent(n))
    journal.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    journal.close()
    raw = bytearray(path.read_bytes())
    raw[4096:] = os.urandom(len(raw) - 4096)  # every page but the first (the schema): the tables' data
    path.write_bytes(bytes(raw))
    with pytest.raises(StateError, match=r"journal.db: database disk image is malformed; the file is damaged"):
        Journal(path).intents()


def test_a_full_database_rolls_the_change_back_whole(tmp_path):
    journal = Journal(tmp_path / "journal.db")
    for n in range(20):
        journal.record_intent(intent(n))
    pages = journal.conn.execute("PRAGMA page_count").fetchone()[0]
    journal.conn.execute(f"PRAGMA max_page_count = {pages + 1}")  # SQLite itself answers SQLITE_FULL
    with pytest.raises(StateError, match=r"journal.db: database or disk is full; free disk space and run again"):
        for n in range(20, 10_000):
            journal.record_intent(intent(n))
            journal.mark_attempt(intent(n).client_order_id)  # two statements in one transaction
    attempts = {i.client_order_id: i for i in journal.intents()}
    counts = journal.submission_counts()
    # every attempt counted on the intent has its submissions row and the other way round: nothing half-written
    assert all(counts.get(cid, 0) == journal.conn.execute(
        "SELECT attempts FROM intents WHERE client_order_id=?", (cid,)).fetchone()[0] for cid in attempts)
    assert len(attempts) > 20


@pytest.mark.parametrize("name", ["records.jsonl", "trade.log"])
def test_a_state_file_that_is_a_device_is_one_line_exit_3_before_any_work(tmp_path, data_dir, name):
    """A state file that is /dev/full (made here: a character device of its numbers, or a FIFO where this process
    may not make one) used to be written until ENOSPC; it is now refused before the cycle (special files are never
    written or replaced: issue 56), one line naming it, exit 3, no journal begun. Disk-full writes themselves are
    tested with a fake writer (tests/spine/test_disk_full.py)."""
    import stat

    state = tmp_path / "state"
    state.mkdir()
    try:
        os.mknod(state / name, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        os.mkfifo(state / name)
    out = trade(["run", "--once", "--data-dir", str(data_dir), "--state-dir", str(state)], tmp_path)
    assert out.returncode == 3 and "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"error: --state-dir {state} holds {state / name}: is a ") and "not a regular file" in line
    assert not (state / "journal.db").exists()


def test_one_loop_per_state_folder_and_a_killed_holder_frees_it(tmp_path):
    with StateLock(tmp_path):
        with pytest.raises(ConfigError, match=rf"another marketcast loop \(PID {os.getpid()}\) is using {tmp_path}"):
            StateLock(tmp_path).acquire()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]);"
                               "from marketcast.trade.journal.lock import StateLock; StateLock(sys.argv[2]).acquire();"
                               "print('locked', flush=True); time.sleep(60)", SRC, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(ConfigError, match=rf"PID {holder.pid}\)"):
        StateLock(tmp_path).acquire()
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    deadline = time.monotonic() + 10
    while True:  # the kernel drops the lock with the process; no stale file blocks the restart
        try:
            StateLock(tmp_path).acquire().release()
            break
        except ConfigError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
