"""Autoregressive decoding: prefill the window once, then one (s1, s2) token per step from a static KV cache.

Re-prefill rule. Rotary positions are absolute within the window (upstream re-runs the last ``max_context``
tokens every step, numbering them from 0). While ``T + i <= max_context`` (``T`` context tokens, step ``i``
counted from 0) the new token is appended at position ``T + i - 1`` and only it is computed. Once
``T + i > max_context`` the window slides: every kept token would get a new position *and* lose the dropped
token from its history, so the cache is rebuilt by a full prefill of the last ``max_context`` tokens at that
step (exactly what upstream computes). Example: lookback 400, pred_len 16 never re-prefills; lookback 512
re-prefills on steps 1..pred_len-1.

The compiled function is :meth:`Kronos.step` (transformer step, s1 draw, dependency layer, s2 draw); its
shapes depend only on the row count ``N`` and the cache window, so lookback and pred_len never cause a
recompile. Every input it reads lives in the row bucket's :class:`StaticCache`, so a CUDA-graph replay
needs no input copies; per step the host only writes the position, the stamp and fresh uniforms (drawn
from the caller's seeded generator) and replays. Prefill runs eager.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from marketcast.runtime.guard import GuardedCompile
from marketcast.runtime.steps import CompiledSteps
from marketcast.forecast.kronos.kv_cache import StaticCache
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.sampling import SamplingParams

@dataclass
class Generated:
    s1: torch.Tensor  # [N, pred_len]
    s2: torch.Tensor
    re_prefills: int


class CachedDecoder:
    """Owns the compiled step (one wrapper per row bucket, sealed after its first call, see
    :class:`~marketcast.runtime.steps.CompiledSteps`) and one :class:`StaticCache` per row count."""

    def __init__(self, model: Kronos, mode: str | None) -> None:
        self.model = model
        self.window = model.config.max_context
        self.mode = mode
        self.steps = CompiledSteps("kronos", mode, model.head.proj_s1.weight.device)
        self._caches: dict[int, StaticCache] = {}
        self._rotary = None

    @property
    def guards(self) -> list[GuardedCompile]:
        return self.steps.compile_guards()

    def _cache(self, rows: int, device, dtype) -> StaticCache:
        if rows not in self._caches:
            self._caches[rows] = StaticCache.allocate(self.model, rows, self.window, device, dtype)
        return self._caches[rows]

    @torch.no_grad()
    def generate(self, s1, s2, stamps, valid, pred_len: int, params: SamplingParams,
                 generator: torch.Generator, rows: torch.Tensor | None = None) -> Generated:
        """``s1``/``s2``/``valid`` ``[U, T]`` context tokens (T <= window), ``stamps`` ``[U, T + pred_len, 5]``.

        ``rows`` ``[N]`` (default ``arange(U)``): the context each generated row continues, so the sample paths
        of one series share a single prefill of its context. Returns ``[N, pred_len]`` tokens.
        """
        t = s1.shape[1]
        if rows is not None:
            s1_ctx, s2_ctx, stamps_ctx, valid_ctx = s1, s2, stamps[:, :t], valid
            s1, s2, stamps, valid = (x.index_select(0, rows) for x in (s1, s2, stamps, valid))
        n = s1.shape[0]
        if t > self.window:
            raise ValueError(f"context of {t} tokens exceeds max_context {self.window}")
        if self._rotary is None:
            self._rotary = self.model.rotary(self.window)
            for table in self._rotary:
                torch._dynamo.mark_static_address(table)
        cos, sin = self._rotary
        weight = self.model.head.proj_s1.weight
        cache = self._cache(n, weight.device, weight.dtype)
        cache.knobs.copy_(params.knobs())
        s1_all = torch.cat([s1, s1.new_zeros(n, pred_len)], 1)
        s2_all = torch.cat([s2, s2.new_zeros(n, pred_len)], 1)
        valid_all = torch.cat([valid, valid.new_ones(n, pred_len)], 1)
        re_prefills = 0
        for i in range(pred_len):
            known = t + i
            torch.rand(cache.noise.shape, generator=generator, device=cache.noise.device, out=cache.noise)
            if i == 0 and rows is not None:  # one pass per distinct context, copied to the rows that share it
                logits, context = self.model.prefill(s1_ctx, s2_ctx, stamps_ctx, valid_ctx, cos, sin, cache, rows)
            elif i == 0:
                logits, context = self.model.prefill(s1, s2, stamps[:, :t], valid, cos, sin, cache)
            elif known > self.window:  # the paths differ from here on: every row re-runs its own window
                sl = slice(known - self.window, known)
                logits, context = self.model.prefill(s1_all[:, sl], s2_all[:, sl], stamps[:, sl],
                                                     valid_all[:, sl], cos, sin, cache)
            if i == 0 or known > self.window:
                cache.tokens.copy_(self.model.draw(logits, context, cache.knobs, cache.noise, cache.dep_k,
                                                   cache.dep_v, cache.valid)[:, :, None])
                re_prefills += i > 0
            else:
                cache.pos.fill_(known - 1)  # the newest token's position; the step predicts the one after it
                cache.stamp.copy_(stamps[:, known - 1 : known])
                self.steps.call("step", (n,), self.model.step, *cache.decode_args(cos, sin))
            s1_all[:, known] = cache.tokens[0, :, 0]
            s2_all[:, known] = cache.tokens[1, :, 0]
        return Generated(s1_all[:, t:], s2_all[:, t:], re_prefills)

