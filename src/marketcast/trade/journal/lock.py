"""One loop per state folder: an OS lock (``flock``) on ``STATE_DIR/loop.lock`` held while the loop runs.

The kernel drops the lock when the holder exits, however it exits (SIGKILL included), so a stale lock file
never blocks a restart. The file holds the holder's PID, which a refused second loop names.

:func:`new_state` is the lock of a command that may make the state folder: a folder it made is removed whole
when the command fails before its work began (a full disk under ``loop.lock`` or ``journal.db``), so a failed
start leaves no state folder, no lock and no log.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from marketcast.errors import ConfigError, StateError
from marketcast.trade.journal.files import FILE_MODE, private_dir, private_fd

LOCK = "loop.lock"


class StateLock:
    """``with StateLock(state_dir): ...`` or ``acquire()``/``release()``."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / LOCK
        self._fd: int | None = None

    def acquire(self) -> "StateLock":
        private_dir(self.path.parent)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            private_fd(fd)
        except OSError as exc:
            raise StateError(f"{self.path}: {exc.strerror}; check the folder's permissions") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(f"another marketcast loop (PID {holder}) is using {self.path.parent}; stop it first, "
                              f"or give this one another --state-dir") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise StateError(f"{self.path}: {exc.strerror}; free disk space and run again") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> "StateLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


@contextmanager
def new_state(state_dir: str | Path) -> Iterator[Callable[[], None]]:
    """:class:`StateLock` on ``state_dir``, yielding ``began()``: the command calls it once its work is under way
    (a replay's first cycle done, the live loop about to start). When ``state_dir`` did not exist before and the
    command fails or is stopped before ``began()``, the folder is removed, under the lock, with everything in it
    (``loop.lock``, ``trade.log``, an empty ``journal.db``): a failed start leaves nothing behind."""
    state_dir = Path(state_dir)
    made = None  # the outermost folder this command makes (--state-dir out/new/state makes out/new too)
    for folder in (state_dir, *state_dir.parents):
        if os.path.lexists(folder):
            break
        made = folder
    began: list[bool] = []
    try:
        lock = StateLock(state_dir).acquire()
    except StateError:  # a full disk under the lock's PID: the folder just made goes with it
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise
    try:
        yield lambda: began.append(True)
    except BaseException:
        if made is not None and not began:
            shutil.rmtree(made, ignore_errors=True)
        raise
    finally:
        lock.release()
