"""Atomic file writes: hidden temporary files in the target folder, flushed to disk, renamed over the targets.

A reader sees the old file or the new one, never a half one, even when the writer is killed; the temporary
name (``.<name>.<random>.tmp``) matches no glob of real files. :func:`write_files` writes a set of files (a
run's reports) all or nothing: every file is written first, and only then are they renamed, so an error
(a full disk on the third file) leaves the folder as it was. A target that exists keeps its permissions, unless
``mode`` is given: then each temporary file has exactly ``mode`` from its creation, before its first byte (a
private file is never readable by others, not even while it is written).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable, Mapping, Union

from marketcast.errors import MarketcastError

Content = Union[bytes, str, Callable[[Path], object]]  # the bytes, the text, or a function writing the path


def make_folder(folder: str | Path, error: type[MarketcastError] = MarketcastError) -> Path:
    """``folder`` (created with its parents); a folder that cannot be made is one ``error`` line."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise error(f"{path} exists and is not a folder; choose another output folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"{path}: cannot create the folder ({exc.strerror or exc})") from None
    return path


def _write(tmp: Path, content: Content) -> None:
    if isinstance(content, bytes):
        tmp.write_bytes(content)
    elif isinstance(content, str):
        tmp.write_text(content, encoding="utf-8", newline="")
    else:
        content(tmp)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())


def _create(tmp: Path, mode: int) -> None:
    """``tmp`` created empty with exactly ``mode`` (whatever the umask)."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def write_files(folder: str | Path, files: Mapping[str, Content],
                error: type[MarketcastError] = MarketcastError, mode: int | None = None) -> list[Path]:
    """Write ``name -> content`` into ``folder`` all or nothing; returns the paths written."""
    root = make_folder(folder, error)
    staged: list[tuple[Path, Path]] = []
    try:
        for name, content in files.items():
            final = root / name
            tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
            staged.append((tmp, final))
            if mode is not None:
                _create(tmp, mode)
            _write(tmp, content)
            if mode is None and final.exists():
                os.chmod(tmp, final.stat().st_mode & 0o7777)
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise error(f"{staged[-1][1]}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, final in staged:
        os.replace(tmp, final)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return [final for _, final in staged]


def write_atomic(final: str | Path, content: Content, error: type[MarketcastError] = MarketcastError,
                 mode: int | None = None) -> Path:
    """One file, atomically (see :func:`write_files`)."""
    final = Path(final)
    return write_files(final.parent, {final.name: content}, error, mode)[0]
