"""Checkpoints in the public layout (``config.json`` + ``model.safetensors``, PyTorchModelHubMixin style).

Sources: a local folder, or a Hugging Face repo id read from the HF cache (the hub only when online).
``weights`` for the forecaster: None/"auto" (Kronos-small + Kronos-Tokenizer-base), "random", a repo id of a
Kronos model (its tokenizer is picked from :data:`TOKENIZER_OF`), or a folder with ``model/`` and
``tokenizer/`` subfolders, each holding ``config.json`` + ``model.safetensors``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TypeVar

import torch

from marketcast.errors import ModelLoadError
from marketcast.forecast.checkpoint import build_empty, load_strict, read_safetensors, resolve_folder
from marketcast.forecast.hub import Checkpoint, register
from marketcast.forecast.kronos.config import HUB_OWNER, MODELS, TOKENIZER_OF, TOKENIZERS, KronosConfig, TokenizerConfig
from marketcast.forecast.kronos.layers import init_weights
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.tokenizer import KronosTokenizer

log = logging.getLogger("marketcast.kronos")
DEFAULT_MODEL = f"{HUB_OWNER}/Kronos-small"
M = TypeVar("M", Kronos, KronosTokenizer)
_CONFIG = {Kronos: KronosConfig, KronosTokenizer: TokenizerConfig}


def from_config(cls: type[M], cfg, seed: int = 0) -> M:
    """Random weights (upstream's init for Kronos, torch defaults for the tokenizer), fixed by ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = cls(cfg)
        if cls is Kronos:
            init_weights(module, cfg.d_model)
    return module.eval()


def from_pretrained(cls: type[M], source: str | os.PathLike, local_files_only: bool | None = None,
                    max_context: int | None = None, device: str | torch.device = "cpu") -> M:
    """Load ``cls`` from a folder or repo id (``max_context`` overrides the Kronos decoding window): built on
    the meta device, the file's tensors read straight to ``device`` (no random init)."""
    folder = resolve_folder(source, "Kronos", local_files_only)
    cfg = _CONFIG[cls].from_file(folder / "config.json")
    if cls is Kronos:
        cfg = _with_context(cfg, max_context, str(source))
    state = read_safetensors(folder / "model.safetensors", device)
    module = build_empty(lambda: cls(cfg))
    load_strict(module, state, str(folder / "model.safetensors"))
    return module.eval()


def _with_context(cfg: KronosConfig, max_context: int | None, source: str) -> KronosConfig:
    from dataclasses import replace

    if max_context is not None:
        return replace(cfg, max_context=max_context)
    name = Path(source.rstrip("/")).name
    return replace(cfg, max_context=MODELS[name].max_context) if name in MODELS else cfg


def save_pretrained(module: Kronos | KronosTokenizer, folder: str | os.PathLike) -> Path:
    """Write ``config.json`` + ``model.safetensors`` like upstream's ``save_pretrained``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = module.config.to_dict()
    cfg.pop("max_context", None)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file({k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()},
              str(folder / "model.safetensors"))
    return folder


def load_pair(weights: str | None, seed: int = 0,
              device: str | torch.device = "cpu") -> tuple[Kronos, KronosTokenizer, str]:
    """(model, tokenizer, label) for the forecaster's ``weights`` argument (see the module docstring); loaded
    weights land on ``device`` directly (random ones are made on the CPU)."""
    if weights == "random":
        log.warning("kronos: RANDOM weights (Kronos-small + Kronos-Tokenizer-base shapes); forecasts are "
                    "meaningless, use them for plumbing and speed tests only")
        return (from_config(Kronos, MODELS["Kronos-small"], seed),
                from_config(KronosTokenizer, TOKENIZERS["Kronos-Tokenizer-base"], seed), "kronos-small-random")
    model, tokenizer, label = sources(weights)
    tokenizer_module = from_pretrained(KronosTokenizer, tokenizer, device=device)
    return from_pretrained(Kronos, model, device=device), tokenizer_module, label


def sources(weights: str | None) -> tuple[str, str, str]:
    """(model source, tokenizer source, label) of non-random ``weights``: a folder's ``model/`` and
    ``tokenizer/``, or a public repo id and the tokenizer it was trained with (None/"auto": Kronos-small)."""
    weights = DEFAULT_MODEL if weights in (None, "auto") else str(weights)
    path = Path(weights).expanduser()
    if path.is_dir():
        for sub in ("model", "tokenizer"):
            if not (path / sub).is_dir():
                raise ModelLoadError(f"Kronos weights folder {path}: no {sub}/ subfolder; the folder needs model/ and "
                                     "tokenizer/, each with config.json and model.safetensors")
        return str(path / "model"), str(path / "tokenizer"), str(path)
    name = weights.split("/")[-1]
    if name not in TOKENIZER_OF:
        raise ModelLoadError(f"Kronos weights {weights!r}: not a folder and not one of "
                             f"{', '.join(f'{HUB_OWNER}/{m}' for m in TOKENIZER_OF)}; pass a folder with model/ and "
                             "tokenizer/ subfolders")
    return weights, f"{HUB_OWNER}/{TOKENIZER_OF[name]}", weights


def locate(weights: str | None) -> str:
    """Where ``--weights`` would load from (:func:`load_pair`'s resolution, no tensor read): the model's folder
    (its tokenizer's found too), or ``random``; weights that are not here raise the loader's own line."""
    if weights == "random":
        return "random"
    model, tokenizer, _ = sources(weights)
    resolve_folder(tokenizer, "Kronos")
    return str(resolve_folder(model, "Kronos"))


def _checkpoint(model: str, tokenizer: str) -> Checkpoint:
    """A public Kronos with the tokenizer it was trained with (Kronos-small loads with ``--weights auto``)."""
    repo = f"{HUB_OWNER}/{model}"
    repos = {"model": repo, "tokenizer": f"{HUB_OWNER}/{tokenizer}"}
    return Checkpoint(model.lower(), "kronos", repos, "auto" if repo == DEFAULT_MODEL else repo)


register(*(_checkpoint(m, t) for m, t in TOKENIZER_OF.items()),
         aliases={"kronos": DEFAULT_MODEL.split("/")[-1].lower()})
