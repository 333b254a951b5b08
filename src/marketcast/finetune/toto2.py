"""Toto 2.0's training objective: the pinball loss of its nine quantile knots on the next patch, in the scaled and
asinh-squashed space its output head predicts in.

The toto-2 2.0.0 wheel installed here is inference only (its ``toto2/model.py`` says so and has no loss). The
objective follows what that file fixes (``Toto2Model.forward``: scaler, asinh, head; ``forecast``: the output
at patch i predicts patch i + 1, read back as ``q.sinh() * scale + loc``) and the Toto 2.0 pre-training module
published with Datadog's header (``Toto2ForTraining._step``, a Lightning module of a public ``toto2`` training
package, not in the wheel): "the target at patch token i is series[(i+1)*P:(i+2)*P]", the loss "the average
pinball loss across the 9 quantile knots, computed in scaled / asinh space", ``cpm_mask`` = the target mask:

* the input is a window's first ``T`` steps and the target the same window shifted by one patch;
* the input goes through ``Toto2Model.forward``'s path: the causal patch scaler (``PatchedCausalStdScaler``:
  running mean and Bessel-corrected std, taken at each patch's last step), ``asinh``, the patch projection with
  the missing-value half, the stack (causal time attention, variate attention within a series id), the head;
* each target patch is normalised by the loc/scale of the input patch that predicts it, ``(y - loc) / (scale +
  eps)`` (float32 eps), then ``asinh``; the quantile knot ``q_tau`` scores ``rho_tau(u) = max(tau u, (tau - 1) u)``
  with ``u = target - q_tau`` (Koenker & Bassett 1978), averaged over the 9 knots and the target steps.

The average pinball loss over evenly spaced levels is, up to a factor 2, a discretised CRPS (Gneiting & Raftery
2007, JASA 102: the CRPS is twice the integral of the pinball loss over the levels), so the validation loss is
a proper score of the quantiles the forecaster samples from.

Training runs on the unfolded model: :class:`~marketcast.forecast.toto2.forecaster.Toto2Forecaster` folds the
u-μP scales into the weights, which changes the state dict; here the scales stay forward constants and the
weights are saved unfolded, the layout of the public checkpoints. The optimizer is the loop's plain AdamW with one
learning rate (upstream pre-training scales it per parameter with ``dd_unit_scaling.optim.AdamW``; weights are
unit-scaled, so ``--lr`` moves them relative to 1).

LoRA (``peft``) adapts the attention projections ``in_proj`` (fused q/k/v) and ``out_proj``. peft adds the adapter
after the base layer, whose u-μP scale multiplies only the base weight, so :func:`merge_lora` folds ``B A``
into the weight divided by that scale: the merged layer computes the same function and the checkpoint keeps the
public keys.
"""

from __future__ import annotations


import torch
from torch import nn

from marketcast.errors import ModelLoadError
from marketcast.finetune.loop import PatchObjective
from marketcast.forecast.toto2.config import QUANTILES
from marketcast.forecast.toto2.model import ScaledLinear, Toto2Model

LORA_TARGETS = ("in_proj", "out_proj")


