"""Benchmark: fine-tuning throughput of Toto base (151 M parameters), Kronos-small and Toto 2.0 22M (random init),
examples/s.

Times the training step of ``marketcast finetune`` (Toto: :class:`marketcast.finetune.toto.TotoObjective`, the
Student-T mixture NLL of every next patch; Kronos: :class:`marketcast.finetune.kronos.KronosObjective`, the token
cross-entropy with the frozen tokenizer; Toto 2.0: :class:`marketcast.finetune.toto2.Toto2Objective`, the pinball
loss of its 9 quantile knots on every next patch, unfolded u-μP weights; then backward, gradient clipping, AdamW)
on windows of a seeded synthetic random walk, for full fine-tuning and for LoRA on the attention projections,
after ``--warmup`` untimed steps. An example is one window of ``--context`` bars (rounded up to whole patches)
plus one patch (Toto, Toto 2.0: close/high/low) or plus one bar (Kronos: OHLCV + amount). Peak memory is the
process's extra RSS on the CPU (polled) or ``max_memory_allocated`` on CUDA, over the timed steps and the
optimizer's first allocation. Checkpoint writes are not timed (they scale with the disk, not the model).

    PYTHONPATH=src python benchmarks/finetune_bench.py [--models toto,kronos,toto2 --device cpu --dtype float32
        --batch-size 4 --context 128 --steps 3 --modes full,lora --lora 8 --out benchmarks/results/finetune_bench.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import PeakMemory, RESULTS, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402


def _windows(batch: int, length: int, seed: int = 0):
    import torch

    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, (batch, length)), axis=-1))
    x = np.stack([close, close * 1.005, close * 0.995], axis=1)
    return torch.as_tensor(x, dtype=torch.float32)


def _build(name: str, args, device):
    """(model, objective, LoRA targets, window length, batch maker) for ``name`` at the benchmark's size."""
    import torch

    autocast = torch.bfloat16 if args.dtype == "bfloat16" else None
    if name == "toto":
        from marketcast.finetune.toto import LORA_TARGETS, TotoObjective
        from marketcast.forecast.toto.config import TotoConfig
        from marketcast.forecast.toto.model import random_model

        config = TotoConfig.base() if args.size == "full" else TotoConfig.tiny(patch_size=8, stride=8)
        model = random_model(config, 0)
        length = -(-args.context // config.patch_size) * config.patch_size + config.patch_size
        objective = TotoObjective(model, args.context, 1, autocast, device)
        return model, objective, LORA_TARGETS, length, lambda i: _windows(args.batch_size, length, seed=i)
    if name == "toto2":
        from marketcast.finetune.toto2 import LORA_TARGETS, Toto2Objective
        from marketcast.forecast.toto2.config import Toto2Config
        from marketcast.forecast.toto2.model import random_model as toto2_model

        if args.size == "full":
            config = Toto2Config.size("22m")
        else:  # tests/finetune/conftest.py's tiny Toto 2.0
            raw = {**Toto2Config.size("4m").to_dict(), "d_ff": None, "qk_dim": None, "v_dim": None,
                   "num_groups": None, "heads_per_group": None}
            config = Toto2Config.from_dict({**raw, "patch_size": 8, "d_model": 64, "num_layers": 2,
                                            "layer_group_size": 2})
        model = toto2_model(config, 0)  # unfolded, as finetune trains it
        length = -(-args.context // config.patch_size) * config.patch_size + config.patch_size
        objective = Toto2Objective(model, args.context, 1, autocast, device)
        return model, objective, LORA_TARGETS, length, lambda i: _windows(args.batch_size, length, seed=i)
    from marketcast.finetune.kronos import LORA_TARGETS, KronosObjective
    from marketcast.forecast.kronos import Kronos, KronosConfig, KronosTokenizer, TokenizerConfig, from_config
    from marketcast.forecast.kronos.config import MODELS, TOKENIZERS

    if args.size == "full":
        cfg, tok_cfg = MODELS["Kronos-small"], TOKENIZERS["Kronos-Tokenizer-base"]
    else:
        cfg = KronosConfig(s1_bits=4, s2_bits=4, n_layers=2, d_model=32, n_heads=4, ff_dim=64)
        tok_cfg = TokenizerConfig(d_model=32, n_heads=4, ff_dim=64, n_enc_layers=2, n_dec_layers=2, s1_bits=4,
                                  s2_bits=4)
    model = from_config(Kronos, cfg, 0)
    tokenizer = from_config(KronosTokenizer, tok_cfg, 0).to(device)
    length = args.context + 1
    objective = KronosObjective(model, tokenizer, args.context, 1, autocast, device)

    def batch(i: int):
        close = _windows(args.batch_size, length, seed=i)
        values = torch.cat([close[:, :1], close, torch.full_like(close[:, :1], 1e4)], dim=1)  # o, c, h, l, v
        amount = values[:, 4:5] * values[:, :4].mean(1, keepdim=True)
        stamps = torch.zeros(args.batch_size, length, 5, dtype=torch.long)
        stamps[..., 2] = torch.arange(length) % 5  # weekdays
        return torch.cat([values, amount], dim=1), stamps

    return model, objective, LORA_TARGETS, length, batch


def run_mode(name: str, mode: str, args) -> dict:
    import torch

    from marketcast.finetune.loop import BETAS, GRAD_CLIP, WEIGHT_DECAY, _to, trainable
    from marketcast.finetune.toto import add_lora

    device = torch.device(args.device)
    model, objective, targets, length, make = _build(name, args, device)
    model.to(device).float().train()
    for p in model.parameters():
        p.requires_grad_(True)
    if mode == "lora":
        add_lora(model, args.lora, 0, targets)
    params = trainable(model)
    batches = [_to(make(i), device) for i in range(args.warmup + args.steps)]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with PeakMemory(device) as mem:
        optimizer = torch.optim.AdamW(params.values(), lr=1e-5, betas=BETAS, weight_decay=WEIGHT_DECAY,
                                      foreach=device.type == "cuda")

        def step(windows) -> float:
            loss = objective.loss(windows)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params.values(), GRAD_CLIP)
            optimizer.step()
            return float(loss.detach())

        for w in batches[:args.warmup]:
            step(w)
        sync()
        t0 = time.perf_counter()
        losses = [step(w) for w in batches[args.warmup:]]
        sync()
        seconds = time.perf_counter() - t0
    return {"model": name, "mode": mode if mode == "full" else f"lora r{args.lora}",
            "parameters": sum(p.numel() for p in model.parameters()),
            "trainable": sum(t.numel() for t in params.values()), "steps": args.steps,
            "batch_size": args.batch_size, "context": args.context, "window": length,
            "s_per_step": seconds / args.steps, "examples_per_s": args.batch_size * args.steps / seconds,
            "peak_extra_mib": mem.extra_mib, "peak_mib": mem.peak_mib, "last_loss": losses[-1]}


def _in_subprocess(name: str, mode: str) -> dict:
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        argv = [a for a in sys.argv[1:]]
        for flag, value in (("--models", name), ("--modes", mode), ("--out", str(out))):
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        subprocess.run([sys.executable, __file__, *argv], check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())["results"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="toto,kronos,toto2")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--modes", default="full,lora")
    parser.add_argument("--lora", type=int, default=8)
    parser.add_argument("--size", default="full", choices=("full", "tiny"),
                        help="full: Toto base, Kronos-small and Toto 2.0 22M; tiny: the tests' configs (a smoke "
                             "run)")
    parser.add_argument("--out", default=str(RESULTS / "finetune_bench.json"))
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    pairs = [(n.strip(), m.strip()) for n in args.models.split(",") if n.strip() for m in args.modes.split(",")
             if m.strip()]
    if len(pairs) == 1:
        rows = [run_mode(*pairs[0], args)]
    else:  # one process per row: a process's RSS does not shrink, so a row after a bigger one would read 0
        rows = [_in_subprocess(name, mode) for name, mode in pairs]
    device = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else (
        f"cpu ({torch.get_num_threads()} threads)")
    console = Console()
    table = Table(title=f"Fine-tuning ({args.size} size) on {device}, {args.dtype}, batch {args.batch_size}, "
                        f"context {args.context}")
    for col in ("model", "mode", "parameters", "trainable", "s/step", "examples/s", "peak extra MiB"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["model"], r["mode"], f"{r['parameters'] / 1e6:.1f} M", f"{r['trainable'] / 1e6:.2f} M",
                      f"{r['s_per_step']:.3f}", f"{r['examples_per_s']:.2f}",
                      f"{r['peak_extra_mib']:,.0f}")
    console.print(table)
    load = [round(x, 2) for x in os.getloadavg()]  # 1/5/15-minute load: other work on the CPUs skews the rows
    console.print(f"load average {load[0]} {load[1]} {load[2]} on {os.cpu_count()} CPUs", highlight=False)
    write_report(args.out, {"benchmark": "finetune", "size": args.size, "device": device,
                            "dtype": args.dtype, "torch": torch.__version__, "load_average": load, "results": rows},
                 console)


if __name__ == "__main__":
    main()
