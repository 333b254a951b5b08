"""Token sampling with upstream's rules: temperature, then top-k if ``top_k > 0`` else nucleus if ``top_p < 1``.

Written to run inside the compiled decode step: the knobs are a tensor (a new temperature or top-p never
changes a graph) and the randomness comes in as uniforms (counter-based, :mod:`marketcast.runtime.rng`; a
compiled graph cannot take a generator). A token is drawn by inverse CDF over the filtered distribution in
sorted order: one uniform per draw, an exact draw from the filtered softmax; a filtered token has
probability exactly 0, so it is never drawn and ``top_k=1`` is exactly greedy. The logits are sorted once per
row, so the paths that share a row's logits (the first token of every path of a window) share the sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 0.9

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"need top_k >= 0 and 0 < top_p <= 1, got top_k={self.top_k}, top_p={self.top_p}")

    def knobs(self) -> torch.Tensor:
        """float32 ``[3]`` (temperature, top_k, top_p): what :func:`sample` reads."""
        return torch.tensor([self.temperature, float(self.top_k), self.top_p], dtype=torch.float32)


def _sorted_filtered(logits: torch.Tensor, knobs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits ``[..., V]`` / temperature sorted descending, excluded tokens at -inf, and the sort order.

    top-k keeps every token not below the k-th largest logit; top-p keeps the smallest prefix of the sorted
    tokens whose probability reaches ``top_p`` (the token that crosses it included, the first always kept).
    """
    temperature, top_k, top_p = knobs[0], knobs[1], knobs[2]
    ordered, order = torch.sort(logits.float() / temperature, dim=-1, descending=True)
    rank = (top_k.long() - 1).clamp(0, logits.shape[-1] - 1).expand(*logits.shape[:-1], 1)
    drop_k = ordered < ordered.gather(-1, rank)
    crossed = ordered.softmax(-1).cumsum(-1) > top_p
    crossed = torch.cat([torch.zeros_like(crossed[..., :1]), crossed[..., :-1]], dim=-1)  # keep the crossing token
    drop = torch.where(top_k > 0, drop_k, crossed & (top_p < 1.0))
    return ordered.masked_fill(drop, float("-inf")), order


def filter_logits(logits: torch.Tensor, knobs: torch.Tensor) -> torch.Tensor:
    """Logits ``[..., V]`` / temperature with excluded tokens at -inf, in the original order (top-k *instead
    of* top-p, as upstream)."""
    ordered, order = _sorted_filtered(logits, knobs)
    return torch.empty_like(ordered).scatter(-1, order, ordered)


def sample(logits: torch.Tensor, knobs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Token ids ``[..., M]`` int64: ``M`` draws from each row of ``logits`` ``[..., V]``, one per uniform in
    ``uniforms`` ``[..., M]`` (in [0, 1])."""
    ordered, order = _sorted_filtered(logits, knobs)
    cdf = ordered.softmax(-1).cumsum(-1).contiguous()
    target = uniforms.clamp(0.0, 1.0) * cdf[..., -1:]  # scaled to the total: never past the last kept token
    rank = torch.searchsorted(cdf, target.contiguous()).clamp_max(logits.shape[-1] - 1)
    return order.gather(-1, rank)
