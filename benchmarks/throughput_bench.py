"""Backtest-scale throughput: Toto base and Kronos-small forecasting every window of a batch in one call.

Random weights (seed 0, the same in every variant and in the references), real SP500/NASDAQ windows of
``--context`` bars. The embedded data has two series, so the ``--symbols`` symbols are these two taken at
different window offsets (symbol j uses series j % 2, its window ends shifted by j // 2 bars). Per row
(model x horizon x dtype x eager/compiled): the forecaster's ``warmup`` for the batch's shapes, then
``--repeats`` timed ``forecast`` calls of all ``--windows`` x ``--symbols`` windows. Printed per row:

* windows/s (median call), MFU = windows/s x FLOPs per window / the device's peak (benchmarks/common.py: how the
  peak is found; FLOPs are those the forecast executes, counted by ``torch.utils.flop_counter`` on one
  window of the eager float32 model: matrix multiplies and attention, padding included);
* peak MiB: CUDA ``max_memory_allocated`` over building, warm-up and timed calls (weights included); CPU
  the process's peak resident memory over the same span (the batch and the interpreter included: rough);
* recompiles and CUDA-graph skips during the timed calls (after warm-up);
* x ref: windows/s over toto-ts (``TotoForecaster`` with its KV cache, samples_per_batch = samples) or
  upstream Kronos (``auto_regressive_inference``, kronos-finance's vendored copy) run on the first
  ``--ref-windows`` windows of the same batch, float32 eager;
* x before: over the same row measured with another source tree (``--before-src DIR``, e.g.
  ``git archive main src | tar -x -C DIR``), run in a subprocess through the public registry API.

    PYTHONPATH=src python benchmarks/throughput_bench.py --device cuda                     # the issue's sizes
    PYTHONPATH=src python benchmarks/throughput_bench.py --device cpu --windows 2 --models toto --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, PeakMemory, peak_flops, rel_delta  # noqa: E402


def windows_batch(symbols: int, per_symbol: int, context: int, horizon: int):
    """``symbols`` x ``per_symbol`` windows of the embedded series, ends spread evenly over the history."""
    from marketcast.data import load_symbol
    from marketcast.forecast.base import ContextBatch, make_batch

    frames = [load_symbol(name).frame for name in ("SP500", "NASDAQ")]
    parts = []
    for j in range(symbols):
        frame = frames[j % 2]
        ends = np.linspace(context - 1 + j // 2, len(frame) - 1, per_symbol).astype(np.int64)
        parts.append(make_batch(frame, ends, context, horizon))
    return ContextBatch(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                          ("values", "mask", "timestamps", "future_timestamps")))


def take(batch, n: int):
    from marketcast.forecast.base import ContextBatch

    return ContextBatch(batch.values[:n], batch.mask[:n], batch.timestamps[:n], batch.future_timestamps[:n])


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def build(model: str, device: str, dtype: str, mode: str | None):
    from marketcast.forecast.registry import load_forecaster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_forecaster(model, weights="random", device=device, dtype=dtype, compile=mode or "eager", seed=0)


def flops_per_window(fc, batch, horizon: int, samples: int) -> float:
    """FLOPs one window's forecast executes (eager), counted by torch's flop counter."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fc.forecast(take(batch, 1), horizon, samples, seed=0)
    return float(counter.get_total_flops())


DELTA_WINDOWS = 8  # windows whose paths are kept to compare bfloat16 with float32
SAMPLES_KEPT: dict[str, np.ndarray] = {}


def measure_row(model: str, device: torch.device, dtype: str, mode: str | None, batch, horizon: int, samples: int,
                repeats: int) -> dict:
    from marketcast.runtime.counters import counters_delta, counters_snapshot

    with PeakMemory(device) as mem:
        fc = build(model, str(device), dtype, mode)
        t0 = time.perf_counter()
        if hasattr(fc, "warmup"):
            fc.warmup(batch.length, horizon, samples, batch_size=batch.batch_size)
        else:  # an older tree: one call compiles
            fc.forecast(batch, horizon, samples, seed=0)
        sync(device)
        warm_s = time.perf_counter() - t0
        before, times = counters_snapshot(), []
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            out = fc.forecast(batch, horizon, samples, seed=0)
            sync(device)
            times.append(time.perf_counter() - t0)
        delta = counters_delta(before, counters_snapshot())
    p50 = statistics.median(times)
    SAMPLES_KEPT[row_key(model, horizon, dtype, mode)] = out.samples[:DELTA_WINDOWS]
    return {"windows_per_s": batch.batch_size / p50, "p50_s": p50, "runs_s": times, "warmup_s": warm_s,
            "peak_mib": mem.peak_mib,
            "recompiles": delta["recompiles"], "cudagraph_skips": delta["cudagraph_skips"],
            "compiled": bool(out.meta.get("compiled")), "fallback_reason": out.meta.get("fallback_reason"),
            "samples_per_batch_used": out.meta.get("samples_per_batch_used")}


