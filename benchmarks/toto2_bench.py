"""Toto 2.0 throughput: the ``toto-2`` reference (eager, float32) vs marketcast's Toto2Forecaster, one run.

22M config with random weights (the same weights loaded in both), 256 SP500 windows of 512 bars, horizon 64,
close/high/low as three variates; both use toto-2's GluonTS defaults (min-obs backfill 8, quantile cap 1e4; the
reference's default one-pass forecast, no block decoding). Rows: marketcast eager and compiled, float32 and
bfloat16; on CPU also compiled float32 with ATen's (MKL) linears instead of the default oneDNN ones, and the
reference fed the forecaster's CPU chunks (32 windows a call), to show what each choice buys. Speed-ups are
against the reference's single call. Every row is warmed up first, then each row is timed
``--repeats`` times and printed (and saved to the result file) as soon as it ends; each row: median seconds, windows/s, the speed-up over the reference measured in the same
run, the max-abs error of its quantiles against the reference; plus the recompiles after warm-up (all rows) and
the load average before, after and at the end of each row: the CPU box is shared, and a loaded machine slows the GEMM-bound marketcast
rows more than the reference, so read the ratios of a quiet run.

    .venv/bin/python benchmarks/toto2_bench.py [--device cpu] [--windows 256] [--repeats 3] [--out toto2_bench.json]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from rich.console import Console

from common import RowReport  # benchmarks/ (the script's folder) is on sys.path
from marketcast.data import load_symbol
from marketcast.forecast.base import make_batch
from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster
from marketcast.forecast.toto2.forecaster import CPU_CHUNK
from marketcast.forecast.toto2.model import random_model
from marketcast.runtime.counters import cudagraph_skip_count, recompile_count

CONTEXT, HORIZON = 512, 64


COLUMNS = ["run", "median s", "windows/s", "vs reference", "max |q - ref|", "first call s"]


def time_repeats(run, repeats: int, sync) -> list[float]:
    """Seconds of ``repeats`` back-to-back calls of one warmed-up run. Rows are timed one after the other (not
    in turn) so that each is printed and saved the moment it ends; each row records the load average then."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--windows", type=int, default=256, help="windows per call (default: 256)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row (default: 3)")
    parser.add_argument("--size", default="22m", help="config: 22m or 4m (default: 22m)")
    parser.add_argument("--out", default="toto2_bench.json", help="JSON under benchmarks/results/")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    console = Console(width=150)
    try:
        from toto2 import Toto2Model as Reference, Toto2ModelConfig
    except ImportError as exc:
        raise SystemExit(f"the toto-2 reference is not installed ({exc}); run make install-dev") from None
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    config = Toto2Config.size(args.size)
    known = set(Toto2ModelConfig.__dataclass_fields__)
    reference = Reference(Toto2ModelConfig(**{k: v for k, v in config.to_dict().items() if k in known}))
    reference.load_state_dict(random_model(config, seed=0).state_dict())
    reference = reference.eval().to(device)

    frame = load_symbol("SP500").frame
    batch = make_batch(frame, list(range(len(frame) - args.windows, len(frame))), CONTEXT, HORIZON)
    fc0 = Toto2Forecaster(random_model(config, 0), device=device, compile="eager")
    x, mask = fc0._inputs(batch)
    inputs = {"target": x.to(device), "target_mask": mask.to(device),
              "series_ids": torch.zeros(x.shape[:2], dtype=torch.long, device=device)}

    def run_reference(chunk: int | None = None):
        """One call (the reference as a caller uses it), or calls of ``chunk`` windows like the forecaster's."""
        step = chunk or args.windows
        with torch.inference_mode():
            return torch.cat([reference.forecast({k: v[s:s + step] for k, v in inputs.items()}, HORIZON,
                                                 scaler_fallback_min_obs=8, quantile_real_cap_k=1e4)
                              for s in range(0, args.windows, step)], 1)

    runs, first, outputs, forecasters = {"toto-2 reference eager float32": run_reference}, {}, {}, {}
    if device.type == "cpu":  # the same chunking as the forecaster: how much of the speed-up is the chunk size
        runs[f"toto-2 reference eager float32, {CPU_CHUNK}-window calls"] = lambda: run_reference(CPU_CHUNK)
    rows_wanted = [("eager", "float32", None), ("default", "float32", None), ("eager", "bfloat16", None),
                   ("default", "bfloat16", None)]
    if device.type == "cpu":
        rows_wanted.insert(2, ("default", "float32", False))
    for mode, dtype, onednn in rows_wanted:
        fc = Toto2Forecaster(random_model(config, 0), device=device, dtype=dtype, compile=mode, onednn=onednn)
        name = f"marketcast {mode} {dtype}" + (" aten-linear" if onednn is False else "")
        forecasters[name] = fc
        runs[name] = lambda fc=fc: fc.quantiles(batch, HORIZON)
    for name, run in runs.items():  # warm-up: compiles happen here
        t0 = time.perf_counter()
        outputs[name] = run()
        sync()
        first[name] = time.perf_counter() - t0
    ref_q = outputs["toto-2 reference eager float32"].permute(1, 2, 0, 3).double().cpu()  # [B, 3, 9, H]
    console.print(f"Toto 2.0 {args.size}, {args.windows} windows x ctx {CONTEXT} x h {HORIZON} on {device}, "
                  f"median of {args.repeats} (each row printed as it finishes)")
    rows = RowReport(args.out, COLUMNS, {
        "benchmark": "toto2", "size": args.size, "windows": args.windows, "context": CONTEXT, "horizon": HORIZON,
        "device": str(device), "threads": torch.get_num_threads(), "repeats": args.repeats,
        "parameters": sum(p.numel() for p in reference.parameters()), "layout": config.to_dict(),
        **({"gpu": torch.cuda.get_device_name(device)} if device.type == "cuda" else {})}, console)
    r0, g0 = recompile_count(), cudagraph_skip_count()
    ref_s = None
    for name, run in runs.items():  # the reference first: every later row's speed-up is against it
        fc = forecasters.get(name)
        q = outputs[name].permute(1, 2, 0, 3).double().cpu() if fc is None else torch.as_tensor(outputs[name])
        row = dict(name=name, times=time_repeats(run, args.repeats, sync), first_s=first[name],
                   max_abs_err=float((q - ref_q).abs().max()), compiled=None if fc is None else fc.steps.compiled,
                   onednn_linears=None if fc is None else fc.onednn, chunk=None if fc is None else fc.chunk)
        seconds = statistics.median(row["times"])
        ref_s = ref_s or seconds
        row.update(windows_per_s=args.windows / seconds, speedup=ref_s / seconds)
        rows.add(row, [name, f"{seconds:.3f}", f"{row['windows_per_s']:.1f}", f"{row['speedup']:.2f}x",
                       f"{row['max_abs_err']:.2e}", f"{row['first_s']:.2f}"])
    recompiles, skips = recompile_count() - r0, cudagraph_skip_count() - g0
    console.print(f"recompiles after warm-up: {recompiles}; CUDA-graph skips: {skips}")
    rows.finish(recompiles_after_warmup=recompiles, cudagraph_skips=skips)


if __name__ == "__main__":
    main()
