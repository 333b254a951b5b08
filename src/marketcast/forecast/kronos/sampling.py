"""Token sampling with upstream's rules: temperature, then top-k if ``top_k > 0`` else nucleus if ``top_p < 1``.

Runs eagerly with an explicit ``torch.Generator`` (compiled graphs cannot take one), so a seed fixes the paths.
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


def filter_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Logits ``[N, V]`` with excluded tokens at -inf (upstream applies top-k *instead of* top-p)."""
    logits = logits.float() / params.temperature
    if params.top_k > 0:
        kth = torch.topk(logits, min(params.top_k, logits.shape[-1])).values[..., -1:]
        return logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        ordered, order = torch.sort(logits, descending=True)
        drop = ordered.softmax(-1).cumsum(-1) > params.top_p
        drop[..., 1:] = drop[..., :-1].clone()  # keep the token that crosses the threshold
        drop[..., 0] = False
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> torch.Tensor:
    """One token id per row, ``[N]`` int64."""
    probs = filter_logits(logits, params).softmax(-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
