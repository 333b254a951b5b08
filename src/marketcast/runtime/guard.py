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
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from marketcast.runtime.cache import fxgraph_counts, use_persistent_cache
from marketcast.runtime.counters import COMPILE_EVENTS, compile_count, recompile_count

log = logging.getLogger("marketcast.compile")


def apply_dynamo_settings(recompile_limit: int | None) -> None:
    """Apply ``TORCHDYNAMO_RECOMPILE_LIMIT`` (torch itself does not read that variable; None keeps its 8)."""
    if recompile_limit is not None:
        import torch._dynamo.config as dynamo_config

        dynamo_config.recompile_limit = int(recompile_limit)


_DYNAMO_CONFIGURED = False


def ensure_dynamo_settings() -> None:
    """Apply the compile settings' dynamo knobs once per process (the first compiled wrapper does it)."""
    global _DYNAMO_CONFIGURED
    if not _DYNAMO_CONFIGURED:
        from marketcast.runtime.compile_settings import load_settings

        apply_dynamo_settings(load_settings().recompile_limit)
        _DYNAMO_CONFIGURED = True


def check_backend(name: str) -> str:
    """``name`` if torch.compile knows that backend, else a one-line :class:`ConfigError` listing the known ones."""
    from torch._dynamo import list_backends

    known = list_backends(exclude_tags=())
    if name not in known:
        from marketcast.errors import ConfigError

        raise ConfigError(f"torch.compile backend {name!r} (TOTO_COMPILE_BACKEND) is unknown; use one of "
                          f"{', '.join(b for b in known if 'TESTING' not in b)}")
    return name


@dataclass
class CompileStats:
    mode: str | None
    compiled: bool = False  # True once a compiled call has succeeded
    sealed: bool = False
    fallback_reason: str | None = None
    calls: int = 0
    eager_calls: int = 0
    compiles: int = 0  # dynamo compiles seen during this wrapper's calls (warm-up included)
    recompiles: int = 0  # recompiles seen during this wrapper's calls
    recompiles_after_seal: int = 0  # recompiles that happened after seal() (only outside the stance)
    refused_recompiles: int = 0  # recompiles the fail_on_recompile stance refused (each triggers the fallback)
    warmup_s: float = 0.0  # wall time of the calls before seal() (compile included)
    extra: dict = field(default_factory=dict)  # cache_loaded: every graph of the warm-up came from the disk cache


@dataclass
class CompileGroup:
    """Shared by all wrappers of one model: the first failure sends every wrapper of the model to eager,
    with one warning, so a model never mixes compiled and eager steps after a failure."""

    name: str
    fallback_reason: str | None = None


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
        group: "CompileGroup | None" = None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.backend = backend
        self.group = group
        self.stats = CompileStats(mode=mode)
        self._compiled = None
        if mode is not None:
            ensure_dynamo_settings()
            use_persistent_cache()
            options = {"mode": mode} if backend == "inductor" else {}
            self._compiled = torch.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, **options)

    @property
    def active(self) -> bool:
        """True while calls go to the compiled function."""
        if self.group is not None and self.group.fallback_reason is not None and self.stats.fallback_reason is None:
            self.stats.fallback_reason = f"{self.group.name}: {self.group.fallback_reason}"  # a sibling failed
        return self._compiled is not None and self.stats.fallback_reason is None

    def seal(self) -> None:
        """Warm-up is over: from now on a recompile is an error (and triggers the eager fallback)."""
        self.stats.sealed = True

    def fall_back(self, reason: str) -> None:
        if self.stats.fallback_reason is not None:
            return
        self.stats.fallback_reason = reason
        if self.group is not None:
            if self.group.fallback_reason is not None:
                return  # the model already fell back and said so
            self.group.fallback_reason = reason
            log.warning("%s: torch.compile disabled for the whole model (%s failed), running eager from now on: %s",
                        self.group.name, self.name, reason)
            return
        log.warning("%s: torch.compile disabled, running eager from now on: %s", self.name, reason)

    def __call__(self, *args, **kwargs):
        self.stats.calls += 1
        if not self.active:
            self.stats.eager_calls += 1
            return self.fn(*args, **kwargs)
        sealed = self.stats.sealed
        stance = torch.compiler.set_stance("fail_on_recompile") if sealed else contextlib.nullcontext()
        compiles0, recompiles0, fx0 = compile_count(), recompile_count(), fxgraph_counts()
        t0 = time.perf_counter()
        try:
            with stance:
                out = self._compiled(*args, **kwargs)
        except Exception as exc:  # compile errors, recompiles after sealing, CUDA-graph failures
            self._count(compiles0, recompiles0, sealed, t0)
            if sealed and "recompile" in str(exc).lower():
                self.stats.refused_recompiles += 1
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.fall_back(f"{type(exc).__name__}: {first_line[:300]}")
            self.stats.eager_calls += 1
            return self.fn(*args, **kwargs)
        self._count(compiles0, recompiles0, sealed, t0)
        if not sealed:
            self._note_cache(fx0)
        self.stats.compiled = True
        return out

    def _note_cache(self, before: tuple[int, int]) -> None:
        """``cache_loaded``: the warm-up's graphs all came from the persistent cache (hits, no miss)."""
        hits, misses = (a - b for a, b in zip(fxgraph_counts(), before))
        if hits or misses:
            loaded = self.stats.extra.get("cache_loaded", True)
            self.stats.extra["cache_loaded"] = bool(loaded and hits and not misses)

    def _count(self, compiles0: int, recompiles0: int, sealed: bool, t0: float) -> None:
        self.stats.compiles += COMPILE_EVENTS.compiles - compiles0
        new_recompiles = recompile_count() - recompiles0
        self.stats.recompiles += new_recompiles
        if sealed:
            self.stats.recompiles_after_seal += new_recompiles
        else:
            self.stats.warmup_s += time.perf_counter() - t0


def find_guards(obj: Any, depth: int = 4) -> list[GuardedCompile]:
    """The :class:`GuardedCompile` wrappers a forecaster holds (attributes, lists and dicts, ``depth`` deep).

    A forecaster may also expose them explicitly as ``compile_guards``; that wins when present.
    """
    explicit = getattr(obj, "compile_guards", None)
    if explicit is not None:
        return list(explicit() if callable(explicit) else explicit)
    found: list[GuardedCompile] = []
    seen: set[int] = set()

    def walk(value: Any, level: int) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, GuardedCompile):
            found.append(value)
            return
        if level > depth or isinstance(value, (str, bytes, int, float, torch.Tensor)):
            return
        if isinstance(value, dict):
            children = list(value.values())
        elif isinstance(value, (list, tuple, set)):
            children = list(value)
        elif hasattr(value, "__dict__"):
            children = list(vars(value).values())
        else:
            return
        for child in children:
            walk(child, level + 1)

    walk(obj, 0)
    return found
