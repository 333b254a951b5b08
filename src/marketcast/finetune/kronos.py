"""Kronos's training objective: token cross-entropy of the next bar's (s1, s2) tokens, the tokenizer frozen.

Read from upstream Kronos (``model/kronos.py`` ``Kronos.forward(..., use_teacher_forcing=True, s1_targets=...)``
and ``model/module.py`` ``DualHead.compute_loss``, as vendored in kronos-finance 0.1.5): the bars are z-scored and
clipped to +-5, the frozen tokenizer turns each bar into an (s1, s2) pair, the model reads tokens ``0..T-2`` and
predicts tokens ``1..T-1``; s2 is predicted from the dependency layer queried with the embedding of the *true*
next s1 (teacher forcing), causally; the loss is ``(CE(s1) + CE(s2)) / 2``. Two choices follow the in-project
inference path instead of upstream's training script: each window is normalised over its context only (as
:func:`marketcast.forecast.kronos.pipeline.normalise` does at forecast time; upstream's dataset uses the whole
window), and the dependency layer attends without rotary angles (upstream rotates them only in training, so
its inference never sees them; :class:`marketcast.forecast.kronos.layers.DependencyAwareLayer`).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.pipeline import CLIP, time_features, with_amount
from marketcast.forecast.kronos.tokenizer import KronosTokenizer


def kronos_features(frame: pd.DataFrame) -> np.ndarray:
    """``[6, n]`` open, high, low, close, volume (0 when the file has none) and amount = volume x mean(OHLC)."""
    ohlcv = frame[["open", "high", "low", "close"]].to_numpy(np.float64)
    volume = frame["volume"].to_numpy(np.float64) if "volume" in frame.columns else np.zeros(len(frame))
    return with_amount(np.column_stack([ohlcv, np.nan_to_num(volume)])).T.astype(np.float32)


def kronos_stamps(index: pd.DatetimeIndex) -> np.ndarray:
    """``[n, 5]`` minute, hour, weekday, day, month of each bar (the forecaster's calendar features)."""
    return time_features(index.tz_convert(None).to_numpy() if index.tz is not None else index.to_numpy())


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj")  # self-attention and the dependency layer's


def token_ce(model: Kronos, tokenizer: KronosTokenizer, values: torch.Tensor, stamps: torch.Tensor, context: int,
             score: slice | None = None) -> torch.Tensor:
    """Mean (s1 + s2) / 2 cross-entropy per window ``[B]``: ``values`` ``[B, 6, L]``, ``stamps`` ``[B, L, 5]``;
    ``score`` picks the scored window steps (default: every next token)."""
    x = values.transpose(1, 2).float()  # [B, L, 6]
    ctx = x[:, :context]
    mean = ctx.mean(1, keepdim=True)
    std = ((ctx - mean) ** 2).mean(1, keepdim=True).sqrt()
    norm = ((x - mean) / (std + 1e-5)).clamp(-CLIP, CLIP)
    with torch.no_grad():
        s1, s2 = tokenizer.encode(norm)
    s1_logits, hidden = model.decode_s1(s1[:, :-1], s2[:, :-1], stamps[:, :-1])
    k, v = model.dep_layer.keys_values(hidden)
    t = hidden.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    s2_logits = model.head.proj_s2(model.dep_layer(hidden, model.embedding.emb_s1(s1[:, 1:]), k, v, causal))
    ce = (F.cross_entropy(s1_logits.float().transpose(1, 2), s1[:, 1:], reduction="none")
          + F.cross_entropy(s2_logits.float().transpose(1, 2), s2[:, 1:], reduction="none")) / 2
    if score is not None:  # window steps -> target steps (the targets start one bar in)
        ce = ce[:, score.start - 1:score.stop - 1]
    return ce.mean(1)


class KronosObjective:
    """:func:`token_ce` on training batches (every next token) and on validation windows (the ``horizon`` bars
    after the context); the tokenizer never trains."""

    def __init__(self, model: Kronos, tokenizer: KronosTokenizer, context: int, horizon: int,
                 autocast: torch.dtype | None, device: torch.device) -> None:
        self.model, self.tokenizer, self.context = model, tokenizer.eval().requires_grad_(False), context
        self.score = slice(context, context + horizon)
        self.autocast, self.device_type = autocast, device.type

    def _ctx(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        with self._ctx():
            return token_ce(self.model, self.tokenizer, *batch, self.context).mean()

    def validation_loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        with self._ctx():
            return token_ce(self.model, self.tokenizer, *batch, self.context, self.score)


def load_base(weights: str | None, device: torch.device, seed: int) -> tuple[Kronos, KronosTokenizer, str]:
    """The base model (float32, every parameter trainable) and its frozen tokenizer on ``device``."""
    from marketcast.forecast.kronos.loading import load_pair

    model, tokenizer, source = load_pair(weights, seed, device)
    model = model.to(device).float().train()
    for param in model.parameters():
        param.requires_grad_(True)
    return model, tokenizer.to(device).float().eval().requires_grad_(False), source


def checkpoint_files(model: Kronos, tokenizer: KronosTokenizer,
                     metadata: dict[str, str] | None = None) -> dict[str, bytes | str]:
    """``model/`` (tuned, adapters merged) and ``tokenizer/`` (the base's, unchanged): the folder layout the
    Kronos loader reads (:func:`marketcast.forecast.kronos.loading.load_pair`), ``metadata`` in both headers."""
    from safetensors.torch import save

    from marketcast.finetune.toto import merge_lora

    merge_lora(model)
    files: dict[str, bytes | str] = {}
    for sub, module in (("model", model), ("tokenizer", tokenizer)):
        config = module.config.to_dict()
        config.pop("max_context", None)
        files[str(Path(sub) / "config.json")] = json.dumps(config, indent=2)
        files[str(Path(sub) / "model.safetensors")] = save(
            {k: v.detach().float().contiguous().cpu() for k, v in module.state_dict().items()}, metadata)
    return files
