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

from marketcast.errors import ModelLoadError
from marketcast.forecast.toto.config import TotoConfig

DEFAULT_REPO = "Datadog/Toto-Open-Base-1.0"
FILES = ("config.json", "model.safetensors")
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
    """``load_state_dict(strict=True)`` after remapping, with one clear line for any mismatch."""
    state = to_packed_keys(state)
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} tensor(s) e.g. {missing[0]!r}")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} e.g. {unexpected[0]!r}")
        raise ModelLoadError(f"{source}: {'; '.join(parts)}; the file is not a Toto checkpoint for this config.json")
    for key, want in expected.items():
        got = state[key]
        if tuple(got.shape) != tuple(want.shape):
            raise ModelLoadError(
                f"{source}: tensor {key!r} has shape {tuple(got.shape)} but config.json needs {tuple(want.shape)}; "
                "config.json and model.safetensors do not belong together")
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()}, strict=True)


def read_safetensors(path: Path) -> dict:
    from safetensors.torch import load_file

    if not path.is_file():
        raise ModelLoadError(f"{path}: model.safetensors not found; put Toto's model.safetensors next to config.json")
    try:
        return load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"{path}: unreadable safetensors file ({first}); it is truncated or corrupt, "
                             "download it again") from None


def _offline() -> bool:
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return env in {"1", "true", "yes", "on"} or bool(getattr(constants, "HF_HUB_OFFLINE", False))


def resolve_folder(repo_or_folder: str | os.PathLike, local_files_only: bool | None = None,
                   cache_dir: str | os.PathLike | None = None) -> Path:
    """A local folder as is; else the repo's two files from the HF cache (or the hub when online)."""
    path = Path(repo_or_folder).expanduser()
    if path.is_dir():
        return path
    repo = str(repo_or_folder)
    if path.exists() or repo.count("/") != 1 or repo.startswith((".", "/", "~")):
        raise ModelLoadError(f"Toto weights {repo!r}: not a folder and not a Hugging Face repo id (owner/name); "
                             "pass a folder holding config.json and model.safetensors")
    offline = _offline() if local_files_only is None else bool(local_files_only)
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo, allow_patterns=list(FILES), local_files_only=offline,
                                   cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as exc:
        how = ("offline (HF_HUB_OFFLINE / local_files_only) and not in the Hugging Face cache" if offline
               else f"could not be downloaded ({type(exc).__name__})")
        raise ModelLoadError(
            f"Toto weights {repo!r} {how}; run `huggingface-cli download {repo} config.json model.safetensors` "
            "on a connected machine, or put config.json and model.safetensors in a folder and pass that folder "
            "(--weights FOLDER)") from None
    return Path(folder)


def load_checkpoint(folder: Path) -> tuple[TotoConfig, dict]:
    config = TotoConfig.from_file(folder / "config.json")
    return config, read_safetensors(folder / "model.safetensors")


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
