"""Arrays derived once and kept between processes, so a command does not rebuild them each time it starts.

Files live under ``$MARKETCAST_CACHE_DIR`` (default ``~/.cache/marketcast``) as ``.npz``, each named by
everything it is derived from, and are written to a temporary name and renamed, so a reader never sees half a
file. A cache is only ever a speed-up: a file that cannot be read is rebuilt, and one that cannot be written is
skipped.
"""

from __future__ import annotations

import os
import zipfile
from contextlib import suppress
from pathlib import Path
from typing import Callable

import numpy as np

ENV = "MARKETCAST_CACHE_DIR"


def cache_dir() -> Path:
    return Path(os.environ.get(ENV) or Path.home() / ".cache" / "marketcast").expanduser()


def fingerprint(*paths: str | os.PathLike) -> str:
    """A short tag that changes when any of ``paths`` (source files a cache derives from) is modified."""
    stats = [os.stat(p) for p in paths]
    return "-".join(f"{s.st_mtime_ns:x}{s.st_size:x}" for s in stats)


def cached_arrays(name: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays stored as ``name`` in the cache, else ``build()``'s, which are stored for the next process."""
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
