"""How one forecast call is cut into compiled calls, sized from a memory budget.

Windows are prefilled in chunks and decoded in groups of (windows x sample paths); both are powers of two
(shape buckets, so a new batch size rarely compiles a new graph) and as large as the budget allows, so a
GPU is filled instead of looped over. The byte estimates are eager upper bounds (a compiled graph fuses
most temporaries away); :func:`marketcast.runtime.memory.with_oom_backoff` covers what they miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from marketcast.forecast.toto.buckets import cache_slots, context_patches
from marketcast.forecast.toto.config import TotoConfig
from marketcast.runtime.memory import units_in
from marketcast.runtime.shapes import pow2_at_least, pow2_at_most

F32 = 4
DRAW_TEMPS = 12  # float32-sized temporaries per drawn value (3 uniforms, component index, gathers, result)


@dataclass(frozen=True)
class Plan:
    windows: int  # real windows in the call
    chunk: int  # windows per prefill call (power of two)
    patches: int  # context patches after left padding
    steps: int  # patches of horizon
    samples: int  # paths returned per window
    sample_bucket: int  # paths drawn per window (power of two >= samples)
    draw_steps: int  # values drawn per path from the prefill's mixture (power of two; P when decoding)
    per: int  # paths per window in one decode call
    group: int  # windows per decode call
    slots: int  # decode cache slots


def _token_bytes(cfg: TotoConfig, itemsize: int) -> int:
    """Activations of one token through a layer (q/k/v, residuals, norms, SwiGLU's gate and value)."""
    return (10 * cfg.embed_dim + 3 * cfg.mlp_hidden_dim) * itemsize


def _head_bytes(cfg: TotoConfig, variates: int) -> int:
    """The folded head's raw projections and the activated mixture of one patch, float32."""
    return 3 * variates * cfg.patch_size * 4 * cfg.k_components * F32


def prefill_bytes(cfg: TotoConfig, patches: int, variates: int, samples: int, draw_steps: int, keep_kv: bool,
                  itemsize: int) -> int:
    """Working memory of one window in a prefill-and-draw call."""
    tokens = patches * variates
    time_layers = cfg.layer_axes().count("time")
    kv = 4 * time_layers * tokens * cfg.embed_dim * itemsize if keep_kv else 0  # per layer, then stacked
    return (tokens * _token_bytes(cfg, itemsize) + kv + _head_bytes(cfg, variates)
            + variates * draw_steps * samples * DRAW_TEMPS * F32)


def decode_bytes(cfg: TotoConfig, slots: int, variates: int, steps: int, itemsize: int) -> int:
    """Working memory of one sample path in a decode call: its cache rows, one step's activations and draws,
    and its share of the group's result buffer."""
    time_layers = cfg.layer_axes().count("time")
    cache = 2 * time_layers * variates * cfg.embed_dim * slots * itemsize
    step = variates * _token_bytes(cfg, itemsize) + _head_bytes(cfg, variates)
    draws = variates * cfg.patch_size * DRAW_TEMPS * F32
    return cache + step + draws + variates * steps * cfg.patch_size * F32


def make_plan(cfg: TotoConfig, *, windows: int, length: int, horizon: int, samples: int, budget: int,
              itemsize: int, variates: int, samples_per_batch: int | None = None) -> Plan:
    """The plan for ``windows`` contexts of ``length`` steps; half the budget for the prefill chunk and half
    for the decode group when the horizon needs decoding, all of it for the prefill otherwise."""
    p = cfg.patch_size
    patches = context_patches(length, p)
    steps = math.ceil(horizon / p)
    bucket = pow2_at_least(samples)
    draw_steps = pow2_at_least(min(horizon, p)) if steps == 1 else p
    window_cap = pow2_at_least(windows)
    prefill_budget = budget if steps == 1 else budget // 2
    chunk = units_in(prefill_budget, prefill_bytes(cfg, patches, variates, bucket, draw_steps, steps > 1, itemsize),
                     window_cap)
    slots = cache_slots(patches, steps - 1)
    rows = units_in(budget - prefill_budget, decode_bytes(cfg, slots, variates, steps, itemsize), chunk * bucket)
    if samples_per_batch:
        rows = min(rows, pow2_at_most(samples_per_batch))
    per = bucket if steps == 1 else min(bucket, rows)  # one patch: every path in the prefill call
    group = chunk if steps == 1 else max(1, min(chunk, rows // per))
    return Plan(windows, chunk, patches, steps, samples, bucket, draw_steps, per, group, slots)


def min_budget(cfg: TotoConfig, length: int, horizon: int, itemsize: int, variates: int, min_rows: int) -> int:
    """The budget below which halving changes nothing: one window per prefill, ``min_rows`` paths per decode."""
    p = cfg.patch_size
    patches, steps = context_patches(length, p), math.ceil(horizon / p)
    one = prefill_bytes(cfg, patches, variates, min_rows, p, steps > 1, itemsize)
    if steps == 1:
        return one
    return 2 * max(one, min_rows * decode_bytes(cfg, cache_slots(patches, steps - 1), variates, steps, itemsize))
