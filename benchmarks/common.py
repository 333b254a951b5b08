"""What the benchmark scripts share: timing a call and writing the JSON report beside the printed table.

Model benchmarks also share peak memory of a run, the device's peak FLOP/s (for model FLOPs utilisation)
and the GPU's memory-bandwidth floor; torch is imported inside those helpers, so the start-up benchmarks that
import this module do not pay for it. Peak FLOP/s (dense, no sparsity):

* CUDA: the datasheet number of the GPU by name (:data:`GPU_PEAK_TFLOPS`), bf16 on tensor cores for
  bfloat16 and plain fp32 (no TF32) for float32; ``--peak-tflops`` overrides an unknown GPU.
* CPU: threads x clock x FLOPs per cycle per core. The clock is /proc/cpuinfo's ``cpu MHz``; FLOPs per cycle
  are 2 FMA pipes x 8 float32 lanes x 2 = 32 with AVX2/AVX-512 on 256-bit datapaths (AMD Zen 4 runs AVX-512
  on 256-bit units; Intel parts with two 512-bit FMA units reach 64: pass ``--peak-tflops``), and twice that
  for bfloat16 when the CPU has ``avx512_bf16`` (VDPBF16PS: two bf16 products per float32 lane), else the
  float32 number (bf16 is then converted, not faster).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn, *args) -> tuple[float, object]:
    """Seconds one call of ``fn(*args)`` took, and its result."""
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def write_report(path: str | Path, report: dict, console) -> None:
    """``report`` plus the machine it ran on, as JSON at ``path`` (folders created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpu_count": os.cpu_count(), "python": platform.python_version(),
               "processor": platform.processor() or platform.machine()}
    out.write_text(json.dumps({**report, **machine}, indent=2) + "\n")
    console.print(f"wrote {out}")


def load_average() -> list[float] | None:
    """The 1/5/15-minute load average (None where the OS has none): a shared machine slows every timing."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


class RowReport:
    """Prints each benchmark row the moment it is measured and rewrites the result file after every row.

    A run cut by a time limit therefore still leaves its finished rows on screen and in
    ``benchmarks/results/NAME`` (``"complete": false`` until :meth:`finish`). Repeated timings of a row are
    folded here, once for every benchmark: the row keeps every sample (``times``), their median
    (``seconds``), and the 1-minute load average when the row ended.
    """

    def __init__(self, name: str, columns: list[str], report: dict, console) -> None:
        self.path = RESULTS / name if not Path(name).is_absolute() else Path(name)
        self.columns, self.console, self.rows = columns, console, []
        self.report = {**report, "load_average_before": load_average(), "complete": False, "rows": self.rows}
        console.print("  ".join(columns))

    def add(self, row: dict, cells: list[str]) -> dict:
        """Record ``row`` (``times`` folded into its median ``seconds``), print ``cells`` now, save the file."""
        if "times" in row:
            row = {**row, "seconds": statistics.median(row["times"])}
        row["load_1min"] = (load_average() or [None])[0]
        self.rows.append(row)
        self.console.print("  ".join(cells))
        sys.stdout.flush()
        self._save()
        return row

    def finish(self, **extra) -> None:
        """Mark the file complete with the load average after the run and ``extra`` fields."""
        self.report.update(extra, complete=True, load_average_after=load_average())
        self._save()
        before, after = self.report["load_average_before"], self.report["load_average_after"]
        if before is not None:
            self.console.print("load average (1/5/15 min) before: " + " ".join(f"{v:.2f}" for v in before)
                               + "; after: " + " ".join(f"{v:.2f}" for v in after))
        self.console.print(f"wrote {self.path}")

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        machine = {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                   "processor": platform.processor() or platform.machine()}
        self.path.write_text(json.dumps({**self.report, **machine}, indent=2) + "\n")


GPU_PEAK_TFLOPS = {  # (float32 without TF32, bfloat16 dense), datasheet
    "H100 80GB HBM3": (66.9, 989.4), "H100 SXM": (66.9, 989.4), "H100 PCIe": (51.2, 756.5),
    "H100 NVL": (60.0, 835.5), "H200": (66.9, 989.4), "A100": (19.5, 312.0), "L40S": (91.6, 362.1),
}
GPU_HBM_TBPS = {"H100 80GB HBM3": 3.35, "H100 SXM": 3.35, "H100 PCIe": 2.0, "H100 NVL": 3.9, "H200": 4.8,
                "A100": 2.0, "L40S": 0.864}  # memory bandwidth, datasheet


def hbm_floor_ms(device, weight_bytes: int) -> tuple[float, str]:
    """The time to read the weights once from GPU memory: no forecast can be faster."""
    import torch

    name = torch.cuda.get_device_name(device)
    tbps = next((v for k, v in GPU_HBM_TBPS.items() if k in name), float("nan"))
    return 1e3 * weight_bytes / (tbps * 1e12), f"{weight_bytes / 2**20:.0f} MiB of weights / {tbps} TB/s ({name})"


def rel_delta(a: np.ndarray, b: np.ndarray) -> dict:
    """Relative difference of per-step median / P10 / P90 close forecasts ``[B, F, S, H]`` (a vs reference b)."""
    out = {}
    for name, q in (("median", 0.5), ("p10", 0.1), ("p90", 0.9)):
        qa, qb = np.quantile(a[:, 0], q, axis=1), np.quantile(b[:, 0], q, axis=1)
        out[name] = float(np.median(np.abs(qa - qb) / np.abs(qb)))
    return out


class PeakMemory:
    """Peak extra memory of a run: CUDA max_memory_allocated, or RSS polled every 2 ms on CPU."""

    def __init__(self, device) -> None:
        import torch

        self.device = torch.device(device)

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self) -> "PeakMemory":
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return self
        self.base = self.peak = self._rss()
        self._stop = threading.Event()

        def poll() -> None:
            while not self._stop.wait(0.002):
                self.peak = max(self.peak, self._rss())

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self._rss())

    @property
    def extra_mib(self) -> float:
        return (self.peak - self.base) / 2**20

    @property
    def peak_mib(self) -> float:
        return self.peak / 2**20


def _cpu_flags_and_mhz() -> tuple[set[str], float]:
    flags, mhz = set(), 0.0
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("cpu MHz") and not mhz:
                mhz = float(line.split(":", 1)[1])
    return flags, mhz


def peak_flops(device, dtype: str, override_tflops: float | None = None) -> tuple[float, str]:
    """(peak FLOP/s, how it was found) for ``dtype`` ("float32" or "bfloat16") on ``device``."""
    import torch

    if override_tflops:
        return override_tflops * 1e12, f"--peak-tflops {override_tflops}"
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, (fp32, bf16) in GPU_PEAK_TFLOPS.items():
            if key in name:
                value = bf16 if dtype == "bfloat16" else fp32
                return value * 1e12, f"{name}: {value} TFLOP/s {dtype} datasheet (dense)"
        return float("nan"), f"{name}: unknown peak, pass --peak-tflops"
    flags, mhz = _cpu_flags_and_mhz()
    per_cycle = 32 if {"avx2", "fma"} <= flags else 16
    if dtype == "bfloat16" and "avx512_bf16" in flags:
        per_cycle *= 2
    threads = torch.get_num_threads()
    return (threads * mhz * 1e6 * per_cycle,
            f"CPU: {threads} threads x {mhz / 1000:.2f} GHz x {per_cycle} {dtype} FLOP/cycle")
