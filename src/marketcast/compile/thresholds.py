"""The gates a compiled mode must pass; plain values, importable without numpy or torch (the CLI's defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Gates for a compiled mode, each relative to eager on the same windows and seeds (CLI flags of the same
    names; the defaults are the strict production values)."""

    max_output_delta: float = 1e-3  # max |median_c - median_e| / |median_e| (strictly below)
    max_recompiles: int = 0  # after warm-up
    min_speedup: float = 1.1  # eager p50 latency / compiled p50 latency
    max_memory_delta: float = 0.25  # extra peak memory over eager's whole footprint
