"""Preallocated buffers for one row count: keys/values plus the per-step inputs of the compiled decode step.

One cache per row bucket lives as long as the forecaster, so its addresses never change (CUDA graphs
replay against them as static inputs, with no copy) and no decode step allocates. The step reads its
tokens, calendar stamp, position, uniforms and sampling knobs from here and writes the sampled tokens back.
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
    tokens: torch.Tensor  # [2, N, 1] int64: the newest (s1, s2) tokens, input and output of a step
    stamp: torch.Tensor  # [N, 1, 5] int64 calendar features of the newest token
    pos: torch.Tensor  # [1] int64 its position in the window
    noise: torch.Tensor  # [N, V1 + V2] float32 uniforms for this step's two draws
    knobs: torch.Tensor  # [3] float32 temperature, top_k, top_p

    @classmethod
    def allocate(cls, model, rows: int, window: int, device, dtype) -> "StaticCache":
        cfg = model.config
        dep = model.dep_layer.cross_attn
        kv = (rows, cfg.n_heads, window, cfg.d_model // cfg.n_heads)
        dkv = (rows, dep.n_heads, window, dep.head_dim)
        make = lambda shape: torch.zeros(shape, device=device, dtype=dtype)  # noqa: E731
        layers = range(cfg.n_layers)
        cache = cls([make(kv) for _ in layers], [make(kv) for _ in layers], make(dkv), make(dkv),
                    torch.zeros(rows, window, dtype=torch.bool, device=device),
                    torch.zeros(2, rows, 1, dtype=torch.long, device=device),
                    torch.zeros(rows, 1, 5, dtype=torch.long, device=device),
                    torch.zeros(1, dtype=torch.long, device=device),
                    torch.zeros(rows, 2**cfg.s1_bits + 2**cfg.s2_bits, device=device),
                    torch.zeros(3, device=device))
        for t in cache.tensors():
            torch._dynamo.mark_static_address(t)  # CUDA graphs may treat the buffers as fixed inputs
        return cache

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (*self.k, *self.v, self.dep_k, self.dep_v, self.valid, self.tokens, self.stamp, self.pos, self.noise,
                self.knobs)

    def step_args(self) -> tuple:
        """The cache arguments of :meth:`Kronos.step_s1`, in order."""
        return self.k, self.v, self.dep_k, self.dep_v, self.valid

    def decode_args(self, cos: torch.Tensor, sin: torch.Tensor) -> tuple:
        """The arguments of :meth:`Kronos.step`: everything it reads or writes lives here, but the rotary table."""
        return self.tokens, self.stamp, self.pos, self.noise, self.knobs, cos, sin, *self.step_args()

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
