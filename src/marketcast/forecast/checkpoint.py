"""Checkpoint I/O shared by Toto and Kronos: a folder or a Hugging Face repo holding ``config.json`` +
``model.safetensors``, read offline-safe, loaded strictly, every failure one :class:`ModelLoadError` line."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from marketcast.errors import ModelLoadError
from marketcast.forecast.hub import FILES, download_advice


def offline() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it (its constant is fixed at import, so read both)."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return env in {"1", "true", "yes", "on"} or bool(getattr(constants, "HF_HUB_OFFLINE", False))


def resolve_folder(source: str | os.PathLike, model: str, local_files_only: bool | None = None,
                   cache_dir: str | os.PathLike | None = None) -> Path:
    """A local folder as is; else a repo id's two files from the HF cache (the hub only when online).

    ``model`` names the model in error messages ("Toto", "Kronos").
    """
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    repo = str(source)
    if path.exists() or repo.count("/") != 1 or repo.startswith((".", "/", "~")):
        raise ModelLoadError(f"{model} weights {repo!r}: not a folder and not a Hugging Face repo id (owner/name); "
                             "pass a folder holding config.json and model.safetensors")
    is_offline = offline() if local_files_only is None else bool(local_files_only)
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo, allow_patterns=list(FILES), local_files_only=is_offline,
                                   cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as exc:
        how = ("offline (HF_HUB_OFFLINE / local_files_only) and not in the Hugging Face cache" if is_offline
               else f"could not be downloaded ({type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]})")
        raise ModelLoadError(f"{model} weights {repo!r} {how}; {download_advice(repo, model)}") from None
    return Path(folder)


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if not path.is_file():
        raise ModelLoadError(f"{path}: model.safetensors not found; put the checkpoint next to its config.json")
    try:
        return load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for truncated or corrupt files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"{path}: unreadable safetensors file ({first}); it is truncated or corrupt, "
                             "download it again") from None


def load_strict(module: nn.Module, state: dict, source: str, what: str | None = None) -> None:
    """``load_state_dict(strict=True)`` with one line naming the first bad key (and both shapes)."""
    what = what or type(module).__name__
    expected = module.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = [f"missing {len(missing)} tensor(s) e.g. {missing[0]!r}"] if missing else []
        parts += [f"unexpected {len(unexpected)} e.g. {unexpected[0]!r}"] if unexpected else []
        raise ModelLoadError(f"{source}: {'; '.join(parts)}; the file is not a {what} checkpoint for this "
                             "config.json")
    for key, want in expected.items():
        if tuple(state[key].shape) != tuple(want.shape):
            raise ModelLoadError(f"{source}: tensor {key!r} has shape {tuple(state[key].shape)} but config.json "
                                 f"needs {tuple(want.shape)}; config.json and model.safetensors do not belong together")
    module.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()}, strict=True)