def reference_row(model: str, device: torch.device, batch, horizon: int, samples: int) -> dict:
    """toto-ts or upstream Kronos, float32 eager, same weights, on ``batch`` (a subset of the windows)."""
    fc = build(model, str(device), "float32", None)
    if model == "toto":
        from marketcast.forecast.toto.reference import reference_backbone, reference_forecast

        ref = reference_backbone(fc.model).to(device)
        x, mask = (t.numpy() for t in fc._inputs(batch))
        run = lambda: reference_forecast(ref, x, mask, horizon, samples, samples, seed=0)  # noqa: E731
    else:
        run = _upstream_kronos(fc, device, batch, horizon, samples)
    sync(device)
    t0 = time.perf_counter()
    run()
    sync(device)
    seconds = time.perf_counter() - t0
    return {"windows_per_s": batch.batch_size / seconds, "p50_s": seconds, "windows": batch.batch_size}


def _upstream_kronos(fc, device: torch.device, batch, horizon: int, samples: int):
    from kronos_finance._vendor.kronos_model import Kronos as RefKronos
    from kronos_finance._vendor.kronos_model import KronosTokenizer as RefTokenizer
    from kronos_finance._vendor.kronos_model.kronos import auto_regressive_inference

    from marketcast.forecast.kronos.pipeline import normalise, time_features, with_amount

    model, tok = fc.decoder.model, fc.decoder.tokenizer
    cfg = model.config.to_dict()
    window = cfg.pop("max_context")
    ref_model, ref_tok = RefKronos(**cfg).eval(), RefTokenizer(**tok.config.to_dict()).eval()
    ref_model.load_state_dict(model.state_dict(), strict=True)
    ref_tok.load_state_dict(tok.state_dict(), strict=True)
    ref_model, ref_tok = ref_model.to(device), ref_tok.to(device)
    keep = fc.lookback_for(batch.length, horizon)
    norm = normalise(with_amount(batch.values[:, -keep:]), batch.mask[:, -keep:])[0]
    as_t = lambda a: torch.as_tensor(a, device=device, dtype=torch.float32)  # noqa: E731
    x, xs = as_t(norm), as_t(time_features(batch.timestamps[:, -keep:]))
    ys = as_t(time_features(batch.future_timestamps[:, :horizon]))

    def run():
        torch.manual_seed(0)
        with torch.no_grad():
            auto_regressive_inference(ref_tok, ref_model, x, xs, ys, window, horizon, 5, 1.0, 0, 0.9, samples)
    return run


def before_rows(args, src: str) -> dict:
    """The same rows measured with another source tree, in a subprocess (its own imports)."""
    out = RESULTS / "throughput_before.json"
    cmd = [sys.executable, __file__, *sys.argv[1:], "--child", "--out", str(out)]
    drop = cmd.index("--before-src")
    del cmd[drop:drop + 2]
    env = {**os.environ, "PYTHONPATH": str(Path(src) / "src")}
    subprocess.run(cmd, env=env, check=True)
    return {r["key"]: r for r in json.loads(out.read_text())["rows"]}


