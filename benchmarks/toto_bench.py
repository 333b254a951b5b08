"""Toto latency/memory benchmark: toto-ts eager vs marketcast eager vs marketcast compiled (fp32 and bf16).

Base config (151,306,080 parameters) with random weights, one SP500 window of 512 bars, two workloads:
h 8 / 1024 samples and h 256 / 256 samples. Ratios are against toto-ts measured in the same run.

    .venv/bin/python benchmarks/toto_bench.py --device cpu --repeats 3 --out toto_bench.json [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import torch

from common import PeakMemory, hbm_floor_ms, rel_delta  # benchmarks/ (the script's folder) is on sys.path
from marketcast.runtime.counters import cudagraph_skip_count, recompile_count
from marketcast.data import load_symbol
from marketcast.forecast.base import make_batch
from marketcast.forecast.toto import TotoConfig, TotoForecaster
from marketcast.forecast.toto.reference import reference_backbone, reference_forecast

WORKLOADS = [  # name, horizon, samples, toto-ts samples_per_batch (as in REFERENCE.md)
    ("h8", 8, 1024, 256),
    ("h256", 256, 256, 64),
]
CONTEXT = 512


def measure(run, repeats: int, device: torch.device, extra_warmups: int = 2) -> dict:
    """p50/σ latency over ``repeats`` timed runs after warm-up: the first run (compile happens there, its time
    is ``first_s``) and ``extra_warmups`` more (CUDA graphs are recorded on a later call than the compile)."""
    t0 = time.perf_counter()
    run()
    warm = time.perf_counter() - t0
    for _ in range(extra_warmups):
        run()
    times, peak = [], 0.0
    r0, g0 = recompile_count(), cudagraph_skip_count()
    for _ in range(repeats):
        with PeakMemory(device) as mem:
            t0 = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        peak = max(peak, mem.extra_mib)
    return {"p50_s": statistics.median(times), "runs_s": times, "sigma_s": statistics.pstdev(times) if len(times) > 1 else 0.0,
            "first_s": warm, "peak_mib": peak, "recompiles": recompile_count() - r0,
            "cudagraph_skips": cudagraph_skip_count() - g0, "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="toto_bench.json")
    parser.add_argument("--quick", action="store_true", help="toto-ts timed once (it is the slow one)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    device = torch.device(args.device)
    torch.manual_seed(args.seed)

    frame = load_symbol("SP500").frame
    batch = make_batch(frame, [len(frame) - 1], CONTEXT, 256)
    variants = {}
    for dtype, label in (("float32", "fp32"), ("bfloat16", "bf16")):
        variants[f"marketcast eager {label}"] = dict(dtype=dtype, compile="eager")
        variants[f"marketcast compiled {label}"] = dict(dtype=dtype, compile="default")
        if device.type == "cuda":  # CUDA graphs: the mode that removes launch overhead
            variants[f"marketcast cudagraphs {label}"] = dict(dtype=dtype, compile="reduce-overhead")
    forecasters = {name: TotoForecaster.from_config(TotoConfig.base(), seed=args.seed, device=args.device, **kw)
                   for name, kw in variants.items()}
    base = forecasters["marketcast eager fp32"]
    ref = reference_backbone(base.model).to(device)
    x, mask = (t.numpy() for t in base._inputs(batch))

    results = {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
               "context": CONTEXT, "params": sum(p.numel() for p in base.model.parameters()), "workloads": {}}
    for wname, horizon, samples, ref_spb in WORKLOADS:
        rows = {}
        print(f"== {wname}: ctx {CONTEXT}, h {horizon}, {samples} samples", flush=True)
        ref_repeats = 1 if args.quick else args.repeats
        rows["toto-ts eager fp32"] = measure(
            lambda: reference_forecast(ref, x, mask, horizon, samples, ref_spb, seed=args.seed), ref_repeats, device,
            extra_warmups=0)
        rows["toto-ts eager fp32"]["samples_per_batch"] = ref_spb
        print("  toto-ts done", rows["toto-ts eager fp32"], flush=True)
        outputs = {}
        for name, fc in forecasters.items():
            rows[name] = measure(lambda: fc.forecast(batch, horizon, samples, seed=args.seed), args.repeats, device)
            fc_out = fc.forecast(batch, horizon, samples, seed=args.seed)
            outputs[name] = fc_out.samples
            rows[name].update(compiled=fc_out.meta["compiled"], samples_per_batch=fc_out.meta["samples_per_batch_used"],
                              fallback_reason=fc_out.meta["fallback_reason"])
            print(f"  {name} done", rows[name], flush=True)
        ref_p50 = rows["toto-ts eager fp32"]["p50_s"]
        for row in rows.values():
            row["speedup_vs_toto_ts"] = ref_p50 / row["p50_s"]
        delta = rel_delta(outputs["marketcast eager bf16"], outputs["marketcast eager fp32"])
        results["workloads"][wname] = {"horizon": horizon, "samples": samples, "rows": rows, "bf16_vs_fp32": delta}

    lines = [f"device {device}, torch {torch.__version__}, {results['threads']} threads, "
             f"{results['params']:,} params, ctx {CONTEXT}",
             f"{'workload':8} {'variant':28} {'p50 ms':>9} {'σ ms':>8} {'first s':>8} {'peak MiB':>9} "
             f"{'recomp':>6} {'cg skip':>7} {'× toto-ts':>9}"]
    for wname, w in results["workloads"].items():
        for name, r in w["rows"].items():
            lines.append(f"{wname:8} {name:28} {1e3 * r['p50_s']:9.2f} {1e3 * r['sigma_s']:8.2f} {r['first_s']:8.2f} "
                         f"{r['peak_mib']:9.0f} {r['recompiles']:6d} {r['cudagraph_skips']:7d} "
                         f"{r['speedup_vs_toto_ts']:9.1f}")
        d = w["bf16_vs_fp32"]
        lines.append(f"{wname:8} bf16 vs fp32 relative diff: median {d['median']:.4f}, P10 {d['p10']:.4f}, "
                     f"P90 {d['p90']:.4f}")
    if device.type == "cuda":
        for dtype, label in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            ms, how = hbm_floor_ms(device, results["params"] * dtype.itemsize)
            lines.append(f"HBM floor {label}: {ms:.3f} ms ({how})")
    table = "\n".join(lines)
    print(table)
    results["table"] = table
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
