"""The training loop every model shares: AdamW, warmup + cosine learning rate, periodic validation with early
stopping, and checkpoints that make a killed run resumable to the very same weights.

A checkpoint (``checkpoint.pt`` in the output folder, written atomically by :mod:`marketcast.fileio`, so a
SIGKILL leaves the previous one whole) holds the trainable tensors, the optimizer state, the batch sampler's
generator state, the step, the early-stopping state (best validation loss and its weights), the loss
history, and what the weights were trained on: the settings, the cutoff, the symbols and the fingerprint of each
symbol's bars up to the cutoff. ``--resume`` with any of those changed is refused (:func:`check_resume`): a run
killed after a checkpoint and resumed with an earlier ``--until`` would otherwise record a cutoff before bars it
trained on, and the tuned-weights guard would call those bars out of sample.

Batches are drawn from a generator of their own (seeded by ``--seed``) and the learning rate is a
function of the step, so training from a checkpoint at step k repeats, bit for bit, what the uninterrupted run
did after step k.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from marketcast.console import err_console, eta, progress_steps
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError, StateError
from marketcast.fileio import write_atomic
from marketcast.finetune.data import Windows
from marketcast.forecast.tuning import fingerprint

CHECKPOINT = "checkpoint.pt"
GRAD_CLIP = 1.0
WEIGHT_DECAY = 0.01  # toto-ts TotoForFinetuning's default
BETAS = (0.9, 0.999)


@dataclass(frozen=True)
class Hyper:
    """The settings that decide the weights: a resumed run must use the same ones."""

    steps: int
    lr: float
    batch_size: int
    context: int
    horizon: int
    lora: int | None
    dtype: str
    seed: int
    eval_every: int
    patience: int
    checkpoint_every: int
    model: str = "toto"
    weights: str = "auto"  # the base: resuming LoRA adapters on another base would mix two models

    def to_dict(self) -> dict:
        return asdict(self)


class Objective(Protocol):
    """A model's training objective: mean loss over a batch of windows ``[B, V, length]`` on the device."""

    model: nn.Module

    def loss(self, windows: torch.Tensor) -> torch.Tensor: ...

    def validation_loss(self, windows: torch.Tensor) -> torch.Tensor: ...  # per window ``[B]``


class PatchObjective:
    """A patch model's objective from its per-window loss ``window_loss(model, windows, score=None) -> [B]``: on
    training batches every target step, on validation windows the ``horizon`` steps after the context
    (``context`` rounded up to whole patches); ``autocast`` runs the matmuls in bfloat16 while the weights and the
    optimizer stay float32. Toto 1.0 and 2.0 differ only in ``window_loss``."""

    @staticmethod
    def window_loss(model: nn.Module, windows: torch.Tensor, score: slice | None = None) -> torch.Tensor:
        raise NotImplementedError

    def __init__(self, model: nn.Module, context: int, horizon: int, autocast: torch.dtype | None,
                 device: torch.device) -> None:
        self.model = model
        p = model.config.patch_size
        ctx = math.ceil(context / p) * p
        self.score = slice(ctx, ctx + horizon)
        self.autocast, self.device_type = autocast, device.type

    def _ctx(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast)

    def loss(self, windows: torch.Tensor) -> torch.Tensor:
        with self._ctx():
            return self.window_loss(self.model, windows).mean()

    def validation_loss(self, windows: torch.Tensor) -> torch.Tensor:
        with self._ctx():
            return self.window_loss(self.model, windows, self.score)


@dataclass
class Outcome:
    steps: int
    stopped: str  # "steps" or "early"
    best_step: int
    train_loss: float | None  # mean training loss of the evaluation interval that ended at ``best_step``
    validation_loss: float
    base_validation_loss: float
    history: list = field(default_factory=list)
    examples_per_s: float = 0.0


def learning_rate(step: int, hyper: Hyper) -> float:
    """Linear warmup over the first tenth of the steps (at most 100), then cosine decay to a tenth of ``lr``
    (toto-ts uses warmup-stable-decay; a cosine needs no extra settings)."""
    warm = min(100, max(1, hyper.steps // 10))
    if step < warm:
        return hyper.lr * (step + 1) / warm
    frac = (step - warm) / max(1, hyper.steps - warm)
    return hyper.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0))))


