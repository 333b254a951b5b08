"""Attention pieces shared by the model and the tokenizer: rotary angles, masks, and attention of many sample
paths over one shared context.

Sample paths of one window differ only in the tokens generated after the context, so the context's keys
and values are computed once per window and every path's queries attend them as extra query rows of one
batched product (:func:`attend_shared`); only the generated tokens live per path.
"""

from __future__ import annotations

import torch


def rotary_table(inv_freq: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``[length, head_dim]`` for absolute positions ``0..length-1``."""
    t = torch.arange(length, device=inv_freq.device).type_as(inv_freq)
    angles = t[:, None] * inv_freq[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Attention of a few queries over a long key/value cache, written out (scores, mask, softmax, weighted sum).

    Why not SDPA: with one query row and a mask, SDPA's fp32 kernel (memory-efficient attention) pads the
    query to a 64-row tile and took ~65 us per call on an H100, more than the whole rest of a decode step;
    written out, inductor fuses it into a couple of small kernels.
    """
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


def attend_shared(q: torch.Tensor, k_ctx: torch.Tensor, v_ctx: torch.Tensor, ctx_mask: torch.Tensor,
                  k_new: torch.Tensor, v_new: torch.Tensor, new_mask: torch.Tensor) -> torch.Tensor:
    """Queries ``[U, h, S, L, d]`` of ``S`` paths per window over the window's shared context ``[U, h, T, d]``
    (``ctx_mask`` ``[U, 1, 1, T]``, True = visible) and each path's own new keys ``[U, h, S, M, d]``
    (``new_mask`` ``[L, M]``): one softmax over both, the same numbers as attending the concatenation."""
    u, h, s, length, d = q.shape
    t = k_ctx.shape[-2]
    scale = d**-0.5
    s_ctx = (q.reshape(u, h, s * length, d) @ k_ctx.transpose(-2, -1)) * scale
    s_ctx = s_ctx.masked_fill(~ctx_mask, float("-inf")).view(u, h, s, length, t)
    s_new = ((q @ k_new.transpose(-2, -1)) * scale).masked_fill(~new_mask, float("-inf"))
    p = torch.cat([s_ctx, s_new], dim=-1).softmax(-1)
    shared = (p[..., :t].reshape(u, h, s * length, t) @ v_ctx).view(u, h, s, length, d)
    return shared + p[..., t:] @ v_new


def attention_mask(valid: torch.Tensor | None, always: bool = False) -> torch.Tensor | None:
    """Causal mask that also hides left padding: ``[B, 1, T, T]`` bool from ``valid`` ``[B, T]``.

    None (plain ``is_causal``, upstream's kernel) when nothing is padded, unless ``always`` (a compiled graph
    cannot branch on the data). A padded query may still see itself, so no row is fully masked (SDPA would
    return NaN there).
    """
    if valid is None or (not always and bool(valid.all())):
        return None
    t = valid.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=valid.device).tril()
    eye = torch.eye(t, dtype=torch.bool, device=valid.device)
    return ((causal & valid[:, None, :]) | eye)[:, None]
