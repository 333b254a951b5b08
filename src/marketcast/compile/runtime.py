"""Compile once, then refuse to recompile; on any compile-time failure fall back to eager, loudly once.

A model wraps its fixed-shape step function in :class:`GuardedCompile`. During warm-up the compiled
function may compile (one graph per shape bucket); after :meth:`GuardedCompile.seal` every call runs under
``torch.compiler.set_stance("fail_on_recompile")``. If compiling, recompiling or a CUDA-graph run fails, one
warning names the cause and the wrapper switches to the eager function for good, so production never
crashes and never returns a result from a half-broken graph.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

from marketcast.compile.cache import load_artifacts, save_artifacts

log = logging.getLogger("marketcast.compile")


def recompile_count() -> int:
    """Recompilations dynamo has recorded in this process (all frames)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["recompiles"].values())) if "recompiles" in counters else 0


def graph_break_count() -> int:
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values())) if "graph_break" in counters else 0


@dataclass
class CompileStats:
    mode: str | None
    compiled: bool = False  # True once a compiled call has succeeded
    sealed: bool = False
    fallback_reason: str | None = None
    calls: int = 0
    eager_calls: int = 0
    extra: dict = field(default_factory=dict)


class GuardedCompile:
    """``fn`` compiled with ``mode`` (None = eager), sealed against recompiles after warm-up."""

    def __init__(
        self,
        fn: Callable[..., Any],
        mode: str | None,
        *,
        backend: str = "inductor",
        name: str = "model",
        fullgraph: bool = True,
        dynamic: bool = False,
        cache_key: Mapping | None = None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.stats = CompileStats(mode=mode)
        self._compiled = None
        self._cache_key = dict(cache_key, mode=mode, backend=backend) if cache_key is not None else None
        if mode is not None:
            if self._cache_key is not None:
                self.stats.extra["cache_loaded"] = load_artifacts(self._cache_key)
            options = {"mode": mode} if backend == "inductor" else {}
            self._compiled = torch.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, **options)

    @property
    def active(self) -> bool:
        """True while calls go to the compiled function."""
        return self._compiled is not None and self.stats.fallback_reason is None

    def seal(self) -> None:
        """Warm-up is over: from now on a recompile is an error (and triggers the eager fallback).

        The compiled artifacts are saved then (when a ``cache_key`` was given) for the next process.
        """
        self.stats.sealed = True
        if self.active and self.stats.compiled and self._cache_key is not None:
            path = save_artifacts(self._cache_key)
            self.stats.extra["cache_saved"] = str(path) if path else None

    def fall_back(self, reason: str) -> None:
        if self.stats.fallback_reason is None:
            self.stats.fallback_reason = reason
            log.warning("%s: torch.compile disabled, running eager from now on: %s", self.name, reason)

    def __call__(self, *args, **kwargs):
        self.stats.calls += 1
        if not self.active:
            self.stats.eager_calls += 1
            return self.fn(*args, **kwargs)
        stance = torch.compiler.set_stance("fail_on_recompile") if self.stats.sealed else contextlib.nullcontext()
        try:
            with stance:
                out = self._compiled(*args, **kwargs)
        except Exception as exc:  # compile errors, recompiles after sealing, CUDA-graph failures
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.fall_back(f"{type(exc).__name__}: {first_line[:300]}")
            self.stats.eager_calls += 1
            return self.fn(*args, **kwargs)
        self.stats.compiled = True
        return out
