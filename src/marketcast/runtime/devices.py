"""A model's ``--device`` and ``--dtype`` names as torch objects, refused in one line when they cannot run here."""

from __future__ import annotations

import torch

from marketcast.errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def torch_dtype(name: str, model: str, dtypes: dict[str, torch.dtype] = DTYPES) -> torch.dtype:
    """``dtypes[name]``; ``model`` names the model in the error."""
    if name not in dtypes:
        raise ConfigError(f"{model} dtype {name!r} is not supported; use one of {', '.join(dtypes)}")
    return dtypes[name]


def torch_device(name: str | torch.device, model: str) -> torch.device:
    """The device, refused when it is no torch device or is CUDA on a machine without it."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigError(f"{model} device {name!r} is not a torch device; use cpu or cuda[:N]") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{model} device {name!r} requested but CUDA is not available; use --device cpu")
    return device
