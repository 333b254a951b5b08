"""A fixed-size key/value cache for the time-wise layers, built so one compiled decode graph serves every step.

Each layer has its own registered key and value buffers (static-address on CUDA, so CUDA graphs may mutate
them). The write position is a 0-d tensor, writes go through ``index_copy_`` and reads always cover the
whole buffer with a validity mask. Nothing here turns a tensor into a Python number, so the decode step has
no value guards. Separate buffers per layer matter under torch.compile: a write into a view of one big
buffer makes the functionalized graph rebuild the whole base tensor, every layer, on every step.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class StaticKVCache(nn.Module):
    """Per time-wise layer, keys/values ``[rows, heads, length, head_dim]`` for rows = sequences x variates."""

    def __init__(self, layers: int, rows: int, heads: int, length: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        self.layers = layers
        shape = (rows, heads, length, head_dim)
        for i in range(layers):
            self.register_buffer(f"k{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
            self.register_buffer(f"v{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer("slots", torch.arange(length, device=device), persistent=False)
        if torch.device(device).type == "cuda":
            for buf in self.buffers():
                torch._dynamo.mark_static_address(buf)

    def keys(self, layer: int) -> torch.Tensor:
        return getattr(self, f"k{layer}")

    def values(self, layer: int) -> torch.Tensor:
        return getattr(self, f"v{layer}")

    @property
    def length(self) -> int:
        return self.k0.shape[2]

    @property
    def rows(self) -> int:
        return self.k0.shape[0]

    def write(self, layer: int, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store one step's ``k``/``v`` ``[rows, heads, 1, head_dim]`` at slot ``pos`` (0-d int64 tensor)."""
        index = pos.reshape(1)
        self.keys(layer).index_copy_(2, index, k)
        self.values(layer).index_copy_(2, index, v)

    def valid(self, pos: torch.Tensor) -> torch.Tensor:
        """``[length]`` bool: slots written up to and including ``pos``."""
        return self.slots <= pos

    @torch.no_grad()
    def load_prefix(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Copy a prefilled context ``[layers, *row_dims, heads, n, head_dim]`` into slots ``[0, n)`` (eager).

        ``row_dims`` multiply to ``rows``; ``k``/``v`` may be broadcast (expanded) views, which are copied
        straight into the buffers without materialising one copy per sample first.
        """
        n, row_dims = k.shape[-2], tuple(k.shape[1:-3])
        if n > self.length or k.shape[0] != self.layers or math.prod(row_dims) != self.rows:
            raise ValueError(f"prefix {tuple(k.shape)} does not fit cache of {self.layers} x "
                             f"{tuple(self.k0.shape)}")
        for i in range(self.layers):
            for buf, src in ((self.keys(i), k[i]), (self.values(i), v[i])):
                buf.view(*row_dims, *buf.shape[1:])[..., :n, :].copy_(src)
