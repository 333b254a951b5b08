"""Persistent compile artifacts, so a second process starts warm.

Artifacts from ``torch.compiler.save_cache_artifacts`` are stored under the settings' cache dir, keyed by
torch version, device and whatever the model puts in its key (config, dtype, mode, shape buckets).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Mapping

import torch

from marketcast.runtime.settings import load_settings

log = logging.getLogger("marketcast.compile")


def artifact_path(key: Mapping, cache_dir: Path | None = None) -> Path:
    full = {"torch": torch.__version__, **{k: key[k] for k in sorted(key)}}
    digest = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()[:20]
    root = Path(cache_dir) if cache_dir is not None else load_settings().cache_dir
    return root / f"{full.get('model', 'model')}-{digest}.bin"


def load_artifacts(key: Mapping, cache_dir: Path | None = None) -> bool:
    """Load saved artifacts for ``key`` into this process; True if there were any."""
    path = artifact_path(key, cache_dir)
    if not path.exists():
        return False
    try:
        torch.compiler.load_cache_artifacts(path.read_bytes())
    except Exception as exc:  # a stale or foreign file must never stop a forecast
        log.warning("ignoring unreadable compile cache %s: %s", path, exc)
        return False
    return True


def save_artifacts(key: Mapping, cache_dir: Path | None = None) -> Path | None:
    """Write this process's compile artifacts for ``key`` (atomically); None if there were none."""
    result = torch.compiler.save_cache_artifacts()
    if result is None:
        return None
    data = result[0]
    path = artifact_path(key, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
