"""Shape buckets: every compiled graph is keyed by a bucket, so new data sizes reuse existing graphs.

Context lengths go up to a multiple of the patch size (left padding, exactly what toto-ts does, so results
do not change); row counts and cache lengths go up to a power of two (extra rows are discarded, extra
cache slots are masked out), so a new batch size or horizon rarely needs a new graph.
"""

from __future__ import annotations

import math

from marketcast.runtime.shapes import pow2_at_least


def context_patches(length: int, patch: int) -> int:
    """Patches covering ``length`` steps after left padding to a multiple of ``patch``."""
    return max(1, math.ceil(length / patch))


def cache_slots(context: int, decode_steps: int) -> int:
    """Patch slots a decode cache needs (context + fed-back patches), as a power of two >= 8."""
    return pow2_at_least(context + decode_steps, floor=8)
