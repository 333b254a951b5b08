"""Power-of-two shape buckets: every compiled graph is keyed by one, so a new size rarely compiles a graph."""

from __future__ import annotations

import math


def pow2_at_least(n: float, floor: int = 1) -> int:
    """Smallest power of two >= max(n, floor)."""
    return 1 << max(0, math.ceil(math.log2(max(n, floor, 1))))


def pow2_at_most(n: float) -> int:
    """Largest power of two <= ``n`` (1 when ``n`` < 2)."""
    return 1 << max(0, int(max(n, 1)).bit_length() - 1)
