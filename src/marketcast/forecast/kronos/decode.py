"""Sample paths for a chunk of windows: one prefill per window shared by all its paths, then one token of
every path per step, then the de-tokenizer over the generated tokens only.

Re-prefill rule. Rotary positions are relative in effect (upstream re-runs the last ``max_context`` tokens
every step, numbering them from 0; RoPE scores depend only on distances, so the left padding of a context
bucket changes nothing). While ``T + i <= max_context`` (``T`` context bars, step ``i`` counted from 0) the
new token attends the cached context and the path's earlier tokens. Once ``T + i > max_context`` the
window slides: every kept token would lose the dropped one from its history, so each path re-runs its own
last ``max_context`` tokens (:func:`~.graphs.slide`, eager; exactly upstream's computation). Lookback 400
with 16 steps never slides; :meth:`KronosForecaster.lookback_for` keeps short horizons out of it.

The de-tokenizer decodes the last ``max_context`` tokens of context + generated, as upstream: its shared
prefix (the context, minus what falls out of that window) is computed once per window in the prefill.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from marketcast.forecast.kronos import graphs
from marketcast.forecast.kronos.kv_cache import ContextCache, PathCache
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.sampling import SamplingParams
from marketcast.forecast.kronos.tokenizer import KronosTokenizer
from marketcast.runtime.guard import GuardedCompile
from marketcast.runtime.shapes import pow2_at_least
from marketcast.runtime.steps import CompiledSteps

CONTEXT_QUANTUM = 64  # context lengths are bucketed to multiples of this (capped at max_context)


def context_bucket(length: int, window: int) -> int:
    """Tokens a context of ``length`` bars is left-padded to: the next multiple of 64, at most the window."""
    return min(window, -(-length // CONTEXT_QUANTUM) * CONTEXT_QUANTUM)


@dataclass
class Decoded:
    bars: torch.Tensor  # [U, S, H, 6] normalised bars of every path
    re_prefills: int


class PathDecoder:
    """Owns the compiled graphs (one wrapper per function and bucket, sealed after its first call, see
    :class:`~marketcast.runtime.steps.CompiledSteps`) and the static caches of every bucket."""

    def __init__(self, model: Kronos, tokenizer: KronosTokenizer, mode: str | None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.window = model.config.max_context
        self.mode = mode
        self.steps = CompiledSteps("kronos", mode, model.head.proj_s1.weight.device)
        self._contexts: dict[tuple, ContextCache] = {}
        self._paths: dict[tuple, PathCache] = {}

    @property
    def guards(self) -> list[GuardedCompile]:
        return self.steps.compile_guards()

    @property
    def device(self) -> torch.device:
        return self.model.head.proj_s1.weight.device

    def _caches(self, windows: int, length: int, samples: int, slots: int) -> tuple[ContextCache, PathCache]:
        dtype, device = self.model.head.proj_s1.weight.dtype, self.device
        if (windows, length) not in self._contexts:
            self._contexts[windows, length] = ContextCache.allocate(self.model, self.tokenizer, windows, length,
                                                                    device, dtype)
        if (windows, samples, slots) not in self._paths:
            self._paths[windows, samples, slots] = PathCache.allocate(self.model, windows, samples, slots, device,
                                                                      dtype)
        return self._contexts[windows, length], self._paths[windows, samples, slots]

    @torch.no_grad()
    def decode(self, x: torch.Tensor, valid: torch.Tensor, stamps: torch.Tensor, context: int, horizon: int,
               samples: int, params: SamplingParams, streams: torch.Tensor, slide_rows: int) -> Decoded:
        """``x`` ``[U, T, 6]`` normalised bars left-padded to a context bucket ``T`` (``valid`` False there;
        ``context`` bars are the batch's own, padding inside the window included), ``stamps``
        ``[U, T + horizon, 5]``, ``streams`` ``[U]``: ``samples`` paths of ``horizon`` bars per window."""
        u, t = valid.shape
        slots = pow2_at_least(horizon)
        ctx, paths = self._caches(u, t, samples, slots)
        drop = max(0, context + horizon - self.window)  # context tokens outside the de-tokenizer's window
        dec_valid = valid & (torch.arange(t, device=valid.device) >= t - context + drop)
        paths.knobs.copy_(params.knobs())
        paths.streams.copy_(streams)
        bucket = (u, samples, t, slots)
        bars = self.steps.call("prefill", bucket, graphs.prefill_draw, self.model, self.tokenizer, ctx, paths, x,
                               valid, dec_valid, stamps[:, :t].contiguous(), horizon == 1)
        if horizon == 1:
            return Decoded(bars, 0)
        re_prefills = 0
        for i in range(1, horizon):
            if context + i > self.window:
                graphs.slide(self.model, ctx, paths, i, self.window, stamps, slide_rows)
                re_prefills += 1
                continue
            paths.slot.fill_(i - 1)
            paths.pos.fill_(t + i - 1)
            paths.stamp.copy_(stamps[:, t + i - 1:t + i])
            self.steps.call("step", bucket, graphs.step, self.model, ctx, paths)
        bars = self.steps.call("detok", bucket, graphs.detok, self.tokenizer, ctx, paths)
        return Decoded(bars[:, :, :horizon], re_prefills)
