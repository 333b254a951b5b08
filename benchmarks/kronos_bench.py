"""Benchmark: Kronos-small (random weights) decode, upstream full recompute vs our KV cache, eager and compiled.

One run, same bars, same weights (ours loaded into the vendored upstream with strict=True): lookback 400,
pred_len 16, sample_count 8, top_p 0.9. Each variant's total includes tokenizing the context and decoding
the tokens back to bars; per-step latency is total / pred_len. Compiled = ``torch.compile`` of the step
functions (``default`` on CPU, ``reduce-overhead`` on CUDA), warmed up once, sealed, then timed; on CUDA
20 further compiled runs must all succeed without fallback or recompile. Peak memory: CUDA
``max_memory_allocated`` per variant; CPU the process's resident memory polled during the variant, above
where it started (``common.PeakMemory``; a rough indication on the CPU).

    PYTHONPATH=src python benchmarks/kronos_bench.py [--device cpu] [--repeats 3] [--threads N] [--out FILE] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import PeakMemory  # noqa: E402  benchmarks/ (the script's folder) is on sys.path
from marketcast.runtime.counters import recompile_count  # noqa: E402
from marketcast.forecast.kronos import MODELS, TOKENIZERS, Kronos, KronosForecaster, KronosTokenizer  # noqa: E402
from marketcast.forecast.kronos.loading import from_config  # noqa: E402
from marketcast.forecast.kronos.pipeline import normalise, time_features, with_amount  # noqa: E402
from marketcast.forecast.kronos.sampling import SamplingParams  # noqa: E402


KEYS = np.zeros(1, dtype=np.uint64)  # the one window's identity (its random stream)


def bars(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    ohlcv = np.stack([close * 0.999, close * 1.01, close * 0.99, close, rng.uniform(1e5, 1e6, n)], -1)
    stamps = np.datetime64("2020-01-06") + np.arange(n) * np.timedelta64(1, "h")
    return with_amount(ohlcv), stamps


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, repeats: int, device: str) -> list[float]:
    out = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="out/kronos_bench.json")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 avoids thrashing on a busy box)")
    ap.add_argument("--quick", action="store_true", help="lookback 64, pred_len 4, 2 samples, 1 repeat (smoke run)")
    args = ap.parse_args()
    lookback, pred_len, samples, repeats = (64, 4, 2, 1) if args.quick else (400, 16, 8, args.repeats)
    dev = args.device
    cuda = dev.startswith("cuda")
    torch.set_grad_enabled(False)
    if args.threads:
        torch.set_num_threads(args.threads)

    model = from_config(Kronos, MODELS["Kronos-small"], seed=0).to(dev)
    tok = from_config(KronosTokenizer, TOKENIZERS["Kronos-Tokenizer-base"], seed=0).to(dev)
    from kronos_finance._vendor.kronos_model import Kronos as RefKronos
    from kronos_finance._vendor.kronos_model import KronosTokenizer as RefTokenizer
    from kronos_finance._vendor.kronos_model.kronos import auto_regressive_inference

    cfg = model.config.to_dict()
    cfg.pop("max_context")
    ref_model = RefKronos(**cfg).eval()
    ref_model.load_state_dict(model.state_dict(), strict=True)
    ref_tok = RefTokenizer(**tok.config.to_dict()).eval()
    ref_tok.load_state_dict(tok.state_dict(), strict=True)
    ref_model, ref_tok = ref_model.to(dev), ref_tok.to(dev)

    x, stamps = bars(lookback + pred_len)
    x, stamps = x[None, :lookback], stamps[None]
    valid = np.ones(x.shape[:2], bool)
    x_time, y_time = time_features(stamps[:, :lookback]), time_features(stamps[:, lookback:])
    params = SamplingParams(1.0, 0, 0.9)
    results: dict[str, dict] = {}

    norm = torch.as_tensor(normalise(x, valid)[0], device=dev)
    xs, ys = (torch.as_tensor(a, device=dev, dtype=torch.float32) for a in (x_time, y_time))

    def upstream(h: int = pred_len):
        torch.manual_seed(0)
        auto_regressive_inference(ref_tok, ref_model, norm, xs, ys[:, :h], 512, h, 5, 1.0, 0, 0.9, samples)

    def variant(name: str, fn, warmup: bool, extra: dict | None = None):
        """``fn(h)`` decodes ``h`` steps; a 1-step run isolates the per-step cost from the fixed cost."""
        with PeakMemory(dev) as mem:
            warm_s = timed(fn, 1, dev)[0] if warmup else None
            before = recompile_count()
            times = timed(fn, repeats, dev)
            one_step = statistics.median(timed(lambda: fn(1), repeats, dev))
            recompiles = recompile_count() - before
        total = statistics.median(times)
        results[name] = {"total_s": total, "per_step_ms": 1000 * total / pred_len, "runs_s": times,
                         "one_step_run_s": one_step,
                         "marginal_step_ms": 1000 * (total - one_step) / max(pred_len - 1, 1),
                         "warmup_s": warm_s, "peak_mem_mb": mem.extra_mib, "recompiles_after_warmup": recompiles,
                         **(extra or {})}
        print(f"{name}: {total:.2f} s total, {1000 * total / pred_len:.0f} ms/step", flush=True)

    variant("upstream_full_recompute", upstream, warmup=False)
    eager = KronosForecaster(model, tok, mode=None)
    run_eager = lambda h=pred_len: eager.pipeline.sample_paths(  # noqa: E731
        x, valid, x_time, y_time[:, :h], samples, params, 0, KEYS)
    variant("kv_cache_eager", run_eager, warmup=True)

    mode = "reduce-overhead" if cuda else "default"
    compiled = KronosForecaster(model, tok, mode=mode)
    run_compiled = lambda h=pred_len: compiled.pipeline.sample_paths(  # noqa: E731
        x, valid, x_time, y_time[:, :h], samples, params, 0, KEYS)
    with PeakMemory(dev):
        warm_s = timed(run_compiled, 1, dev)[0]
    for g in compiled.compile_guards():
        g.seal()
    variant("kv_cache_compiled", run_compiled, warmup=False, extra={"compile_warmup_s": warm_s, "mode": mode})
    guards = compiled.compile_guards()
    if cuda:
        before, ok = recompile_count(), 0
        for _ in range(20):
            run_compiled()
            ok += all(g.active for g in guards)
        results["kv_cache_compiled"]["cuda_runs_ok_of_20"] = ok
        results["kv_cache_compiled"]["recompiles_in_20_runs"] = recompile_count() - before
    results["kv_cache_compiled"]["fallback_reason"] = next(
        (g.stats.fallback_reason for g in guards if g.stats.fallback_reason), None)
    same = np.allclose(run_eager()[0], run_compiled()[0], rtol=1e-4)

    base = results["upstream_full_recompute"]["total_s"]
    for r in results.values():
        r["speedup_vs_upstream"] = base / r["total_s"]
    report = {"device": dev, "torch": torch.__version__, "platform": platform.platform(),
              "cpu_threads": torch.get_num_threads(), "model": "Kronos-small (random) + Kronos-Tokenizer-base",
              "lookback": lookback, "pred_len": pred_len, "sample_count": samples, "repeats": repeats,
              "eager_equals_compiled_same_seed": bool(same), "variants": results}
    print(f"\n{'variant':<26}{'total s':>9}{'ms/step':>9}{'marg. ms':>9}{'peak MB':>9}{'recompiles':>11}"
          f"{'speed-up':>10}")
    for name, r in results.items():
        print(f"{name:<26}{r['total_s']:>9.3f}{r['per_step_ms']:>9.2f}{r['marginal_step_ms']:>9.2f}"
              f"{r['peak_mem_mb']:>9.0f}{r['recompiles_after_warmup']:>11d}{r['speedup_vs_upstream']:>9.1f}x")
    print("ms/step = total / pred_len; marg. ms = (total - 1-step run) / (pred_len - 1), the cost of one more step")
    print(f"compile warm-up {results['kv_cache_compiled']['compile_warmup_s']:.1f} s; eager == compiled (same seed): "
          f"{same}")
    if cuda:
        c = results["kv_cache_compiled"]
        print(f"CUDA graphs: {c['cuda_runs_ok_of_20']}/20 further compiled runs without fallback, "
              f"{c['recompiles_in_20_runs']} recompiles")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
