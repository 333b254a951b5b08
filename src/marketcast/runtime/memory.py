"""How much memory one forecast call may use, and what to do when the device runs out anyway.

Batch sizes (windows per prefill chunk, sample paths per decode call) are cut from a byte budget, so a big
GPU is filled and a small one is not overrun. On CUDA the budget is a fraction of what is free now (the
driver's free memory plus what torch's caching allocator holds unused); on the CPU it is a fixed,
documented :data:`CPU_BUDGET_BYTES` (working memory beyond the weights), since free RAM says little about
what a shared box can spare. If a call still runs out of memory, :func:`with_oom_backoff` halves the budget,
then the sample count, logging each retry.
"""

from __future__ import annotations

import logging
from typing import Callable, TypeVar

import torch

from marketcast.runtime.shapes import pow2_at_most

CPU_BUDGET_BYTES = 2 << 30  # 2 GiB of working memory per forecast call on the CPU
CUDA_FREE_FRACTION = 0.7  # of the memory free when the call starts; the rest is headroom for the allocator
T = TypeVar("T")


def memory_budget(device: torch.device | str, budget: int | None = None) -> int:
    """Bytes a forecast call may allocate on ``device``: ``budget`` when given, else see the module doc."""
    if budget is not None:
        return int(budget)
    device = torch.device(device)
    if device.type != "cuda":
        return CPU_BUDGET_BYTES
    free, _ = torch.cuda.mem_get_info(device)
    unused_cache = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int(CUDA_FREE_FRACTION * (free + unused_cache))


def units_in(budget: int, bytes_per_unit: float, cap: int) -> int:
    """How many units of ``bytes_per_unit`` fit the budget: a power of two in ``[1, cap]`` (``cap`` a power of two)."""
    return max(1, min(cap, pow2_at_most(budget / max(bytes_per_unit, 1.0))))


def with_oom_backoff(run: Callable[[int, int], T], budget: int, samples: int, *, min_budget: int,
                     min_samples: int, log: logging.Logger, name: str) -> T:
    """``run(budget, samples)``; on ``torch.OutOfMemoryError`` retry with half the budget down to
    ``min_budget``, then with half the samples down to ``min_samples``; re-raise below both floors."""
    while True:
        try:
            return run(budget, samples)
        except torch.OutOfMemoryError:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if budget > min_budget:
                budget = max(min_budget, budget // 2)
            elif samples > min_samples:
                samples = max(min_samples, samples // 2)
            else:
                raise
            log.warning("%s: out of memory, retrying with a %d MiB budget and num_samples=%d", name,
                        budget >> 20, samples)
