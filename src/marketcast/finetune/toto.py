"""Toto 1.0's training objective: the negative log-likelihood of its Student-T mixture on the next patch.

Read from toto-ts 0.2.0 (``toto/model/lightning_module.py`` ``TotoForFinetuning._train_or_val_step``,
``toto/data/datasets/gluonts_dataset.py`` and ``toto/model/losses.py``): the input is a window's first
``T`` steps and the target the same window shifted by one patch; each target step is normalised by the causal
scaler's loc/scale of the input patch that predicts it, and the loss is averaged over the valid target steps
(every step in training, the last ``horizon`` steps in validation). Upstream mixes the NLL with a Barron robust
loss on the mixture mean (weight 0.575 / 0.425); we train on the NLL alone, the likelihood the forecaster samples
from, so the validation loss is the proper score the issue asks for.

The forward pass here is :meth:`marketcast.forecast.toto.model.TotoModel._prefill` without its inference
shortcut (only the last patch after the last time-wise layer): training needs the mixture of every patch.
LoRA (``peft``) adapts the attention projections ``wQKV`` and ``wO``; :func:`merge_lora` folds the adapters back
into plain ``nn.Linear`` layers, so a tuned checkpoint has exactly the public key layout and loads anywhere
``--weights`` is accepted.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from marketcast.errors import ConfigError
from marketcast.finetune.loop import PatchObjective
from marketcast.forecast.toto.model import MixtureParams, Rotary, TotoModel
from marketcast.forecast.toto.scaler import causal_patch_scale

LORA_TARGETS = ("wQKV", "wO")


def sequence_mixture(model: TotoModel, x: torch.Tensor, mask: torch.Tensor
                     ) -> tuple[MixtureParams, torch.Tensor, torch.Tensor]:
    """The mixture of every step of every next patch for inputs ``x`` ``[B, V, T]`` (T a multiple of the patch):
    params ``[B, V, N, P, K]`` (scaled space) and the scaler's loc/scale ``[B, V, N]`` of each input patch."""
    cfg = model.config
    b, v, t = x.shape
    p = cfg.patch_size
    n = t // p
    scaled, loc, scale, _ = causal_patch_scale(x, mask, p, cfg.min_scale, cfg.scale_factor_exponent,
                                               cfg.stabilize_with_global)
    h = model.model.patch_embed(scaled.view(b, v, n, p).to(model.compute_dtype))
    positions = torch.arange(n, device=x.device, dtype=torch.float32)
    q_cos, q_sin, k_cos, k_sin = model.rotary.tables(positions, torch.tensor(float((n - 1) // 2), device=x.device))
    for layer in model.layers:
        if layer.axis == "space":
            h = layer.space(h)
            continue
        att = layer.attention
        q, k, val = att.qkv(layer.norm1(h).reshape(b * v, n, cfg.embed_dim))
        q, k = Rotary.apply(q, q_cos, q_sin), Rotary.apply(k, k_cos, k_sin)
        o = F.scaled_dot_product_attention(q, k, val, is_causal=True)
        h = h + att.out(o).view(b, v, n, cfg.embed_dim)
        h = h + layer.mlp(layer.norm2(h))
    out = model.model.unembed(h).view(b, v, n, p, cfg.embed_dim)
    return model.model.output_distribution(out), loc, scale


def mixture_log_prob(params: MixtureParams, y: torch.Tensor) -> torch.Tensor:
    """log density of ``y`` ``[...]`` under the Student-T mixtures ``params`` ``[..., K]`` (float32)."""
    y = y.float()[..., None]
    df, loc, scale = params.df, params.loc, params.scale
    z = (y - loc) / scale
    log_t = (torch.lgamma((df + 1) / 2) - torch.lgamma(df / 2) - 0.5 * torch.log(df * math.pi) - torch.log(scale)
             - (df + 1) / 2 * torch.log1p(z * z / df))
    return torch.logsumexp(F.log_softmax(params.logits.float(), dim=-1) + log_t, dim=-1)


def window_nll(model: TotoModel, windows: torch.Tensor, score: slice | None = None) -> torch.Tensor:
    """Mean NLL per window ``[B]`` of ``windows`` ``[B, V, T + P]``: the input is the first T steps, the target
    the window shifted by one patch; ``score`` picks the scored steps of the window (default: every target)."""
    p = model.config.patch_size
    b, v, length = windows.shape
    x, target = windows[..., :-p], windows[..., p:]
    mask = torch.ones_like(x, dtype=torch.bool)
    params, loc, scale = sequence_mixture(model, x, mask)
    n = x.shape[-1] // p
    eps = torch.finfo(torch.float32).eps
    y = (target.view(b, v, n, p) - loc[..., None]) / (scale[..., None] + eps)
    nll = -mixture_log_prob(params, y).reshape(b, v, n * p)
    if score is not None:  # window steps -> target steps (the target starts one patch in)
        nll = nll[..., score.start - p:score.stop - p]
    return nll.mean(dim=(1, 2))


def add_lora(model: nn.Module, rank: int, seed: int, targets: tuple[str, ...] = LORA_TARGETS) -> nn.Module:
    """LoRA adapters (rank ``rank``, alpha ``2 * rank``, no dropout) on every attention projection (``targets``:
    the Linear layers' names; Toto's by default); only the adapters train. Their random init draws from a
    generator seeded by ``seed`` (not the global one)."""
    try:
        from peft import LoraConfig, inject_adapter_in_model
    except ImportError:
        raise ConfigError("--lora needs the peft package; pip install 'marketcast[finetune]' or drop --lora for "
                          "full fine-tuning") from None
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=list(targets))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        inject_adapter_in_model(config, model)
    for name, param in model.named_parameters():
        param.requires_grad_("lora_" in name)
    return model


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every LoRA adapter into its base ``nn.Linear`` (W + scale * B @ A) and put the plain layer back."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            base = getattr(child, "base_layer", None)
            if isinstance(base, nn.Linear) and hasattr(child, "merge"):
                child.merge()
                setattr(module, name, base)
    return model


class TotoObjective(PatchObjective):
    """Toto 1.0: the likelihood of its mixture (:func:`window_nll`)."""

    window_loss = staticmethod(window_nll)


OBJECTIVE = TotoObjective  # what `marketcast finetune --model` trains with


def load_base(weights: str | None, device: torch.device, seed: int) -> tuple[TotoModel, str]:
    """The base model on ``device`` in float32, every parameter trainable, and where it came from."""
    from marketcast.forecast.toto.config import TotoConfig
    from marketcast.forecast.toto.loading import DEFAULT_REPO, load_pretrained
    from marketcast.forecast.toto.model import random_model

    if weights == "random":
        model, source = random_model(TotoConfig.base(), seed), f"random(seed={seed})"
    else:
        model, folder = load_pretrained(DEFAULT_REPO if weights in (None, "auto") else weights, device)
        source = str(folder)
    model = model.to(device).float().train()
    for param in model.parameters():
        param.requires_grad_(True)
    return model, source


def checkpoint_files(model: TotoModel, metadata: dict[str, str] | None = None) -> dict[str, bytes | str]:
    """``config.json`` and ``model.safetensors`` of ``model`` (adapters merged first) in the public layout;
    ``metadata``: its header map (the tuning record: :func:`marketcast.forecast.tuning.record_metadata`)."""
    import json

    from safetensors.torch import save

    merge_lora(model)
    state = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    return {"config.json": json.dumps(model.config.to_dict(), indent=2), "model.safetensors": save(state, metadata)}
