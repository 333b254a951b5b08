"""Toto 2.0 checkpoints in the public layout: a folder (or a Hugging Face repo id, read from the HF cache)
with ``config.json`` + ``model.safetensors``. Built on the meta device, the file's tensors read straight to
the device, loaded strictly: a config.json of another model, or tensors that do not fit it, is one line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from marketcast.errors import ModelLoadError
from marketcast.forecast.checkpoint import build_empty, load_strict, read_safetensors, resolve_folder
from marketcast.forecast.hub import Checkpoint, register
from marketcast.forecast.toto2.config import Toto2Config
from marketcast.forecast.toto2.model import Toto2Model, random_model

DEFAULT_REPO = "Datadog/Toto-2.0-22m"
RANDOM = re.compile(r"^random(?:[:-](?P<size>\w+))?$")


def random_size(weights: str | None) -> str | None:
    """``random`` -> ``22m``, ``random:4m`` / ``random-4m`` -> ``4m``; None when ``weights`` is not random."""
    match = RANDOM.match(str(weights or ""))
    if match is None:
        return None
    return (match.group("size") or "22m").lower()


def load_pretrained(source: str | os.PathLike, device: torch.device, local_files_only: bool | None = None,
                    cache_dir: str | os.PathLike | None = None) -> tuple[Toto2Model, Path]:
    """(model, folder): the model built on the meta device, its weights read straight to ``device``."""
    folder = resolve_folder(source, "Toto 2.0", local_files_only, cache_dir)
    config = Toto2Config.from_file(folder / "config.json")
    state = read_safetensors(folder / "model.safetensors", device)
    model = build_empty(lambda: Toto2Model(config))
    load_strict(model, state, str(folder / "model.safetensors"), "Toto 2.0")
    return model.eval(), folder


def locate(weights: str | None) -> str:
    """Where ``--weights`` would load from (:func:`load_model`'s resolution, no tensor read): the folder, or
    ``random``; weights that are not here raise the loader's own :class:`ModelLoadError` line."""
    if random_size(weights) is not None:
        return "random"
    return str(resolve_folder(DEFAULT_REPO if weights in (None, "auto") else str(weights), "Toto 2.0"))


def load_model(weights: str | None, device: torch.device, seed: int = 0) -> tuple[Toto2Model, str]:
    """(model, source) for ``--weights``: None/"auto" (Datadog/Toto-2.0-22m), a folder, a repo id or
    ``random[:4m|:22m]``."""
    size = random_size(weights)
    if size is not None:
        model = random_model(Toto2Config.size(size), seed).to(device)
        return model, f"random:{size}(seed={seed})"
    model, folder = load_pretrained(DEFAULT_REPO if weights in (None, "auto") else str(weights), device)
    return model, str(folder)


def save_checkpoint(model: Toto2Model, folder: str | os.PathLike) -> Path:
    """Write ``config.json`` + ``model.safetensors`` as toto-2 reads them (unfolded weights only)."""
    from safetensors.torch import save_file

    if model.folded:
        raise ModelLoadError("a Toto 2.0 model with folded scales cannot be saved; save it before forecasting")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    (folder / "config.json").write_text(json.dumps(model.config.to_dict(), indent=2))
    save_file(state, str(folder / "model.safetensors"))
    return folder


register(Checkpoint("toto2", "toto2", {"": DEFAULT_REPO}, "auto"))
