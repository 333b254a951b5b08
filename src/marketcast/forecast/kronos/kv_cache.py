"""Preallocated buffers of the decode: what a window's sample paths share, and what each path owns.

:class:`ContextCache` holds, per window, the context's keys/values in every model layer, the dependency
layer and the de-tokenizer, and the context tokens; it is written once by the prefill.
:class:`PathCache` holds, per sample path, only the keys/values of the tokens generated so far, the tokens
themselves, and the step's inputs (slot, position, calendar stamp, sampling knobs, window streams).
Memory per path is a few generated slots instead of the whole window, which is what lets hundreds of
paths per window share one batch.

Each cache lives as long as the forecaster (one per shape bucket), so its addresses never change: CUDA
graphs replay against the buffers as static inputs, and no decode step allocates. Keys/values are lists of
per-layer tensors, not views of one big tensor: with views, inductor copied the whole cache every step.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


def _static(obj) -> None:
    for f in fields(obj):
        value = getattr(obj, f.name)
        for t in value if isinstance(value, list) else [value]:
            torch._dynamo.mark_static_address(t)  # CUDA graphs may treat the buffers as fixed inputs


@dataclass
class ContextCache:
    k: list[torch.Tensor]  # per model layer [U, heads, T, head_dim] rotated keys
    v: list[torch.Tensor]
    dep_k: torch.Tensor  # [U, dep_heads, T, dep_head_dim] dependency-layer keys (no rotation)
    dep_v: torch.Tensor
    mask: torch.Tensor  # [U, 1, 1, T] bool: real context tokens
    dec_k: list[torch.Tensor]  # per de-tokenizer layer [U, heads, T, head_dim]
    dec_v: list[torch.Tensor]
    dec_mask: torch.Tensor  # [U, 1, 1, T] bool: context tokens inside the de-tokenizer's window
    s1: torch.Tensor  # [U, T] int64 context tokens (the sliding-window phase re-reads them)
    s2: torch.Tensor

    @classmethod
    def allocate(cls, model, tokenizer, windows: int, length: int, device, dtype) -> "ContextCache":
        cfg, tcfg, dep = model.config, tokenizer.config, model.dep_layer.cross_attn
        make = lambda *shape, dt=dtype: torch.zeros(shape, device=device, dtype=dt)  # noqa: E731
        hd, thd = cfg.d_model // cfg.n_heads, tcfg.d_model // tcfg.n_heads
        dec = range(len(tokenizer.decoder))
        cache = cls([make(windows, cfg.n_heads, length, hd) for _ in range(cfg.n_layers)],
                    [make(windows, cfg.n_heads, length, hd) for _ in range(cfg.n_layers)],
                    make(windows, dep.n_heads, length, dep.head_dim), make(windows, dep.n_heads, length, dep.head_dim),
                    make(windows, 1, 1, length, dt=torch.bool),
                    [make(windows, tcfg.n_heads, length, thd, dt=torch.float32) for _ in dec],
                    [make(windows, tcfg.n_heads, length, thd, dt=torch.float32) for _ in dec],
                    make(windows, 1, 1, length, dt=torch.bool), make(windows, length, dt=torch.long),
                    make(windows, length, dt=torch.long))
        _static(cache)
        return cache


@dataclass
class PathCache:
    k: list[torch.Tensor]  # per model layer [U, heads, S, M, head_dim]: the generated tokens' keys
    v: list[torch.Tensor]
    dep_k: torch.Tensor  # [U, dep_heads, S, M, dep_head_dim]
    dep_v: torch.Tensor
    tokens: torch.Tensor  # [2, U, S, M] int64 generated (s1, s2)
    slots: torch.Tensor  # [M] int64 0..M-1
    slot: torch.Tensor  # [1] int64: the slot of the token a step feeds (the step draws slot + 1)
    pos: torch.Tensor  # [1] int64: that token's rotary position
    stamp: torch.Tensor  # [U, 1, 5] int64 its calendar features
    knobs: torch.Tensor  # [3] float32 temperature, top_k, top_p
    streams: torch.Tensor  # [U] int64 the windows' random streams

    @classmethod
    def allocate(cls, model, windows: int, samples: int, slots: int, device, dtype) -> "PathCache":
        cfg, dep = model.config, model.dep_layer.cross_attn
        make = lambda *shape, dt=dtype: torch.zeros(shape, device=device, dtype=dt)  # noqa: E731
        kv = (windows, cfg.n_heads, samples, slots, cfg.d_model // cfg.n_heads)
        dkv = (windows, dep.n_heads, samples, slots, dep.head_dim)
        cache = cls([make(*kv) for _ in range(cfg.n_layers)], [make(*kv) for _ in range(cfg.n_layers)],
                    make(*dkv), make(*dkv), make(2, windows, samples, slots, dt=torch.long),
                    torch.arange(slots, device=device), make(1, dt=torch.long), make(1, dt=torch.long),
                    make(windows, 1, 5, dt=torch.long), make(3, dt=torch.float32), make(windows, dt=torch.long))
        _static(cache)
        return cache
