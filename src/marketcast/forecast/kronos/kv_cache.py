"""Preallocated key/value buffers for one row count; positions are tensors, writes are in place.

One cache per row bucket lives as long as the forecaster, so its addresses never change (CUDA graphs
replay against them) and no decode step allocates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class StaticCache:
    k: list[torch.Tensor]  # per layer [N, heads, window, head_dim] rotated keys; separate tensors (not views
    v: list[torch.Tensor]  # of one 5-D buffer) so inductor updates them in place instead of copying the cache
    dep_k: torch.Tensor  # [N, dep_heads, window, dep_head_dim] dependency-layer keys (no rotation)
    dep_v: torch.Tensor
    valid: torch.Tensor  # [N, window] bool: written and not padding

    @classmethod
    def allocate(cls, model, rows: int, window: int, device, dtype) -> "StaticCache":
        cfg = model.config
        dep = model.dep_layer.cross_attn
        kv = (rows, cfg.n_heads, window, cfg.d_model // cfg.n_heads)
        dkv = (rows, dep.n_heads, window, dep.head_dim)
        make = lambda shape: torch.zeros(shape, device=device, dtype=dtype)  # noqa: E731
        layers = range(cfg.n_layers)
        cache = cls([make(kv) for _ in layers], [make(kv) for _ in layers], make(dkv), make(dkv),
                    torch.zeros(rows, window, dtype=torch.bool, device=device))
        for t in cache.tensors():
            torch._dynamo.mark_static_address(t)  # CUDA graphs may treat the buffers as fixed inputs
        return cache

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (*self.k, *self.v, self.dep_k, self.dep_v, self.valid)

    def step_args(self) -> tuple:
        """The cache arguments of :meth:`Kronos.step_s1`, in order."""
        return self.k, self.v, self.dep_k, self.dep_v, self.valid

    @property
    def window(self) -> int:
        return self.valid.shape[1]

    def write_prefix(self, keys, values, dep_k, dep_v, valid) -> None:
        """Positions ``0..T-1`` from a full-window pass; later positions become invalid."""
        t = valid.shape[1]
        for i, (k, v) in enumerate(zip(keys, values)):
            self.k[i][:, :, :t].copy_(k)
            self.v[i][:, :, :t].copy_(v)
        self.dep_k[:, :, :t].copy_(dep_k)
        self.dep_v[:, :, :t].copy_(dep_v)
        self.valid.zero_()
        self.valid[:, :t].copy_(valid)
