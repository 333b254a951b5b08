"""Input paths checked before anything opens them: one line for a path that is not a regular file.

Opening a FIFO blocks until a writer comes (``marketcast data check pipe.csv`` used to hang forever), a device
streams without end, and a symlink loop reads as "no such file"; every command that reads a file the user named
(bars, a sweep spec, a config) asks :func:`input_file` first, so each of these is one line and exit 2.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from marketcast.errors import MarketcastError

#: What a path that is not a regular file is, by its ``st_mode`` type.
_SPECIAL = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def special(path: str | Path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder (links followed): "a named pipe
    (FIFO)", "a character device", ...; None otherwise (absent, a regular file, a folder, a dangling link).
    Only ``stat`` is called: nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((name for test, name in _SPECIAL if test(mode) and not stat.S_ISDIR(mode)), None)


class NotRegular(OSError):
    """A path that was opened to be read and is a FIFO, a device, a socket or a folder (``strerror`` says which)."""


def read_regular(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` once it is known to be a regular file: opened without blocking (a FIFO opens at
    once, with no writer), then ``fstat`` on the open file (no swap between a check and the open) says what it
    is; anything but a regular file raises :class:`NotRegular`. ``limit``: read at most this many bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
            raise NotRegular(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read() if limit is None else fh.read(limit)
    finally:
        os.close(fd)


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """:func:`read_regular` decoded (a ``UnicodeDecodeError`` as ``bytes.decode`` raises it)."""
    return read_regular(path).decode(encoding)


def input_file(path: str | Path, error: type[MarketcastError], what: str = "a file") -> Path:
    """``path`` when it is a regular file (a symlink to one is fine); else one ``error`` line naming what it is
    instead and asking for ``what``: no such file, a symlink that loops or dangles, a FIFO, a device, a socket
    or a folder. Only ``stat`` is called: nothing is opened."""
    path = Path(path)
    try:
        mode = path.stat().st_mode  # follows symlinks
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{path}: is a symbolic link that loops; point it at {what}") from None
        if path.is_symlink():
            raise error(f"{path}: is a symbolic link to {os.readlink(path)!r}, which does not exist; point it at "
                        f"{what}") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise error(f"{path}: no such file; pass {what}") from None
        raise error(f"{path}: cannot be read ({exc.strerror}); check the path and its permissions") from None
    kind = next((name for test, name in _SPECIAL if test(mode)), None)
    if kind is not None:
        raise error(f"{path}: is {kind}, not a regular file; pass {what}")
    return path
