"""Kronos-Tokenizer: bars (6 normalised features) <-> (s1, s2) token pairs via binary spherical quantization.

Only the inference path is implemented: encode = causal encoder -> ``quant_embed`` -> sign bits, split into an
s1 half (coarse) and an s2 half (fine); decode = bits -> ``post_quant_embed`` -> causal decoder -> ``head``.

The decoder is causal, so decoding a window's context and then its generated tokens gives the same numbers
as decoding the concatenation: :meth:`KronosTokenizer.decoder_prefix` runs the context once per window and
keeps each layer's keys/values, :meth:`KronosTokenizer.decode_paths` runs only the generated tokens of every
sample path against them.
"""

from __future__ import annotations

import torch
from torch import nn

from marketcast.forecast.kronos.config import TokenizerConfig
from marketcast.forecast.kronos.attention import attention_mask, rotary_table
from marketcast.forecast.kronos.layers import TransformerBlock


class _BSQBuffers(nn.Module):
    """The quantizer's persistent buffers, kept only so checkpoints load with ``strict=True``."""

    def __init__(self, codebook_dim: int, group_size: int) -> None:
        super().__init__()
        self.register_buffer("basis", 2 ** torch.arange(codebook_dim - 1, -1, -1))
        self.register_buffer("group_basis", 2 ** torch.arange(group_size - 1, -1, -1))


class _Quantizer(nn.Module):
    def __init__(self, cfg: TokenizerConfig) -> None:
        super().__init__()
        self.bsq = _BSQBuffers(cfg.s1_bits + cfg.s2_bits, cfg.group_size)


def _bits_to_index(positive: torch.Tensor) -> torch.Tensor:
    """Little-endian: bit ``j`` (True = positive coordinate) contributes ``2**j``."""
    weights = 2 ** torch.arange(positive.shape[-1], device=positive.device, dtype=torch.long)
    return (positive.long() * weights).sum(-1)


class KronosTokenizer(nn.Module):
    def __init__(self, cfg: TokenizerConfig) -> None:
        super().__init__()
        if cfg.s1_bits != cfg.s2_bits:
            raise ValueError("Kronos-Tokenizer needs s1_bits == s2_bits (the decoder splits the code in halves)")
        self.config = cfg
        d = cfg.d_model
        self.embed = nn.Linear(cfg.d_in, d)
        self.head = nn.Linear(d, cfg.d_in)
        self.encoder = nn.ModuleList(TransformerBlock(d, cfg.n_heads, cfg.ff_dim) for _ in range(cfg.n_enc_layers - 1))
        self.decoder = nn.ModuleList(TransformerBlock(d, cfg.n_heads, cfg.ff_dim) for _ in range(cfg.n_dec_layers - 1))
        bits = cfg.s1_bits + cfg.s2_bits
        self.quant_embed = nn.Linear(d, bits)
        self.post_quant_embed_pre = nn.Linear(cfg.s1_bits, d)  # training-only path, kept for the checkpoint
        self.post_quant_embed = nn.Linear(bits, d)
        self.tokenizer = _Quantizer(cfg)

    def _rotary(self, layers: nn.ModuleList, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return rotary_table(layers[0].self_attn.rotary.inv_freq, length)

    def _stack(self, layers: nn.ModuleList, z: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if len(layers) == 0:
            return z
        cos, sin = self._rotary(layers, z.shape[1])
        for layer in layers:
            z = layer(z, cos, sin, mask)[0]
        return z

    @torch.no_grad()
    def encode(self, x: torch.Tensor, valid: torch.Tensor | None = None,
               always_mask: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` ``[B, T, d_in]`` -> ``(s1, s2)`` int64 ``[B, T]``; ``valid`` False marks left padding
        (``always_mask``: build the mask even when nothing is padded, as a compiled graph must)."""
        z = self.quant_embed(self._stack(self.encoder, self.embed(x), attention_mask(valid, always_mask)))
        positive = z > 0  # upstream L2-normalises first, which never changes a sign
        s1 = self.config.s1_bits
        return _bits_to_index(positive[..., :s1]), _bits_to_index(positive[..., s1:])

    def _codes(self, s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
        """Token ids ``[...]`` -> the decoder's input ``[..., d_model]`` (bits as +-1/sqrt(bits), then
        ``post_quant_embed``)."""
        half = self.config.s1_bits
        weights = 2 ** torch.arange(half, device=s1.device, dtype=torch.long)
        bits = torch.cat([(s1[..., None] & weights) != 0, (s2[..., None] & weights) != 0], dim=-1)
        codes = (bits.float() * 2 - 1) / (2 * half) ** 0.5
        return self.post_quant_embed(codes.to(self.post_quant_embed.weight.dtype))

    @torch.no_grad()
    def decode(self, s1: torch.Tensor, s2: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``(s1, s2)`` ``[B, T]`` -> reconstructed normalised bars ``[B, T, d_in]``."""
        return self.head(self._stack(self.decoder, self._codes(s1, s2), attention_mask(valid)))

    def decoder_prefix(self, s1: torch.Tensor, s2: torch.Tensor, mask: torch.Tensor | None):
        """Each decoder layer's rotated keys and values ``[B, heads, T, head_dim]`` for context tokens
        ``[B, T]`` (``mask`` from :func:`attention_mask`): what :meth:`decode_paths` attends."""
        z, keys, values = self._codes(s1, s2), [], []
        cos, sin = self._rotary(self.decoder, s1.shape[1])
        for layer in self.decoder:
            z, k, v = layer(z, cos, sin, mask)
            keys.append(k)
            values.append(v)
        return keys, values

    def decode_paths(self, s1: torch.Tensor, s2: torch.Tensor, keys, values, ctx_mask: torch.Tensor) -> torch.Tensor:
        """Generated tokens ``[U, S, L]`` of S paths per window, continuing the context of
        :meth:`decoder_prefix` (``ctx_mask`` ``[U, 1, 1, T]``) -> bars ``[U, S, L, d_in]``."""
        t, length = ctx_mask.shape[-1], s1.shape[-1]
        cos, sin = self._rotary(self.decoder, t + length)
        causal = torch.ones(length, length, dtype=torch.bool, device=s1.device).tril()
        z = self._codes(s1, s2)
        for layer, k, v in zip(self.decoder, keys, values):
            z = layer.step_shared(z, cos[t:], sin[t:], k, v, ctx_mask, None, None, causal)
        return self.head(z)
