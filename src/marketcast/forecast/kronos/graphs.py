"""The functions the Kronos decoder compiles, one graph each, plus the eager sliding-window step.

* :func:`prefill_draw` (windows x samples x context x slots bucket): tokenize the context, run the model
  and the de-tokenizer over it once per window, store what the sample paths share in the
  :class:`ContextCache`, and draw the first token of every path (one sort of the shared logits per
  window). At horizon 1 it also de-tokenizes that token: the whole forecast is one graph.
* :func:`step`: one more token of every path against the shared context plus the path's own tokens.
* :func:`detok`: the generated tokens of every path through the de-tokenizer against the shared context.

Each writes its results into static buffers (nothing to copy out of a CUDA graph); uniforms are
counter-based per (window stream, step, sample, s1|s2), so a window's paths do not depend on the batch.
"""

from __future__ import annotations

import torch

from marketcast.forecast.kronos.attention import attention_mask
from marketcast.forecast.kronos.kv_cache import ContextCache, PathCache
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.sampling import sample
from marketcast.forecast.kronos.tokenizer import KronosTokenizer
from marketcast.runtime.rng import step_streams, uniforms


def path_uniforms(streams: torch.Tensor, step, sample_ids: torch.Tensor) -> torch.Tensor:
    """``[..., 2]`` uniforms (s1, s2) of step ``step`` for paths ``sample_ids``, broadcast with ``streams``."""
    counters = torch.stack([2 * sample_ids, 2 * sample_ids + 1], dim=-1)
    return uniforms(step_streams(streams, step)[..., None], counters)


def prefill_draw(model: Kronos, tokenizer: KronosTokenizer, ctx: ContextCache, paths: PathCache, x: torch.Tensor,
                 valid: torch.Tensor, dec_valid: torch.Tensor, stamp: torch.Tensor,
                 bars: bool) -> torch.Tensor | None:
    """Normalised bars ``[U, T, 6]`` (left padding: ``valid`` False; ``dec_valid`` also drops what falls out
    of the de-tokenizer's window) and their calendar stamps ``[U, T, 5]`` into ``ctx``; token 0 of every
    path into ``paths``; with ``bars``, the paths' de-tokenized bars (:func:`detok`)."""
    s1, s2 = tokenizer.encode(x, valid, always_mask=True)
    context, keys, values = model.window_pass(s1, s2, stamp, attention_mask(valid, always=True))
    dec_keys, dec_values = tokenizer.decoder_prefix(s1, s2, attention_mask(dec_valid, always=True))
    dep_k, dep_v = model.dep_layer.keys_values(context)
    for dst, src in zip([*ctx.k, *ctx.v, *ctx.dec_k, *ctx.dec_v, ctx.dep_k, ctx.dep_v],
                        [*keys, *values, *dec_keys, *dec_values, dep_k, dep_v]):
        dst.copy_(src)
    ctx.mask.copy_(valid[:, None, None])
    ctx.dec_mask.copy_(dec_valid[:, None, None])
    ctx.s1.copy_(s1)
    ctx.s2.copy_(s2)
    _first_draw(model, ctx, paths, model.head.proj_s1(context[:, -1]), context[:, -1:])
    return detok(tokenizer, ctx, paths) if bars else None


def _first_draw(model: Kronos, ctx: ContextCache, paths: PathCache, logits: torch.Tensor, last: torch.Tensor) -> None:
    """Token 0 of every path into ``paths.tokens[..., 0]`` from the windows' s1 ``logits`` ``[U, V1]`` and
    last hidden state ``last`` ``[U, 1, d]``."""
    samples = torch.arange(paths.tokens.shape[2], device=paths.streams.device)
    u = path_uniforms(paths.streams[:, None], 0, samples)  # [U, S, 2]
    s1 = sample(logits, paths.knobs, u[..., 0])  # [U, S]: one sort per window
    x2 = model.dep_layer(last, model.embedding.emb_s1(s1), ctx.dep_k, ctx.dep_v, ctx.mask)  # paths as queries
    s2 = sample(model.head.proj_s2(x2), paths.knobs, u[..., 1:])[..., 0]
    paths.tokens.index_copy_(3, paths.slots[:1], torch.stack([s1, s2])[..., None])