def trainable(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def _to(batch, device: torch.device):
    """A batch (a tensor, or a tuple of them) on ``device``."""
    return tuple(t.to(device) for t in batch) if isinstance(batch, tuple) else batch.to(device)


def _copy(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in tensors.items()}


@torch.no_grad()
def validation_loss(objective: Objective, windows: Windows, device: torch.device, batch: int) -> float:
    """Mean per-window loss over every validation window (the same windows each time)."""
    objective.model.eval()
    total, count = 0.0, 0
    for start in range(0, len(windows.validation), batch):
        picks = windows.validation[start:start + batch]
        losses = objective.validation_loss(_to(windows.batch(picks), device))
        total += float(losses.double().sum())
        count += len(picks)
    return total / count


def _save(folder: Path, state: dict) -> None:
    write_atomic(folder / CHECKPOINT, lambda path: torch.save(state, path), ConfigError)


def load_checkpoint(folder: Path, mmap: bool = False) -> dict | None:
    """``folder``'s checkpoint, or None; ``mmap``: its tensors stay on disk until read (a cheap look at its
    records)."""
    path = folder / CHECKPOINT
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    except Exception as exc:  # a file from another program, or damaged on disk (never half-written by us)
        raise StateError(f"{path}: unreadable checkpoint ({type(exc).__name__}); remove it to start over") from None


def trained_on(until: date, bars: list[Bars]) -> dict:
    """What a checkpoint records of the data: the cutoff, the symbols in order (their order decides the batches)
    and each one's :func:`~marketcast.forecast.tuning.fingerprint` up to the cutoff (``tuning.json``'s)."""
    return {"until": until.isoformat(), "symbols": [b.symbol.upper() for b in bars],
            "fingerprints": {b.symbol.upper(): fingerprint(b.frame, until) for b in bars},
            "sources": {b.symbol.upper(): b.source or "bars" for b in bars}}


def check_resume(saved: dict, hyper: Hyper, data: dict | None = None) -> None:
    """Refuse, in one line naming the first difference, resuming ``saved`` with other settings, another cutoff,
    other symbols or other bars up to the cutoff (``data``: :func:`trained_on`; None checks the settings only)."""
    if saved["hyper"] != hyper.to_dict():
        was = saved["hyper"]
        changed = [k for k, v in hyper.to_dict().items() if was.get(k) != v]
        verb = "differs" if len(changed) == 1 else "differ"
        raise ConfigError(f"--resume: {', '.join('--' + k.replace('_', '-') for k in changed)} {verb} from the "
                          f"checkpoint's ({', '.join(f'{k}={was.get(k)}' for k in changed)}); use "
                          "the same settings or another --out")
    if data is None:
        return
    was = saved.get("data")
    if not was:
        raise ConfigError("--resume: the checkpoint does not record its cutoff, symbols and bars (an older "
                          "marketcast wrote it), so a resume cannot be checked against them; start over in another "
                          "--out")
    if was["until"] != data["until"]:
        raise ConfigError(f"--resume: --until {data['until']} differs from the checkpoint's (until={was['until']}); "
                          f"use --until {was['until']} or another --out")
    if was["symbols"] != data["symbols"]:
        raise ConfigError(f"--resume: --symbols {','.join(data['symbols'])} differ from the checkpoint's "
                          f"({','.join(was['symbols'])}); use --symbols {','.join(was['symbols'])} or another --out")
    for symbol in data["symbols"]:
        if was["fingerprints"][symbol] != data["fingerprints"][symbol]:
            raise ConfigError(
                f"--resume: the bars of {symbol} up to {data['until']} ({data['sources'][symbol]}) differ from the "
                "ones the checkpoint was trained on (their fingerprint changed); restore them, or start over in "
                "another --out")


def train(objective: Objective, windows: Windows, hyper: Hyper, device: torch.device, folder: Path,
          resume: dict | None = None, data: dict | None = None) -> Outcome:
    """Train ``objective.model`` in place; it ends holding the weights of the best validation loss.

    ``resume``: a checkpoint of this folder (same ``hyper`` and ``data``) to continue from; ``data``: what the
    windows were cut from (:func:`trained_on`), kept in every checkpoint."""
    model = objective.model
    params = trainable(model)
    if not params:
        raise ConfigError("nothing to train: the model has no trainable parameters")
    optimizer = torch.optim.AdamW(params.values(), lr=hyper.lr, betas=BETAS, weight_decay=WEIGHT_DECAY,
                                  foreach=False)
    generator = torch.Generator().manual_seed(hyper.seed)
    val_batch = max(1, hyper.batch_size * 4)
    if resume is not None:
        check_resume(resume, hyper, data)
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(resume["trainable"][name])
        optimizer.load_state_dict(resume["optimizer"])
        generator.set_state(resume["generator"])
        state = {k: resume[k] for k in ("step", "best", "best_loss", "best_step", "bad", "history", "base_loss",
                                        "running", "running_n", "elapsed", "examples", "stopped")}
    else:
        base = validation_loss(objective, windows, device, val_batch)
        # the base weights are the best until validation says otherwise: a tuning that never beats them
        # hands back the base, not its last (worse) step
        state = dict(step=0, best=_copy(params), best_loss=base, best_step=0, bad=0, history=[], base_loss=base,
                     running=0.0, running_n=0, elapsed=0.0, examples=0, stopped="steps")
    every = max(1, min(hyper.eval_every, max(1, hyper.steps // 50)))
    left = hyper.steps - state["step"]
    started = time.perf_counter()
    done_here = 0
    with progress_steps(max(1, math.ceil(left / every)), "finetune") as report:
        while state["step"] < hyper.steps and state["stopped"] != "early":
            model.train()
            lr = learning_rate(state["step"], hyper)
            for group in optimizer.param_groups:
                group["lr"] = lr
            picks = windows.train[torch.randint(len(windows.train), (hyper.batch_size,), generator=generator).numpy()]
            loss = objective.loss(_to(windows.batch(picks), device))
            value = float(loss.detach())
            if not math.isfinite(value):
                raise ConfigError(f"the training loss became {value} at step {state['step'] + 1}; lower --lr "
                                  f"(now {hyper.lr:g}) or use --dtype float32")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params.values(), GRAD_CLIP)
            optimizer.step()
            state["step"] += 1
            done_here += 1
            state["examples"] += hyper.batch_size
            state["running"] += value
            state["running_n"] += 1
            step = state["step"]
            if step % hyper.eval_every == 0 or step == hyper.steps:
                val = validation_loss(objective, windows, device, val_batch)
                train_loss = state["running"] / state["running_n"]
                state["running"], state["running_n"] = 0.0, 0
                state["history"].append({"step": step, "train": train_loss, "validation": val})
                if val < state["best_loss"]:
                    state.update(best=_copy(params), best_loss=val, best_step=step, bad=0)
                else:
                    state["bad"] += 1
                if hyper.patience and state["bad"] >= hyper.patience:
                    state["stopped"] = "early"
            if step % hyper.checkpoint_every == 0 or step == hyper.steps or state["stopped"] == "early":
                elapsed = state["elapsed"] + time.perf_counter() - started
                _save(folder, {**state, "elapsed": elapsed, "hyper": hyper.to_dict(), "data": data,
                               "trainable": _copy(params), "optimizer": optimizer.state_dict(),
                               "generator": generator.get_state()})
            if done_here % every == 0 or step == hyper.steps or state["stopped"] == "early":
                last = state["history"][-1] if state["history"] else None
                text = f"step {step}/{hyper.steps} loss {value:.4f}"
                if last:
                    text += f", validation {last['validation']:.4f} (base {state['base_loss']:.4f})"
                if err_console.is_terminal:
                    rate = (time.perf_counter() - started) / done_here
                    text += f", {eta(rate * (hyper.steps - step))}"
                report(text)
    elapsed = state["elapsed"] + time.perf_counter() - started
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state["best"][name])
    best = next((h for h in state["history"] if h["step"] == state["best_step"]), None)
    return Outcome(steps=state["step"], stopped=state["stopped"], best_step=state["best_step"],
                   train_loss=best["train"] if best else None, validation_loss=state["best_loss"],
                   base_validation_loss=state["base_loss"], history=state["history"],
                   examples_per_s=state["examples"] / elapsed if elapsed > 0 else 0.0)
