"""Atomic file writes: a hidden temporary file in the target folder, flushed to disk, renamed over the target.

A reader sees the old file or the new one, never a half one, even when the writer is killed; the temporary
name (``.<name>.<random>.tmp``) matches no glob of real files.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable

from marketcast.errors import MarketcastError


def write_atomic(final: Path, write: Callable[[Path], object], error: type[MarketcastError]) -> None:
    """``write(tmp)``, fsync, rename to ``final`` and fsync its folder; an OSError becomes ``error``."""
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(f"{final}: cannot write ({exc.strerror or exc})") from None
