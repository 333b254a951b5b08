"""How many windows one Kronos decode chunk takes, from a memory budget.

A window costs its shared context (keys/values of every model, dependency and de-tokenizer layer, and the
prefill's activations) plus, per sample path, the generated tokens' keys/values and one step's and the
de-tokenizer's working memory. Chunks are powers of two (shape buckets) and as large as the budget allows.
Eager upper bounds; :func:`marketcast.runtime.memory.with_oom_backoff` covers what they miss.
"""

from __future__ import annotations

from marketcast.forecast.kronos.config import KronosConfig, TokenizerConfig
from marketcast.runtime.memory import units_in
from marketcast.runtime.shapes import pow2_at_least

F32 = 4
SORT_TEMPS = 8  # float32-sized temporaries per vocabulary entry of one draw (sorted logits, order, softmax, cdf)


def _layer_bytes(d: int, ff: int, itemsize: int) -> int:
    """Activations of one token through a block (q/k/v, residuals, norms, SwiGLU's gate and value)."""
    return (10 * d + 3 * ff) * itemsize


def window_bytes(cfg: KronosConfig, tok: TokenizerConfig, length: int, samples: int, slots: int, itemsize: int) -> int:
    """Working memory of one window with ``samples`` paths of ``slots`` generated tokens."""
    d, dt, dec_layers = cfg.d_model, tok.d_model, tok.n_dec_layers - 1
    shared = (2 * cfg.n_layers + 2) * length * d * itemsize + 2 * dec_layers * length * dt * F32
    prefill = (length * (_layer_bytes(d, cfg.ff_dim, itemsize) + _layer_bytes(dt, tok.ff_dim, F32))
               + (cfg.n_heads + tok.n_heads) * length * length * F32)
    vocab = 2**cfg.s1_bits + 2**cfg.s2_bits
    per_path = ((2 * cfg.n_layers + 2) * slots * d * itemsize
                + 3 * cfg.n_heads * (length + slots) * F32 + vocab * SORT_TEMPS * F32
                + slots * _layer_bytes(dt, tok.ff_dim, F32) + 3 * tok.n_heads * slots * (length + slots) * F32)
    return shared + prefill + samples * per_path


def slide_row_bytes(cfg: KronosConfig, itemsize: int) -> int:
    """Working memory of one path re-running a full window (the sliding-window phase)."""
    window = cfg.max_context
    return window * _layer_bytes(cfg.d_model, cfg.ff_dim, itemsize) + cfg.n_heads * window * window * F32


def chunk_windows(cfg: KronosConfig, tok: TokenizerConfig, *, windows: int, length: int, samples: int, slots: int,
                  itemsize: int, budget: int) -> int:
    """Windows per decode chunk: a power of two, at most ``windows`` rounded up."""
    return units_in(budget, window_bytes(cfg, tok, length, samples, slots, itemsize), pow2_at_least(windows))