def row_key(model, horizon, dtype, mode) -> str:
    return f"{model} h{horizon} {dtype} {mode or 'eager'}"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="toto,kronos")
    p.add_argument("--horizons", default="1,64")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--modes", default="eager,compiled", help="compiled = reduce-overhead on CUDA, default on CPU")
    p.add_argument("--windows", type=int, default=5000, help="windows per symbol")
    p.add_argument("--symbols", type=int, default=8)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ref-windows", type=int, default=2, help="windows the references run (0: none)")
    p.add_argument("--ref-horizons", default=None, help="horizons the references run (default: all)")
    p.add_argument("--before-src", default=None, help="a source tree to measure the same rows with")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--peak-tflops", type=float, default=None)
    p.add_argument("--out", default=str(RESULTS / "throughput_bench.json"))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> None:
    args = parse()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    device = torch.device(args.device)
    compiled_mode = "reduce-overhead" if device.type == "cuda" else "default"
    modes = [None if m == "eager" else compiled_mode for m in args.modes.split(",")]
    horizons = [int(h) for h in args.horizons.split(",")]
    ref_horizons = horizons if args.ref_horizons is None else [int(h) for h in args.ref_horizons.split(",")]
    rows, refs, flops = [], {}, {}
    for model in args.models.split(","):
        for horizon in horizons:
            batch = windows_batch(args.symbols, args.windows, args.context, horizon)
            if not args.child:
                fc = build(model, str(device), "float32", None)
                flops[model, horizon] = flops_per_window(fc, batch, horizon, args.samples)
                del fc
            for dtype in args.dtypes.split(","):
                for mode in modes:
                    row = measure_row(model, device, dtype, mode, batch, horizon, args.samples, args.repeats)
                    row.update(key=row_key(model, horizon, dtype, mode), model=model, horizon=horizon, dtype=dtype,
                               mode=mode or "eager", windows=batch.batch_size)
                    rows.append(row)
                    print(json.dumps({k: row[k] for k in ("key", "windows_per_s", "warmup_s", "recompiles")}),
                          flush=True)
                    write_report(args, device, rows, refs, flops, {})  # a run cut short keeps its rows
            if args.ref_windows and horizon in ref_horizons and not args.child:
                refs[model, horizon] = reference_row(model, device, take(batch, args.ref_windows), horizon,
                                                     args.samples)
                print(json.dumps({"reference": f"{model} h{horizon}", **refs[model, horizon]}), flush=True)
    before = before_rows(args, args.before_src) if args.before_src and not args.child else {}
    report = write_report(args, device, rows, refs, flops, before)
    if "table" in report:
        print(report["table"])
    print(f"wrote {args.out}")


def write_report(args, device, rows, refs, flops, before) -> dict:
    """The JSON report of the rows so far (with the table unless this is a ``--before-src`` child)."""
    report = {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
              "samples": args.samples, "context": args.context, "symbols": args.symbols,
              "windows_per_symbol": args.windows, "rows": rows}
    if not args.child:
        report["table"] = table(rows, refs, flops, before, device, args)
        report.update(references={f"{m} h{h}": r for (m, h), r in refs.items()},
                      flops_per_window={f"{m} h{h}": f for (m, h), f in flops.items()},
                      before={k: v["windows_per_s"] for k, v in before.items()},
                      bf16_vs_fp32={f"{m} h{h}": d for (m, h), d in bf16_deltas(rows).items()})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    return report


def table(rows, refs, flops, before, device, args) -> str:
    peaks = {d: peak_flops(device, d, args.peak_tflops) for d in {r["dtype"] for r in rows}}
    lines = [f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, {args.symbols} symbols x "
             f"{args.windows} windows, {args.samples} samples, context {args.context}",
             *(f"peak {d}: {desc}" for d, (_, desc) in sorted(peaks.items())),
             f"{'row':34} {'windows/s':>10} {'MFU %':>7} {'peak MiB':>9} {'warm s':>7} {'recomp':>6} {'cg skip':>7} "
             f"{'x before':>9} {'x ref':>9}"]
    for r in rows:
        fl = flops.get((r["model"], r["horizon"]))
        mfu = 100 * r["windows_per_s"] * fl / peaks[r["dtype"]][0] if fl else float("nan")
        ref = refs.get((r["model"], r["horizon"]))
        prev = before.get(r["key"])
        lines.append(f"{r['key']:34} {r['windows_per_s']:10.2f} {mfu:7.2f} {r['peak_mib']:9.0f} {r['warmup_s']:7.1f} "
                     f"{r['recompiles']:6d} {r['cudagraph_skips']:7d} "
                     f"{r['windows_per_s'] / prev['windows_per_s'] if prev else float('nan'):9.1f} "
                     f"{r['windows_per_s'] / ref['windows_per_s'] if ref else float('nan'):9.1f}")
    for (m, h), ref in refs.items():
        name = "toto-ts" if m == "toto" else "upstream Kronos"
        lines.append(f"reference {name} h{h}: {ref['windows_per_s']:.3f} windows/s on {ref['windows']} windows")
    for (m, h), f in flops.items():
        lines.append(f"FLOPs per window {m} h{h}: {f / 1e9:.2f} GFLOP")
    for (m, h), d in bf16_deltas(rows).items():
        lines.append(f"{m} h{h} bf16 vs fp32 (eager, same seed, first {DELTA_WINDOWS} windows), relative diff of the "
                     f"per-step close quantiles: median {d['median']:.4f}, P10 {d['p10']:.4f}, P90 {d['p90']:.4f}")
    return "\n".join(lines)


def bf16_deltas(rows) -> dict:
    out = {}
    for r in rows:
        fp32, bf16 = (SAMPLES_KEPT.get(row_key(r["model"], r["horizon"], d, None)) for d in ("float32", "bfloat16"))
        if fp32 is not None and bf16 is not None:
            out[r["model"], r["horizon"]] = rel_delta(bf16, fp32)
    return out


if __name__ == "__main__":
    main()
