"""MARKETCAST_COMPILE_CACHE_DIR keeps inductor's caches: a second process finds the first one's graphs there.

Proved with inductor's own FX-graph cache counters and the wrapper's ``cache_loaded``, not with timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, os
import marketcast.runtime.counters  # first, as compile check does: importing dynamo pins torch's temp default
import numpy as np
from marketcast.runtime.cache import fxgraph_counts
from marketcast.forecast.base import make_batch
from tests.compile.tiny_forecaster import create
from tests.conftest import make_ohlcv

fc = create(compile="default")
fc.forecast(make_batch(make_ohlcv(80), np.array([70, 79]), 64, 5), 5, 8, seed=0)
hits, misses = fxgraph_counts()
print(json.dumps({"hits": hits, "misses": misses, "cache_loaded": fc.step.stats.extra.get("cache_loaded"),
                  "compiled": fc.step.stats.compiled, "folder": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}))
"""


def _process(cache_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}  # conftest's temp folder
    env.update(MARKETCAST_COMPILE_CACHE_DIR=str(cache_dir), TORCHINDUCTOR_COMPILE_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_loads_the_first_ones_graphs_from_the_cache_dir(tmp_path):
    """The cold process starts from an empty folder (all misses, so no cache elsewhere served it); the warm
    one, with only that folder in common, hits every graph."""
    cold = _process(tmp_path / "cache")
    folder = (tmp_path / "cache" / "inductor").resolve()
    assert cold["folder"] == str(folder) and cold["compiled"] is True
    assert cold["misses"] >= 1 and cold["hits"] == 0 and cold["cache_loaded"] is False
    assert any(folder.rglob("*")), "nothing was written under MARKETCAST_COMPILE_CACHE_DIR/inductor"
    warm = _process(tmp_path / "cache")
    assert warm["compiled"] is True and warm["cache_loaded"] is True
    assert warm["hits"] == cold["misses"] and warm["misses"] == 0


def test_torchs_own_default_is_not_taken_for_the_users_choice(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from marketcast.runtime.cache import use_persistent_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what importing dynamo writes there
    assert use_persistent_cache(tmp_path / "mc") == (tmp_path / "mc" / "inductor").resolve()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str((tmp_path / "mc" / "inductor").resolve())
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))  # a user's folder always wins
    assert use_persistent_cache(tmp_path / "mc") == tmp_path / "mine"
