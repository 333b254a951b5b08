"""TF32 for float32 matrix multiplies on CUDA, switched on only around the calls of a model that asked for it.

TF32 keeps float32's range with a 10-bit mantissa (about 1e-3 relative error per product), so it is off by
default: the parameter-level equivalence tests against the reference implementations hold at 1e-5 only
without it. The process-wide flags are restored after each call, so other code never sees them change.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def tf32(enabled: bool, device: torch.device) -> Iterator[None]:
    """Allow TF32 in cuBLAS and cuDNN inside the block when ``enabled`` and ``device`` is CUDA."""
    if not enabled or device.type != "cuda":
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
