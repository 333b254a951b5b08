"""Memory in use and its high-water mark, with a window that can restart (per mode, per symbol).

CUDA: ``memory_allocated`` / ``max_memory_allocated`` (peak reset with ``reset_peak_memory_stats``). CPU: the
process's ``VmRSS`` / ``VmHWM``; writing ``5`` to ``/proc/self/clear_refs`` resets the high-water mark to the
current RSS. Where that is not allowed the peak is the process's lifetime peak, and ``source`` says so.
"""

from __future__ import annotations

import gc


def _status(field: str) -> float | None:
    """A ``/proc/self/status`` size in MiB, or None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1]) / 1024.0  # kB -> MiB
    except OSError:
        return None
    return None


class MemoryProbe:
    """``restart()`` opens a window at the memory in use now; ``peak()`` is the high-water mark since then."""

    def __init__(self, device: str) -> None:
        self.cuda = str(device).startswith("cuda")
        self.source = "cuda_max_allocated" if self.cuda else "process_rss"

    def restart(self) -> float:
        """Reset the high-water mark to what is in use now and return that (MiB)."""
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            return torch.cuda.memory_allocated() / 2**20
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset VmHWM to the current RSS
        except OSError:
            self.source = "process_rss_lifetime_peak"  # cannot reset: peak since process start
        return _status("VmRSS") or 0.0

    def peak(self) -> float:
        """The high-water mark since the last restart (MiB, absolute)."""
        if self.cuda:
            import torch

            return torch.cuda.max_memory_allocated() / 2**20
        hwm = _status("VmHWM")
        if hwm is None:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return hwm