def step(model: Kronos, ctx: ContextCache, paths: PathCache) -> None:
    """Feed the token at ``paths.slot`` (rotary position ``paths.pos``) and draw the next one into slot + 1."""
    prev = paths.tokens.index_select(3, paths.slot)[..., 0]  # [2, U, S]
    new_mask = (paths.slots <= paths.slot)[None]  # [1 query, M slots]
    logits, context = model.step_paths(prev[0], prev[1], paths.stamp, paths.pos, ctx, paths, new_mask)
    samples = torch.arange(prev.shape[-1], device=prev.device)
    u = path_uniforms(paths.streams[:, None], paths.slot + 1, samples)  # [U, S, 2]
    s1 = sample(logits, paths.knobs, u[..., :1])[..., 0]
    s2 = sample(model.s2_logits_paths(context, s1, ctx, paths, new_mask), paths.knobs, u[..., 1:])[..., 0]
    paths.tokens.index_copy_(3, paths.slot + 1, torch.stack([s1, s2])[..., None])


def detok(tokenizer: KronosTokenizer, ctx: ContextCache, paths: PathCache) -> torch.Tensor:
    """Normalised bars ``[U, S, M, 6]`` of every path's generated tokens (slots past the horizon are
    decoded too and dropped by the caller; the decoder is causal, so they change nothing before them)."""
    return tokenizer.decode_paths(paths.tokens[0], paths.tokens[1], ctx.dec_k, ctx.dec_v, ctx.dec_mask).float()


@torch.no_grad()
def slide(model: Kronos, ctx: ContextCache, paths: PathCache, i: int, window: int, stamps: torch.Tensor,
          rows: int) -> None:
    """Token ``i`` once the context plus ``i`` generated tokens exceed the window (eager, ``rows`` paths at a
    time): every path re-runs its own last ``window`` tokens from position 0, as upstream does every step."""
    u_count, t = ctx.s1.shape
    samples = paths.tokens.shape[2]
    keep = window - i  # context tokens still inside the window
    s1, s2 = (torch.cat([c[:, t - keep:, None].expand(-1, -1, samples).movedim(1, 2), g[..., :i]], dim=-1)
              for c, g in ((ctx.s1, paths.tokens[0]), (ctx.s2, paths.tokens[1])))  # [U, S, window]
    stamp = torch.cat([stamps[:, t - keep:t], stamps[:, t:t + i]], dim=1)  # [U, window, 5]
    valid = torch.cat([ctx.mask[:, 0, 0, t - keep:], ctx.mask.new_ones(u_count, i)], dim=1)  # padding stays masked
    n = u_count * samples
    rows_of = lambda a: a[:, None].expand(-1, samples, *a.shape[1:]).reshape(n, *a.shape[1:])  # noqa: E731
    flat_s1, flat_s2 = (a.reshape(n, window) for a in (s1, s2))
    stamp_rows, valid_rows, streams = rows_of(stamp), rows_of(valid), rows_of(paths.streams)
    sample_ids = torch.arange(samples, device=streams.device).repeat(u_count)
    out = torch.empty(2, n, dtype=torch.long, device=streams.device)
    for a in range(0, n, rows):
        b = min(n, a + rows)
        context, _, _ = model.window_pass(flat_s1[a:b], flat_s2[a:b], stamp_rows[a:b],
                                          attention_mask(valid_rows[a:b]))
        u = path_uniforms(streams[a:b], i, sample_ids[a:b])  # [rows, 2]
        s1_new = sample(model.head.proj_s1(context[:, -1]), paths.knobs, u[:, :1])
        dep_k, dep_v = model.dep_layer.keys_values(context)
        x2 = model.dep_layer(context[:, -1:], model.embedding.emb_s1(s1_new), dep_k, dep_v,
                             valid_rows[a:b, None, None, :])
        out[0, a:b] = s1_new[:, 0]
        out[1, a:b] = sample(model.head.proj_s2(x2[:, 0]), paths.knobs, u[:, 1:])[:, 0]
    paths.tokens[..., i] = out.view(2, u_count, samples)
