"""Compile results that outlive the process, so a second process starts warm.

The choice: torch inductor's own on-disk caches (FX graph cache, AOTAutograd cache, the compiled kernels:
Triton cubins on CUDA, C++ shared objects on the CPU, autotuning results), kept under the settings' cache
dir (``MARKETCAST_COMPILE_CACHE_DIR``/inductor) instead of a temp dir. Why this and not the alternatives:

* ``torch.compiler.save_cache_artifacts``/``load_cache_artifacts`` (Mega-Cache) serialise the same caches
  into one portable blob, but the blob leaves out the CPU kernels' shared objects: measured on this
  project's CPU box (Toto base, torch 2.13), a warm process loading the blob still spent 25.5 s in its
  first forecast rebuilding C++ kernels, against 5.5 s with the inductor cache dir kept. It also has to
  be written after every new shape bucket, each time with everything compiled so far.
* AOTInductor skips dynamo as well, but it has no CUDA-graph trees (``reduce-overhead``), wants the
  in-place cache writes of the decode steps expressed as exported mutations, and bypasses the guarded
  compile/eager fallback; one package per shape bucket would have to be built ahead of time.

The inductor cache is keyed by the graph, torch version, device and configs, so a stale entry is never
used; every bucket is persisted as it compiles. A user's ``TORCHINDUCTOR_CACHE_DIR`` wins unless it is torch's
own temp default (which torch itself writes into the environment, so it cannot tell a choice). The
Mega-Cache blob functions stay for the compile toolkit's start probe, which measures a fresh machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Mapping

import torch

from marketcast.runtime.compile_settings import load_settings

log = logging.getLogger("marketcast.compile")
INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"


def _user_folder() -> str | None:
    """The folder the user chose with ``TORCHINDUCTOR_CACHE_DIR``, if any. Torch writes its temp default into
    that variable the first time anything asks for the folder (importing dynamo does), so a value equal to
    that default is torch's, not the user's."""
    value = os.environ.get(INDUCTOR_ENV)
    if not value:
        return None
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return None if os.path.realpath(value) == os.path.realpath(default_cache_dir()) else value


def use_persistent_cache(cache_dir: Path | None = None) -> Path:
    """Point torch's inductor caches at ``<cache dir>/inductor`` for this process, unless the user chose
    another folder with ``TORCHINDUCTOR_CACHE_DIR``; returns the folder in use."""
    user = _user_folder()
    if user:
        return Path(user)
    root = Path(cache_dir) if cache_dir is not None else load_settings().cache_dir
    folder = (root / "inductor").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[INDUCTOR_ENV] = str(folder)
    return folder


def fxgraph_counts() -> tuple[int, int]:
    """(hits, misses) of inductor's FX graph cache in this process."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"] if "inductor" in counters else {}
    return int(inductor.get("fxgraph_cache_hit", 0)), int(inductor.get("fxgraph_cache_miss", 0))


def artifact_path(key: Mapping, cache_dir: Path | None = None) -> Path:
    full = {"torch": torch.__version__, **{k: key[k] for k in sorted(key)}}
    digest = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()[:20]
    root = Path(cache_dir) if cache_dir is not None else load_settings().cache_dir
    return root / f"{full.get('model', 'model')}-{digest}.bin"


def load_artifacts(key: Mapping, cache_dir: Path | None = None) -> bool:
    """Load a saved Mega-Cache blob for ``key`` into this process; True if there was one."""
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
    """Write this process's compile artifacts for ``key`` as one Mega-Cache blob (atomically); None if none."""
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
