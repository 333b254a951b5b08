"""Process start-up: how long a fresh process takes to import, load data, build the model and make its first
(compiled) forecast, cold and then warm from the persistent compile cache.

Random weights (seed 0) are first written as a checkpoint folder in the public layout, so "build" is the
real loading path (meta-device build, safetensors straight to the device). Then, in fresh processes that
share one new ``MARKETCAST_COMPILE_CACHE_DIR`` (inductor's caches live under it):

1. the phase probe, cold: import torch, import ``marketcast.commands``, load SP500 and cut the window, build the
   forecaster, first forecast (compile included), a second forecast (steady state);
2. the same probe again: the second process, warm;
3. the whole command ``python -m marketcast.commands forecast SP500 --model M --weights DIR --json`` as a user runs
   it, timed from outside (interpreter start included), with compiling forced on (``TOTO_COMPILE=1`` /
   ``KRONOS_COMPILE=1``; a CUDA box compiles by default): after the probes (does the command find the graphs the
   probes wrote: one cache key for both?), then cold on an empty cache and warm on that one's cache, each with
   what the command itself reports (its first forecast's seconds, graphs from the cache, graphs compiled); and,
   for comparison, eager.

    PYTHONPATH=src python benchmarks/process_start_bench.py --device cuda --model toto
    PYTHONPATH=src python benchmarks/process_start_bench.py --device cpu --model toto --samples 64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()  # after the standard library, before torch: the probe's "import torch" starts here

RESULTS = Path(__file__).resolve().parent / "results"  # as common.RESULTS, without importing numpy here
SRC = str(Path(__file__).resolve().parents[1] / "src")


def probe(args: argparse.Namespace) -> dict:
    """The phases of one process, timed inside it (run as ``--probe``; the interpreter's own start is not in
    it, the whole-command timing below has it)."""
    t0 = STARTED
    import torch

    t_torch = time.perf_counter()
    import marketcast.commands  # noqa: F401  what `marketcast ...` imports before doing anything
    from marketcast.data import load_symbol
    from marketcast.forecast import load_forecaster, make_batch

    t_cli = time.perf_counter()
    bars = load_symbol("SP500")
    batch = make_batch(bars.frame, [len(bars) - 1], args.context, args.horizon)
    t_data = time.perf_counter()
    fc = load_forecaster(args.model, weights=args.weights, device=args.device, dtype=args.dtype,
                         compile=args.mode, seed=0)
    t_build = time.perf_counter()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    out = fc.forecast(batch, args.horizon, args.samples, seed=0)
    sync()
    t_first = time.perf_counter()
    fc.forecast(batch, args.horizon, args.samples, seed=0)
    sync()
    t_second = time.perf_counter()
    guards = fc.compile_guards() if hasattr(fc, "compile_guards") else []
    return {"import_torch_s": t_torch - t0, "import_cli_s": t_cli - t_torch, "data_s": t_data - t_cli,
            "build_s": t_build - t_data, "first_forecast_s": t_first - t_build, "second_forecast_s": t_second - t_first,
            "compiled": bool(out.meta.get("compiled")),
            "graphs_from_cache": [g.stats.extra.get("cache_loaded") for g in guards]}


def write_weights(model: str, folder: Path) -> Path:
    """Random weights (seed 0) in the public checkpoint layout."""
    import warnings

    from marketcast.forecast.registry import load_forecaster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = load_forecaster(model, weights="random", compile="eager", seed=0)
    if model == "toto":
        from marketcast.forecast.toto.loading import save_checkpoint

        return save_checkpoint(fc.model, fc.config, folder)
    from marketcast.forecast.kronos.loading import save_pretrained

    save_pretrained(fc.decoder.model, folder / "model")
    save_pretrained(fc.decoder.tokenizer, folder / "tokenizer")
    return folder


def run(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return seconds, proc.stdout


def command(cli: list[str], env: dict) -> dict:
    """One whole `marketcast forecast --json` process: its wall time and the compile note it reported."""
    seconds, stdout = run(cli, env)
    return {"process_s": seconds, "compile": json.loads(stdout).get("compile")}


def _cell(value, spec: str) -> str:
    width = int(spec.rstrip("df").split(".")[0])
    return f"{'-':>{width}}" if value is None else f"{value:{spec}}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="toto", choices=("toto", "kronos"))
    p.add_argument("--dtype", default="float32")
    p.add_argument("--horizon", type=int, default=8)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--mode", default=None, help="compile mode (default: reduce-overhead on CUDA, default on CPU)")
    p.add_argument("--out", default=str(RESULTS / "process_start_bench.json"))
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--weights", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.probe:
        print(json.dumps(probe(args)))
        return
    mode = args.mode or ("reduce-overhead" if args.device.startswith("cuda") else "default")
    with tempfile.TemporaryDirectory(prefix="marketcast-start-") as tmp:
        weights = write_weights(args.model, Path(tmp) / "weights")
        env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])),
                   MARKETCAST_COMPILE_CACHE_DIR=str(Path(tmp) / "cache"))
        common = ["--device", args.device, "--model", args.model, "--dtype", args.dtype, "--horizon", str(args.horizon),
                  "--samples", str(args.samples), "--context", str(args.context), "--weights", str(weights)]
        phases = {}
        for run_name in ("cold", "warm"):
            _, stdout = run([sys.executable, __file__, "--probe", "--mode", mode, *common], env)
            phases[run_name] = json.loads(stdout.strip().splitlines()[-1])
        cli = [sys.executable, "-m", "marketcast.commands", "forecast", "SP500", "--model", args.model, "--weights",
               str(weights), "--device", args.device, "--dtype", args.dtype, "--horizon", str(args.horizon),
               "--samples", str(args.samples), "--context", str(args.context), "--json"]
        switch = "TOTO_COMPILE" if args.model == "toto" else "KRONOS_COMPILE"
        own = {**env, switch: "1", "MARKETCAST_COMPILE_CACHE_DIR": str(Path(tmp) / "cache-command")}
        whole = {"after the probes (their cache)": command(cli, {**env, switch: "1"}),
                 "cold (an empty cache)": command(cli, own),
                 "warm (the cold one's cache)": command(cli, own),
                 "eager": command(cli, {**env, switch: "0"})}
    names = ["import_torch_s", "import_cli_s", "data_s", "build_s", "first_forecast_s", "second_forecast_s"]
    lines = [f"{args.model} {args.dtype} on {args.device}, compile mode {mode}, h {args.horizon}, "
             f"{args.samples} samples, context {args.context}",
             f"{'phase (the probe)':22} {'cold s':>8} {'warm s':>8}"]
    lines += [f"{n.removesuffix('_s'):22} {phases['cold'][n]:8.2f} {phases['warm'][n]:8.2f}" for n in names]
    lines.append(f"{'graphs from cache':22} {str(phases['cold']['graphs_from_cache']):>8} "
                 f"{str(phases['warm']['graphs_from_cache']):>8}")
    lines.append(f"{'whole `marketcast forecast` process':38} {'process s':>9} {'first fc s':>10} {'from cache':>10} "
                 f"{'compiled':>8}")
    for name, row in whole.items():
        note = row.get("compile") or {}
        lines.append(f"{name:38} {row['process_s']:9.2f} {_cell(note.get('first_forecast_s'), '10.2f')} "
                     f"{_cell(note.get('graphs_from_cache'), '10d')} {_cell(note.get('graphs_compiled'), '8d')}")
    cold, warm = (whole[k].get("compile") or {} for k in ("cold (an empty cache)", "warm (the cold one's cache)"))
    if cold and warm:
        lines.append(f"second process's first forecast: {cold['first_forecast_s'] / warm['first_forecast_s']:.1f}x "
                     "faster than the first's (target >= 3x)")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"phases": phases, "whole_process_s": whole, "mode": mode, "table": text,
                               **{k: v for k, v in vars(args).items() if k not in ("probe", "weights")}}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
