"""The state folder is its owner's alone: every file a trade command creates there is 0600 and every folder 0700,
whatever the umask (0o022 here, the common default that would leave them readable by everyone)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from marketcast.fileio import write_atomic
from marketcast.trade.journal.state import Journal
from marketcast.trade.test_kit.alpaca_env import SRC

UMASK = 0o022


def trade(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SRC}, timeout=120, umask=UMASK)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root.parent)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def not_private(root: Path) -> dict[str, str]:
    """Each path under ``root`` (``root`` too) that is not 0700 (a folder) or 0600 (a file), with its mode."""
    return {name: oct(mode) for name, mode in modes(root).items()
            if mode != (0o700 if (root.parent / name).is_dir() else 0o600)}


def test_a_replay_and_its_status_page_leave_only_0600_files_in_a_0700_folder(tmp_path):
    state = tmp_path / "state"
    replay = trade(["replay", "--from", "2017-06-01", "--to", "2017-06-30", "--symbols", "SP500", "--state-dir",
                    str(state)])
    assert replay.returncode == 0, replay.stderr
    status = trade(["status", "--state-dir", str(state), "--html"])
    assert status.returncode == 0, status.stderr
    names = {p.name for p in state.iterdir()}
    assert {"journal.db", "broker.db", "records.jsonl", "trade.log", "loop.lock", "status.html",
            "equity.png"} <= names, names
    assert not any(n.endswith(".tmp") for n in names)  # the atomic writer left nothing behind
    assert not_private(state) == {}
    before = os.umask(UMASK)
    try:  # SQLite's -wal and -shm exist while a connection is open: they take the database's mode
        journal = Journal(state / "journal.db")
        journal.set_meta(note="open")
        assert {"journal.db-wal", "journal.db-shm"} <= {p.name for p in state.iterdir()}
        assert not_private(state) == {}
        journal.close()
    finally:
        os.umask(before)


def test_a_private_atomic_write_is_0600_from_its_first_byte_and_narrows_an_old_0644_file(tmp_path):
    target = tmp_path / "status.html"
    target.write_text("old")
    target.chmod(0o644)
    seen = []

    def content(tmp: Path) -> None:
        seen.append((tmp.name, stat.S_IMODE(tmp.stat().st_mode)))  # before a byte is written
        tmp.write_text("<html>new</html>")

    before = os.umask(UMASK)
    try:
        write_atomic(target, content, mode=0o600)
    finally:
        os.umask(before)
    [(name, mode)] = seen
    assert name.startswith(".status.html.") and name.endswith(".tmp") and mode == 0o600
    assert target.read_text() == "<html>new</html>" and stat.S_IMODE(target.stat().st_mode) == 0o600
