"""The state folder is its owner's alone: it holds account ids, positions and order history.

A folder the loop creates is ``0700``; every file it creates (``journal.db``, ``broker.db`` and SQLite's
``-wal``/``-shm`` beside them, which SQLite gives the database's mode, ``records.jsonl``, ``alerts.jsonl``,
``trade.log``, ``loop.lock``) is ``0600``, and an older one readable by others is narrowed to ``0600`` when
opened. A folder that already exists keeps its mode (``--state-dir .`` must not lock the user out of their
working directory); its files are private all the same. Lines are appended whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from marketcast.errors import ConfigError, StateError
from marketcast.fileio import refuse_special

DIR_MODE, FILE_MODE = 0o700, 0o600

#: Every file a state folder may hold: each one must be a regular file where it exists (a FIFO named
#: ``journal.db`` would hang SQLite, a device in place of ``equity.png`` would be replaced by a file).
STATE_FILES = tuple(f"{db}{end}" for db in ("journal.db", "broker.db") for end in ("", "-wal", "-shm", "-journal")) + (
    "records.jsonl", "alerts.jsonl", "trade.log", "loop.lock", "status.html", "equity.png")


def check_state_files(state_dir: str | Path) -> Path:
    """``state_dir`` unless it or one of its :data:`STATE_FILES` is a FIFO, a device or a socket, or one of those
    files is a folder: then one line, exit 3 (the README's "a corrupt or foreign state database"), before anything
    is opened or made beside it."""
    state = refuse_special(state_dir, "--state-dir")
    for name in STATE_FILES:
        refuse_special(state / name, f"--state-dir {state} holds")
        if (state / name).is_dir():
            raise StateError(f"--state-dir {state} holds {state / name}: is a folder, not a file; move it away or "
                             "choose another --state-dir")
    return state


def check_new_state(path: str | Path) -> Path:
    """``path``, where ``trade run`` or ``trade replay`` keeps (or will create) its state, unless a file stands
    there: then one :class:`StateError` line, exit 3 (the README's "an output folder ... that cannot be created";
    the commands that only read a state folder call a file there bad input, exit 2)."""
    path = refuse_special(path, "--state-dir")
    if path.exists() and not path.is_dir():  # not a permission problem: say what it is
        raise StateError(f"--state-dir {path} is a file, not a state folder; pass a folder (a new one, or the "
                         "folder of an earlier `trade run` or `trade replay`)")
    return path


def private_dir(path: str | Path) -> Path:
    """``path``, created ``0700`` (with its parents) if it does not exist."""
    path = check_new_state(path)
    if not path.is_dir():
        try:
            path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        except OSError as exc:
            raise StateError(f"{path}: {exc.strerror}; check the permissions of the folder above") from None
    else:
        check_state_files(path)
    return path


def outside_state(path: str | Path, state_dir: str | Path, flag: str) -> Path:
    """``path`` if it lies outside ``state_dir`` (both resolved, links followed), else one line, exit 2: an
    output written into the state folder could replace ``journal.db`` or ``broker.db``."""
    path, state = Path(path), Path(state_dir)
    if path.resolve() == state.resolve() or state.resolve() in path.resolve().parents:
        raise ConfigError(f"{flag} {path} lies inside the state folder {state}, which holds the journal and the "
                          f"broker's books; write it elsewhere, e.g. {flag} {path.name}")
    return path


def private_fd(fd: int) -> None:
    """Narrow an open regular file to ``0600`` (a device such as ``/dev/full`` is left alone)."""
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
        os.fchmod(fd, FILE_MODE)


def private_file(path: str | Path) -> Path:
    """``path`` created empty and ``0600`` if absent, narrowed to ``0600`` if it is a file others may read."""
    path = Path(path)
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        raise StateError(f"{path}: {exc.strerror}; check the folder's permissions and free space") from None
    try:
        private_fd(fd)
    finally:
        os.close(fd)
    return path


def append_line(path: Path, line: str) -> None:
    """Append ``line`` whole or not at all (on a failed write the file is cut back to its old size)."""
    data = line.encode("utf-8")
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        raise StateError(f"{path}: {exc.strerror}; check the folder's permissions and free space") from None
    size = os.fstat(fd).st_size
    try:
        private_fd(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise StateError(f"{path}: {exc.strerror}; free disk space and run again (the record was not "
                         f"written)") from None
    finally:
        os.close(fd)
