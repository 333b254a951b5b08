"""Checkpoint I/O shared by Toto and Kronos: a folder or a Hugging Face repo holding ``config.json`` +
``model.safetensors`` (or its shards and ``model.safetensors.index.json``), read offline-safe, loaded strictly, every failure one :class:`ModelLoadError` line.

Models are built on the meta device (:func:`build_empty`: no memory, no random init) and the file's tensors
are read straight to the target device and assigned as the parameters, so loading costs one read of the
file instead of a random initialisation that is then overwritten.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, TypeVar

import torch
from torch import nn

from marketcast.errors import ModelLoadError
from marketcast.forecast.hub import FILES, download_advice, not_found, offline  # hub sits below: it never imports this

M = TypeVar("M", bound=nn.Module)


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
        folder = snapshot_download(repo, allow_patterns=[*FILES, INDEX, SHARDS], local_files_only=is_offline,
                                   cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as exc:  # offline and not cached, 401/404, network
        raise ModelLoadError(f"{not_found(model, repo, exc, is_offline)}; {download_advice(repo, model)}") from None
    return Path(folder)


INDEX = "model.safetensors.index.json"  # a sharded checkpoint, as transformers' save_pretrained writes it
SHARDS = "model-*-of-*.safetensors"


def _load_one(path: Path, device: torch.device | str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=str(device))
    except Exception as exc:  # safetensors raises its own error types for truncated or corrupt files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"{path}: unreadable safetensors file ({first}); it is truncated or corrupt, "
                             "download it again") from None


def read_sharded(index: Path, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a sharded checkpoint: ``model.safetensors.index.json``'s ``weight_map`` (tensor name ->
    shard file, the Hugging Face convention) names the shards beside it; each is read once, and a tensor the
    index maps to a shard that does not hold it is refused like a missing shard."""
    import json

    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"{index}: not a safetensors index ({type(exc).__name__}: {exc}); it needs a "
                             '"weight_map" of tensor name -> shard file, download it again') from None
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        path = index.parent / shard
        if not path.is_file():
            raise ModelLoadError(f"{index}: shard {shard} not found in {index.parent}; download every shard "
                                 "the index names")
        state.update(_load_one(path, device))
    absent = sorted(name for name in weight_map if name not in state)
    if absent:
        raise ModelLoadError(f"{index}: {len(absent)} tensors the index maps are in no shard (first: "
                             f"{absent[0]} in {weight_map[absent[0]]}); the shards do not match the index")
    return state


def read_safetensors(path: Path, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """``model.safetensors``, or where only ``model.safetensors.index.json`` lies beside it, its shards."""
    if not path.is_file() and (path.parent / INDEX).is_file():
        return read_sharded(path.parent / INDEX, device)
    if not path.is_file():
        raise ModelLoadError(f"{path}: model.safetensors not found; put the checkpoint next to its config.json")
    return _load_one(path, device)


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
    on_meta = any(t.is_meta for t in expected.values())
    module.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()}, strict=True, assign=on_meta)
    if on_meta:
        _materialise_buffers(module, next(iter(state.values())).device)


def build_empty(factory: Callable[[], M]) -> M:
    """``factory()`` on the meta device: shapes only, no storage, no random init (fill with :func:`load_strict`)."""
    with torch.device("meta"):
        return factory()


def _materialise_buffers(module: nn.Module, device: torch.device) -> None:
    """Non-persistent buffers are not in a checkpoint: modules holding them rebuild them with
    ``reset_buffers(device)``; anything still on the meta device after that is a bug, said loudly."""
    for sub in module.modules():
        if hasattr(sub, "reset_buffers"):
            sub.reset_buffers(device)
    left = [name for name, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"{type(module).__name__}: {left[0]!r} was not loaded and has no reset_buffers()")