def sequence_quantiles(model: Toto2Model, x: torch.Tensor, mask: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 9 knots of every step of every next patch for inputs ``x`` ``[B, V, T]`` (T a multiple of the patch),
    all variates one series: ``[B, V, N, P, 9]`` in the scaled asinh space, and the scaler's loc/scale
    ``[B, V, N]`` of each input patch (toto-2 ``Toto2Model.forward`` with ``cpm_mask = target_mask``).

    The scaler statistics and the layer stack are the forecaster's own (``Toto2Model._stats``, ``_stack`` with
    every position kept), so training and forecasting cannot drift apart."""
    if model.folded:
        raise ModelLoadError("Toto 2.0 trains on unfolded weights; load the model again instead of the "
                             "forecaster's folded copy")
    p = model.config.patch_size
    b, v, t = x.shape
    n = t // p
    loc, scale = model._stats(x, mask, 0)  # [B, V, n + 1]: the extra column is the forecast's
    loc, scale = loc[..., :n], scale[..., :n]
    z = (x - loc.repeat_interleave(p, -1)) / scale.repeat_interleave(p, -1)
    z = torch.where(mask, z, torch.zeros_like(z)).asinh()
    patches = torch.cat([z.unflatten(-1, (n, p)), (~mask).to(x.dtype).unflatten(-1, (n, p))], -1)
    h = model.patch_proj(patches)
    unseen = mask.unflatten(-1, (n, p)).sum(-1) == 0
    ids = torch.zeros(b, v, dtype=torch.long, device=x.device)
    h = model._stack(h.flatten(0, 1), unseen, ids, n, n)  # every position, xPos centred on the whole window
    q = model.output_head.param_projection.proj(h).float()
    return q.view(b, v, n, p, len(QUANTILES)), loc, scale


def pinball(q: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean over the knots of ``rho_tau(y - q_tau)``: ``q`` ``[..., 9]`` (levels :data:`QUANTILES`), ``y`` ``[...]``."""
    tau = torch.tensor(QUANTILES, dtype=torch.float32, device=q.device)
    u = y.float()[..., None] - q.float()
    return torch.maximum(tau * u, (tau - 1) * u).mean(-1)


def window_pinball(model: Toto2Model, windows: torch.Tensor, score: slice | None = None) -> torch.Tensor:
    """Mean pinball loss per window ``[B]`` of ``windows`` ``[B, V, T + P]``: the input is the first T steps, the
    target the window shifted by one patch; ``score`` picks the scored steps of the window (default: every
    target)."""
    p = model.config.patch_size
    b, v, _ = windows.shape
    x, target = windows[..., :-p], windows[..., p:]
    q, loc, scale = sequence_quantiles(model, x, torch.ones_like(x, dtype=torch.bool))
    n = x.shape[-1] // p
    eps = torch.finfo(torch.float32).eps
    y = ((target.view(b, v, n, p) - loc[..., None]) / (scale[..., None] + eps)).asinh()
    loss = pinball(q, y).reshape(b, v, n * p)
    if score is not None:  # window steps -> target steps (the target starts one patch in)
        loss = loss[..., score.start - p:score.stop - p]
    return loss.mean(dim=(1, 2))


@torch.no_grad()
def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every LoRA adapter into its base layer and put the plain layer back; on a :class:`ScaledLinear`
    the delta is divided by the layer's u-μP scale (peft adds the adapter after it)."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            base = getattr(child, "base_layer", None)
            if not (isinstance(base, nn.Linear) and hasattr(child, "get_delta_weight")):
                continue
            delta = sum(child.get_delta_weight(a) for a in child.active_adapters)
            base.weight.add_(delta / (base.scale if isinstance(base, ScaledLinear) else 1.0))
            setattr(module, name, base)
    return model


class Toto2Objective(PatchObjective):
    """Toto 2.0: the pinball loss of its knots (:func:`window_pinball`)."""

    window_loss = staticmethod(window_pinball)


OBJECTIVE = Toto2Objective  # what `marketcast finetune --model` trains with


def load_base(weights: str | None, device: torch.device, seed: int) -> tuple[Toto2Model, str]:
    """The base model (unfolded) on ``device`` in float32, every parameter trainable, and where it came from:
    ``--weights`` None/auto (Datadog/Toto-2.0-22m), a folder, a repo id or ``random[:4m|:22m]``."""
    from marketcast.forecast.toto2.loading import load_model

    model, source = load_model(weights, device, seed)
    model = model.to(device).set_precision(torch.float32).train()
    for param in model.parameters():
        param.requires_grad_(True)
    return model, source


def checkpoint_files(model: Toto2Model, metadata: dict[str, str] | None = None) -> dict[str, bytes | str]:
    """``config.json`` and ``model.safetensors`` (adapters merged first, scales unfolded) as toto-2 reads them
    (:func:`marketcast.forecast.toto2.loading.save_checkpoint`'s layout), ``metadata`` in its header."""
    import json

    from safetensors.torch import save

    merge_lora(model)
    state = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    return {"config.json": json.dumps(model.config.to_dict(), indent=2), "model.safetensors": save(state, metadata)}
