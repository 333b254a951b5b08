"""Arrays derived once and kept between processes, so a command does not rebuild them each time it starts.

Files live under ``$MARKETCAST_CACHE_DIR`` (default ``~/.cache/marketcast``) as ``.npz``, each named by
everything it is derived from, and are written to a temporary name and renamed, so a reader never sees half a
file. A cache is only ever a speed-up: a file that cannot be read is rebuilt, and one that cannot be written is
skipped. A name is a *family* (what is derived: ``calendar-XNYS-1970-2031``) and a tag of the sources it is
derived from; the sources change with every upgrade or checkout, so writing a new file removes the family's
older ones beyond the :data:`KEEP` newest (a few, so checkouts in use side by side do not rebuild each other's).
"""

from __future__ import annotations

import os
import zipfile
from contextlib import suppress
from pathlib import Path
from typing import Callable

import numpy as np

ENV = "MARKETCAST_CACHE_DIR"
KEEP = 4  # files a family keeps: the newest, written by the installs or checkouts in use


def cache_dir() -> Path:
    return Path(os.environ.get(ENV) or Path.home() / ".cache" / "marketcast").expanduser()


def fingerprint(*paths: str | os.PathLike) -> str:
    """A short tag that changes when any of ``paths`` (source files a cache derives from) is modified."""
    stats = [os.stat(p) for p in paths]
    return "-".join(f"{s.st_mtime_ns:x}{s.st_size:x}" for s in stats)


def cached_arrays(name: str, build: Callable[[], dict[str, np.ndarray]], family: str | None = None
                  ) -> dict[str, np.ndarray]:
    """The arrays stored as ``name`` in the cache, else ``build()``'s, which are stored for the next process;
    ``name`` is ``family-<tag>``, and storing it drops the family's files beyond the :data:`KEEP` newest."""
    path = cache_dir() / f"{name}.npz"
    try:
        with np.load(path) as stored:
            return {key: stored[key] for key in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        pass
    arrays = build()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            np.savez(out, **arrays)
        os.replace(tmp, path)
    except OSError:
        with suppress(OSError):
            tmp.unlink()
        return arrays
    if family is not None:
        _prune(family, path)
    return arrays


def _prune(family: str, kept: Path) -> None:
    """Remove ``family``'s files beyond the :data:`KEEP` most recently written (``kept``, just written, stays)."""
    def written(p: Path) -> int:
        try:
            return p.stat().st_mtime_ns
        except OSError:
            return -1

    older = sorted((p for p in kept.parent.glob(f"{family}-*.npz") if p != kept), key=written, reverse=True)
    for stale in older[KEEP - 1:]:
        with suppress(OSError):
            stale.unlink()
