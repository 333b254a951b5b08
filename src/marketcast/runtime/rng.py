"""Counter-based random numbers: a uniform is a pure function of (stream, counter), computed inside a graph.

Why: a model that draws from a stateful generator ties every window's randomness to its position in the
batch, and a compiled (CUDA-graph) step cannot take a ``torch.Generator``. Here each window gets a 32-bit
stream from ``(seed, window key)`` on the host, each decode step mixes its index in, and each value's counter
says which sample, variate, time step and draw it is. Nothing depends on batch composition, chunking or
the device: CPU and CUDA give the same bits.

The mixer is the 32-bit hash of the hash-prospector project (``x ^= x >> 16; x *= 0x21f0aaad; x ^= x >> 15;
x *= 0x735a2d97; x ^= x >> 15``), run on int64 tensors holding 32-bit values; both multipliers are below
2**31, so no product overflows int64 and no backend sees undefined behaviour.
"""

from __future__ import annotations

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
_M1, _M2 = 0x21F0AAAD, 0x735A2D97
_GOLDEN = 0x9E3779B9  # separates the step index from the stream before mixing


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A bijective avalanche hash of int64 values in ``[0, 2**32)``; the result is in the same range."""
    x = x ^ (x >> 16)
    x = (x * _M1) & MASK32
    x = x ^ (x >> 15)
    x = (x * _M2) & MASK32
    return x ^ (x >> 15)


def window_streams(seed: int, keys: np.ndarray) -> torch.Tensor:
    """int64 ``[B]`` streams in ``[0, 2**32)`` for windows identified by 64-bit ``keys`` under ``seed``."""
    k = torch.as_tensor(np.asarray(keys, dtype=np.uint64).view(np.int64))
    s = int(seed) & ((1 << 64) - 1)
    h = mix32(torch.full_like(k, (s & MASK32) ^ _GOLDEN))
    h = mix32(h ^ (s >> 32))
    h = mix32(h ^ (k & MASK32))
    return mix32(h ^ ((k >> 32) & MASK32))


def step_streams(streams: torch.Tensor, step: torch.Tensor | int) -> torch.Tensor:
    """The streams of decode step ``step`` (a 0-d int64 tensor inside a graph, or an int)."""
    return mix32(streams ^ mix32((step + _GOLDEN) & MASK32))


def uniforms(streams: torch.Tensor, counters: torch.Tensor) -> torch.Tensor:
    """float32 uniforms in the open interval (0, 1), one per broadcast element of ``streams`` x ``counters``.

    The top 24 bits of two mixing rounds, centred in their bin: exactly representable in float32, never 0
    or 1 (so logs and negative powers stay finite).
    """
    h = mix32(mix32((counters ^ streams) & MASK32) ^ streams)
    return ((h >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))
