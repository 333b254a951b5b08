"""Token sampling with upstream's rules: temperature, then top-k if ``top_k > 0`` else nucleus if ``top_p < 1``.

Written to run inside the compiled decode step: the knobs are a tensor (a new temperature or top-p never
changes a graph) and the randomness comes in as uniforms drawn beforehand from an explicit, seeded
``torch.Generator`` (a compiled graph cannot take one). A token is drawn by the Gumbel-max trick,
``argmax(filtered logits + Gumbel noise)``: an exact draw from the filtered softmax, and a filtered token
(at -inf) can never win, so ``top_k=1`` is exactly greedy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# uniforms are clamped so the Gumbel noise -log(-log(u)) stays finite (an infinite one could beat -inf)
_U_MIN, _U_MAX = 1e-20, 1.0 - 1e-7


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


def filter_logits(logits: torch.Tensor, knobs: torch.Tensor) -> torch.Tensor:
    """Logits ``[N, V]`` / temperature with excluded tokens at -inf (top-k *instead of* top-p, as upstream).

    top-k keeps every token not below the k-th largest logit; top-p keeps the smallest prefix of the sorted
    tokens whose probability reaches ``top_p`` (the token that crosses it included, the first always kept).
    """
    temperature, top_k, top_p = knobs[0], knobs[1], knobs[2]
    logits = logits.float() / temperature
    ordered, order = torch.sort(logits, dim=-1, descending=True)
    rank = (top_k.long() - 1).clamp(0, logits.shape[-1] - 1).expand(logits.shape[0], 1)
    drop_k = logits < ordered.gather(-1, rank)
    crossed = ordered.softmax(-1).cumsum(-1) > top_p
    crossed = torch.cat([torch.zeros_like(crossed[:, :1]), crossed[:, :-1]], dim=-1)  # keep the crossing token
    drop_p = torch.zeros_like(crossed).scatter(-1, order, crossed) & (top_p < 1.0)
    return logits.masked_fill(torch.where(top_k > 0, drop_k, drop_p), float("-inf"))


def sample(logits: torch.Tensor, knobs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One token id per row, ``[N]`` int64, from ``uniforms`` ``[N, V]`` in [0, 1)."""
    gumbel = -torch.log(-torch.log(uniforms.clamp(_U_MIN, _U_MAX)))
    return torch.argmax(filter_logits(logits, knobs) + gumbel, dim=-1)
