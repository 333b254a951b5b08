"""The calibration block of a report: per field, coverage of the central 50/80/90/95 % intervals with Wilson
intervals (:mod:`.coverage`), the 10-bin PIT histogram with its KS and chi-square uniformity p-values and the
reliability points (:mod:`.pit`), over the windows given.

A plain dict of numbers and lists (JSON- and run-store-ready), computed once per symbol by the engine so the
terminal, JSON, summary.md, HTML tearsheet and run store all show the same figures. Vectorised (one sort per
field for every level) and scipy-free: 5,000 windows x 256 samples x 3 fields take about 13 ms of CPU.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from marketcast.calibrate.coverage import LEVELS, Coverage, coverage, format_coverage
from marketcast.calibrate.pit import pit_uniformity, pit_values, reliability_points

PIT_BINS = 10


def calibration_block(samples: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray],
                      keep: np.ndarray | None = None, seed: int = 0, levels=LEVELS,
                      quantiles: Mapping[str, np.ndarray] | None = None, quantile_levels=()) -> dict:
    """``{"windows": n, "fields": {field: {"coverage": [...], "pit": {...}, "reliability": {...}}}}`` from
    sample returns ``[N, S]`` and outcomes ``[N]`` per field over the windows where ``keep`` (bool ``[N]``,
    default all) holds; ``fields`` is empty when no window is kept. With the model's ``quantiles`` ``[N, K]``
    per field at ``quantile_levels``, an interval whose bounds are both knots is read from them (each coverage
    entry's ``source``); the PIT stays on the samples."""
    fields: dict = {}
    n = 0
    for name, x in samples.items():
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(actual[name], dtype=np.float64)
        q = None if quantiles is None else np.asarray(quantiles[name], dtype=np.float64)
        if keep is not None:
            x, y = x[keep], y[keep]
            q = None if q is None else q[keep]
        n = int(y.size)
        if not n:
            continue
        u = pit_values(x, y, axis=-1, seed=seed)
        test = pit_uniformity(u, PIT_BINS)
        tau, observed = reliability_points(u)
        fields[name] = {
            "coverage": [{"nominal": c.nominal, "rate": c.rate, "lo": c.lo, "hi": c.hi, "n": c.n,
                          "covered": c.covered, "source": c.source}
                         for c in coverage(x, y, levels, axis=-1, knots=q, knot_levels=quantile_levels)],
            "pit": {"bins": PIT_BINS, "counts": list(test.counts), "n": test.n, "ks_stat": test.ks_stat,
                    "ks_p": test.ks_p, "chi2_stat": test.chi2_stat, "chi2_p": test.chi2_p},
            "reliability": {"nominal": [float(t) for t in tau], "observed": [float(o) for o in observed]},
        }
    return {"windows": n, "fields": fields}


def coverage_of(entry: dict) -> Coverage:
    """A JSON coverage entry back as a :class:`Coverage` (for printing)."""
    return Coverage(entry["nominal"], entry["covered"], entry["n"], entry["rate"], entry["lo"], entry["hi"],
                    entry.get("source", "samples"))


def field_line(name: str, block: dict) -> str:
    """``close: coverage 50%: 48% [43, 53] · coverage 80%: 79% [75, 83] · ... · PIT KS p=0.43, chi2 p=0.61``."""
    f = block["fields"][name]
    covered = " · ".join(format_coverage(coverage_of(c)) for c in f["coverage"])
    return f"{name}: {covered} · PIT KS p={f['pit']['ks_p']:.2f}, chi2 p={f['pit']['chi2_p']:.2f}"


def store_columns(block: dict | None) -> dict:
    """Flat run-store columns: ``calibration.close.cov80`` (the rate), ``calibration.close.pit_ks_p``, ...,
    and ``calibration.windows``."""
    if not block:
        return {}
    out: dict = {"calibration.windows": block.get("windows")}
    for name, f in block.get("fields", {}).items():
        for c in f["coverage"]:
            out[f"calibration.{name}.cov{round(100 * c['nominal']):d}"] = c["rate"]
        out[f"calibration.{name}.pit_ks_p"] = f["pit"]["ks_p"]
        out[f"calibration.{name}.pit_chi2_p"] = f["pit"]["chi2_p"]
    return out
