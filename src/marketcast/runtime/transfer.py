"""Results off the device while the device keeps working.

A forecast call computes chunk after chunk on the GPU and returns float64 numpy paths. Copying a chunk to
the host and converting it blocks Python, so the next chunk would not be launched until the previous one
had crossed: :class:`HostSink` instead starts an asynchronous copy into pinned memory and converts the
*previous* chunk while the GPU runs the current one. On the CPU it writes straight through.
"""

from __future__ import annotations

import numpy as np
import torch


class HostSink:
    """Writes device tensors into ``out`` (a numpy array) at given indices; call :meth:`flush` at the end."""

    def __init__(self, out: np.ndarray, device: torch.device) -> None:
        self.out = out
        self.cuda = torch.device(device).type == "cuda"
        self._pending: tuple | None = None

    def put(self, index, tensor: torch.Tensor) -> None:
        """``out[index] = tensor`` (converted to ``out``'s dtype), asynchronously on CUDA."""
        if not self.cuda:
            self.out[index] = tensor.numpy()
            return
        staging = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        staging.copy_(tensor, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self.flush()
        self._pending = (index, staging, done)

    def flush(self) -> None:
        """Finish the copy in flight (if any) and write it into ``out``."""
        if self._pending is None:
            return
        index, staging, done = self._pending
        self._pending = None
        done.synchronize()
        self.out[index] = staging.numpy()
