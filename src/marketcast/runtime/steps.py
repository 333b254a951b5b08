"""One :class:`GuardedCompile` per (step function, shape bucket), sealed right after its first call.

Why per bucket: a bucket's first call is its warm-up (it compiles one graph); sealing it then means any
later recompile of that bucket is refused and sends the whole model to eager (``CompileGroup``), while a
bucket seen for the first time later still compiles once instead of tripping the seal of the others.
On CUDA each call starts a new CUDA-graph step and outputs are cloned before they leave, so a replay can
never overwrite a tensor the sampler still reads.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._pytree import tree_map

from marketcast.runtime.cache import use_persistent_cache
from marketcast.runtime.guard import CompileGroup, GuardedCompile, check_backend


class CompiledSteps:
    """Holds the wrappers of one model; ``call(kind, bucket, fn, *args)`` runs ``fn`` through its wrapper."""

    def __init__(self, model: str, mode: str | None, device: torch.device, backend: str = "inductor") -> None:
        self.model = model
        self.mode = mode
        if mode is not None:
            use_persistent_cache()  # before check_backend: asking for backends pins torch's default folder
        self.backend = check_backend(backend) if mode is not None else backend
        self.device = torch.device(device)
        self.group = CompileGroup(model)
        self.wrappers: dict[tuple, GuardedCompile] = {}

    def compile_guards(self) -> list[GuardedCompile]:
        return list(self.wrappers.values())

    def _wrapper(self, kind: str, bucket: tuple, fn: Callable) -> GuardedCompile:
        name = (kind, *bucket)
        if name not in self.wrappers:
            self.wrappers[name] = GuardedCompile(fn, self.mode, backend=self.backend,
                                                 name=f"{self.model}.{kind}{list(bucket)}",
                                                 fullgraph=True, dynamic=False, group=self.group)
        return self.wrappers[name]

    def call(self, kind: str, bucket: tuple, fn: Callable, *args: Any) -> Any:
        wrapper = self._wrapper(kind, bucket, fn)
        cuda = self.device.type == "cuda" and wrapper.active
        if cuda:
            torch.compiler.cudagraph_mark_step_begin()
        out = wrapper(*args)
        if cuda:
            out = tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, out)
        if not wrapper.stats.sealed:
            wrapper.seal()
        return out

    @property
    def compiled(self) -> bool:
        """True when at least one step ran compiled and none fell back."""
        return bool(self.wrappers) and all(w.active for w in self.wrappers.values()) and any(
            w.stats.compiled for w in self.wrappers.values())

    @property
    def fallback_reason(self) -> str | None:
        return self.group.fallback_reason
