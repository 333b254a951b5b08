"""What a command's first forecast cost, and whether its compiled graphs came from the persistent cache.

A user who turned compile on wants to see, from the command itself, that the second process found the first
one's graphs (``MARKETCAST_COMPILE_CACHE_DIR``) and what the first forecast took. Inductor's own FX-graph cache
counters say it, counted around the first call only: hits are graphs loaded from the disk, misses graphs
compiled now. Nothing is measured when every wrapper of the model runs eager (torch is not even imported for a
model without it).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class CompileNote:
    mode: str | None
    from_cache: int  # FX graphs the first call loaded from the persistent cache
    compiled: int  # FX graphs the first call compiled (cache misses)
    first_call_s: float
    cache_dir: str | None

    def line(self) -> str:
        where = f" ({self.cache_dir})" if self.cache_dir else ""
        return (f"compile {self.mode}: {self.from_cache} graph(s) loaded from the cache{where}, {self.compiled} "
                f"compiled now; first forecast {self.first_call_s:.2f} s")

    def to_json(self) -> dict:
        return {"mode": self.mode, "graphs_from_cache": self.from_cache, "graphs_compiled": self.compiled,
                "first_forecast_s": round(self.first_call_s, 4), "cache_dir": self.cache_dir}


def first_call(forecaster, call: Callable[[], Any]) -> tuple[Any, CompileNote | None]:
    """``call()`` (the forecaster's first forecast), and its :class:`CompileNote` when compile is on."""
    if "torch" not in sys.modules:  # a model without torch (the baseline) compiles nothing; keep torch unloaded
        return call(), None
    before = _fx_counts()  # a model may build its compiled steps in its first call: count from here
    started = time.perf_counter()
    out = call()
    seconds = time.perf_counter() - started
    from marketcast.runtime.guard import find_guards

    guards = [g for g in find_guards(forecaster) if g.stats.mode is not None]
    if not guards:
        return out, None
    from marketcast.runtime.cache import INDUCTOR_ENV

    hits, misses = (a - b for a, b in zip(_fx_counts(), before))
    return out, CompileNote(guards[0].stats.mode, hits, misses, seconds, os.environ.get(INDUCTOR_ENV))


def _fx_counts() -> tuple[int, int]:
    """Inductor's FX-graph cache (hits, misses) so far; (0, 0) before dynamo is imported (none can have
    happened), so an eager model is not made to import it."""
    if "torch._dynamo" not in sys.modules:
        return 0, 0
    from marketcast.runtime.cache import fxgraph_counts

    return fxgraph_counts()
