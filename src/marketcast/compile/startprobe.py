"""Cold vs warm start, measured in fresh processes (an in-process second start would be warm for free).

:func:`measure_start` runs ``python -m marketcast.compile.startprobe`` twice for one model and mode:

1. **cold**: empty persistent-artifact dir and empty inductor cache; it builds the forecaster, runs one
   forecast (compile included) and saves ``torch.compiler.save_cache_artifacts()`` under the artifact dir.
2. **warm**: a *new* empty inductor cache (like a fresh machine or container) but the artifact dir from
   run 1; it loads the artifacts before building, then runs the same forecast.

Start time = build + first forecast. Inductor's FX-graph cache hits/misses are reported too, so a warm
start is visible without trusting timings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import import_module
from pathlib import Path

import numpy as np


def _probe(args: argparse.Namespace) -> dict:
    import torch
    from torch._dynamo.utils import counters

    from marketcast.runtime.cache import artifact_path, load_artifacts, save_artifacts
    from marketcast.data import load_symbol
    from marketcast.forecast.base import make_batch

    key = {"model": args.model, "mode": args.mode, "device": args.device, "dtype": args.dtype,
           "weights": args.weights, "context": args.context, "horizon": args.horizon, "samples": args.samples,
           "batch": args.batch}
    cache_dir = Path(args.cache_dir)
    t0 = time.perf_counter()
    loaded = load_artifacts(key, cache_dir)
    t_loaded = time.perf_counter()
    module, attr = args.factory.split(":")
    create = getattr(import_module(module), attr)
    forecaster = create(weights=args.weights, device=args.device, dtype=args.dtype,
                        compile=args.mode or "eager", seed=args.seed)
    t_built = time.perf_counter()
    bars = load_symbol(args.symbol, data_dir=args.data_dir)
    ends = np.arange(len(bars) - args.batch, len(bars))
    batch = make_batch(bars.frame, ends, args.context, args.horizon)
    t_data = time.perf_counter()
    forecaster.forecast(batch, args.horizon, args.samples, seed=args.seed)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    t_first = time.perf_counter()
    saved = None
    if not loaded and args.save:
        path = save_artifacts(key, cache_dir)
        saved = str(path) if path else None
    inductor = counters["inductor"] if "inductor" in counters else {}
    return {
        "cache_loaded": loaded,
        "cache_saved": saved,
        "cache_file": str(artifact_path(key, cache_dir)),
        "cache_load_s": t_loaded - t0,
        "build_s": t_built - t_loaded,
        "first_forecast_s": t_first - t_data,
        "start_s": (t_built - t0) + (t_first - t_data),  # data loading is not part of a model's start
        "fxgraph_cache_hit": int(inductor.get("fxgraph_cache_hit", 0)),
        "fxgraph_cache_miss": int(inductor.get("fxgraph_cache_miss", 0)),
    }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m marketcast.compile.startprobe")
    p.add_argument("--factory", required=True, help="module:function with the registry factory signature")
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default=None)
    p.add_argument("--weights", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--symbol", default="SP500")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--horizon", type=int, default=8)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--save", action="store_true")
    return p.parse_args(argv)


def measure_start(
    factory: str,
    model: str,
    mode: str | None,
    *,
    weights: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    symbol: str = "SP500",
    data_dir: str | None = None,
    context: int = 512,
    horizon: int = 8,
    samples: int = 64,
    batch: int = 2,
    seed: int = 0,
    timeout_s: float = 1800,
    extra_env: dict | None = None,
) -> dict:
    """Run the cold and the warm probe; returns ``{"cold": {...}, "warm": {...}, "speedup": cold/warm}``."""
    common = ["--factory", factory, "--model", model, "--device", device, "--dtype", dtype, "--symbol", symbol,
              "--context", str(context), "--horizon", str(horizon), "--samples", str(samples),
              "--batch", str(batch), "--seed", str(seed)]
    if mode:
        common += ["--mode", mode]
    if weights:
        common += ["--weights", weights]
    if data_dir:
        common += ["--data-dir", str(data_dir)]
    src = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="marketcast-startprobe-") as tmp:
        artifacts = Path(tmp) / "artifacts"
        out = {}
        for run in ("cold", "warm"):
            env = {**os.environ, **(extra_env or {}), "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / f"inductor-{run}"),
                   "PYTHONPATH": os.pathsep.join(filter(None, [src, os.getcwd(), os.environ.get("PYTHONPATH")]))}
            cmd = [sys.executable, "-m", "marketcast.compile.startprobe", *common, "--cache-dir", str(artifacts)]
            if run == "cold":
                cmd.append("--save")
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                return {"error": f"{run} probe failed: {tail[:300]}"}
            out[run] = json.loads(proc.stdout.strip().splitlines()[-1])
    warm_s = out["warm"]["start_s"]
    out["speedup"] = out["cold"]["start_s"] / warm_s if warm_s > 0 else None
    return out


def main(argv: list[str] | None = None) -> int:
    result = _probe(_parse(argv))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
