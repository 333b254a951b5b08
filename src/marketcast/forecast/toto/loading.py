"""Checkpoint I/O in the public layout: a folder (or Hugging Face repo) with ``config.json`` + ``model.safetensors``.

Both SwiGLU key layouts load: the packed xFormers one the public checkpoint uses (``mlp.0.w12``/``mlp.0.w3``)
and toto-ts's unpacked fallback (``mlp.0``/``mlp.2``). ``rotary_emb.freqs`` entries (a constant some
checkpoints carry) are dropped. Everything else must match exactly; a problem names the key and both shapes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from marketcast.forecast.checkpoint import build_empty, load_strict, read_safetensors, resolve_folder
from marketcast.forecast.hub import Checkpoint, register
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.model import TotoModel

DEFAULT_REPO = "Datadog/Toto-Open-Base-1.0"
_UNPACKED = [(re.compile(r"\.mlp\.0\.(weight|bias)$"), r".mlp.0.w12.\1"),
             (re.compile(r"\.mlp\.2\.(weight|bias)$"), r".mlp.0.w3.\1")]
_PACKED = [(re.compile(r"\.mlp\.0\.w12\.(weight|bias)$"), r".mlp.0.\1"),
           (re.compile(r"\.mlp\.0\.w3\.(weight|bias)$"), r".mlp.2.\1")]


def to_packed_keys(state: dict) -> dict:
    """Map toto-ts's unpacked SwiGLU keys to the packed public layout; drop ``rotary_emb.freqs``."""
    out = {}
    for key, value in state.items():
        if key.endswith("rotary_emb.freqs"):
            continue
        for pattern, repl in _UNPACKED:
            key = pattern.sub(repl, key)
        out[key] = value
    return out


def to_unpacked_keys(state: dict) -> dict:
    """The reverse mapping (what toto-ts builds without xFormers)."""
    out = {}
    for key, value in state.items():
        for pattern, repl in _PACKED:
            key = pattern.sub(repl, key)
        out[key] = value
    return out


def load_weights(model: torch.nn.Module, state: dict, source: str) -> None:
    """Strict load after mapping toto-ts's unpacked SwiGLU keys to the packed layout."""
    load_strict(model, to_packed_keys(state), source, "Toto")


def locate(weights: str | None) -> str:
    """Where ``--weights`` (as the factory reads it) would load from, found without reading a tensor: the folder,
    or ``random``; weights that are not here raise the loader's own :class:`ModelLoadError` line."""
    if weights == "random":
        return "random"
    return str(resolve_folder(DEFAULT_REPO if weights in (None, "auto") else weights, "Toto"))


def load_pretrained(source: str | os.PathLike, device: torch.device, local_files_only: bool | None = None,
                    cache_dir: str | os.PathLike | None = None):
    """(model, folder): ``TotoModel`` built on the meta device, its weights read straight to ``device``."""
    folder = resolve_folder(source, "Toto", local_files_only, cache_dir)
    config = TotoConfig.from_file(folder / "config.json")
    state = read_safetensors(folder / "model.safetensors", device)
    model = build_empty(lambda: TotoModel(config))
    load_weights(model, state, str(folder / "model.safetensors"))
    return model, folder


def save_checkpoint(model: torch.nn.Module, config: TotoConfig, folder: str | os.PathLike, packed: bool = True) -> Path:
    """Write ``config.json`` + ``model.safetensors`` in the public layout (``packed=False``: toto-ts's
    unpacked SwiGLU keys)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    if not packed:
        state = to_unpacked_keys(state)
    (folder / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    save_file(state, str(folder / "model.safetensors"))
    return folder


register(Checkpoint("toto", "toto", {"": DEFAULT_REPO}, "auto"))
