"""``marketcast finetune``: tune a model on the user's own bars up to ``--until``, leak-proof by construction.

The output folder is a standard checkpoint in the layout the model's loader reads, so ``--weights DIR`` works in
every command (Toto 1.0 and 2.0: ``config.json`` + ``model.safetensors``, Toto 2.0's u-μP scales unfolded as in
the public checkpoints; Kronos: ``model/`` tuned and ``tokenizer/`` copied, each with both files; LoRA adapters
are merged into the weights on save), plus ``tuning.json``
(:mod:`marketcast.forecast.tuning`): the cutoff and the fingerprint of every tuned symbol's bars, which every
command that loads the weights checks before scoring a window. While training, the folder holds
``checkpoint.pt``; ``--resume`` continues from it after a crash or a SIGKILL, to the same final weights.
"""

from __future__ import annotations

import glob
import os
from importlib import import_module
from pathlib import Path
from typing import Annotated, Optional

import typer

from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.console import console, err_console
from marketcast.errors import ConfigError

MODELS = ("toto", "kronos", "toto2")


def _symbols(values: Optional[list[str]], data_dir: Optional[Path]) -> list[str]:
    """``--symbols`` as given; without it every file of ``--data-dir``, else the embedded symbols."""
    from marketcast.data import DEFAULT_SYMBOLS
    from marketcast.data.load import symbol_files

    names = [s.strip().upper() for v in values or [] for s in v.split(",") if s.strip()]
    names = names or (sorted(symbol_files(data_dir)) if data_dir is not None else list(DEFAULT_SYMBOLS))
    if len(set(names)) != len(names):
        raise ConfigError(f"--symbols repeat: {', '.join(names)}")
    return names


def _check_out(out: Path, resume: bool) -> None:
    from marketcast.finetune.loop import CHECKPOINT
    from marketcast.forecast.tuning import FILE_NAME

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; choose a folder for the tuned weights")
    busy = out.is_dir() and any(out.iterdir())
    if busy and not resume:
        raise ConfigError(f"--out {out} already exists and is not empty; pass --resume to continue its training, or "
                          "choose a new folder")
    if resume and busy and not (out / CHECKPOINT).is_file():
        finished = (out / FILE_NAME).is_file()
        raise ConfigError(f"--resume: {out} has no {CHECKPOINT} to continue from"
                          + ("; its tuning already finished" if finished else "") + "; choose a new --out")


def finetune(
    model: Annotated[str, typer.Option("--model", "-m", metavar=choice_list(MODELS),
                                       help="Model to tune: toto (Toto 1.0), kronos (its tokenizer stays "
                                            "frozen) or toto2 (Toto 2.0).")] = "toto",
    weights: options.Weights = None,
    symbols: Annotated[Optional[list[str]], typer.Option(
        "--symbols", help="Symbols to tune on, comma-separated or repeated, e.g. SP500,NASDAQ (default: the "
                          "embedded SP500 and NASDAQ; with --data-dir, its <SYMBOL>.csv files).")] = None,
    data_dir: options.DataDir = None,
    until: Annotated[str, typer.Option(
        "--until", metavar="DATE", help="The last day any training bar may fall on, targets included, e.g. "
                                        "2016-12-30; later bars stay out of sample.")] = ...,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")] = 1000,
    lr: Annotated[float, typer.Option("--lr", min=0.0,
                                      help="Peak learning rate (AdamW, warmup then cosine decay).")] = 1e-4,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Windows per step.")] = 16,
    context: options.Context = 512,
    horizon: options.Horizon = 1,
    lora: Annotated[Optional[int], typer.Option(
        "--lora", metavar="RANK", help="Train rank-RANK LoRA adapters on the attention projections (merged into "
                                       "the weights on save), e.g. 8 (default: full fine-tuning).")] = None,
    device: options.Device = "cpu",
    dtype: options.Dtype = "float32",
    seed: Annotated[int, typer.Option("--seed", min=0, max=options.MAX_SEED,
                                      help="Seed of the batch order and the adapters' init: the same seed, data "
                                           "and settings give the same weights.")] = 0,
    eval_every: Annotated[int, typer.Option("--eval-every", min=1, help="Steps between validation losses.")] = 50,
    patience: Annotated[int, typer.Option(
        "--patience", min=0, help="Stop after this many validations without a better loss (0: never stop "
                                  "early).")] = 5,
    checkpoint_every: Annotated[int, typer.Option(
        "--checkpoint-every", min=1, help="Steps between checkpoints (--resume continues from the last).")] = 50,
    out: Annotated[Path, typer.Option("--out", help="Folder for the tuned weights and tuning.json, e.g. "
                                                    "out/toto-tuned; must be new unless --resume.")] = ...,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the training whose checkpoint is in "
                                                          "--out.")] = False,
    evaluate: Annotated[bool, typer.Option(
        "--evaluate", help="After training, backtest base and tuned on the same windows after --until and print "
                           "the deltas with a paired test on per-window CRPS (default: off).")] = False,
    samples: Annotated[int, typer.Option("--samples", "-s", min=1, help="--evaluate: forecast sample paths per "
                                                                         "window, e.g. 64.")] = 256,
    as_json: options.AsJson = False,
) -> None:
    """Fine-tune a forecaster on your bars up to --until; writes weights plus tuning.json (leak-proof)."""
    if model not in MODELS:
        raise ConfigError(f"--model {model!r} is unknown; choose one of {', '.join(MODELS)}")
    if lora is not None and lora <= 0:
        raise ConfigError(f"--lora {lora}: a LoRA rank is a positive integer, e.g. --lora 8 (leave it out for full "
                          "fine-tuning)")
    from marketcast.finetune.data import parse_until

    cutoff = parse_until(until)
    out = Path(os.path.abspath(out.expanduser()))
    _check_out(out, resume)
    names = _symbols(symbols, data_dir)

    import torch

    from marketcast.data import load_symbol
    from marketcast.fileio import exclusive, make_folder, write_files
    from marketcast.finetune.data import make_windows
    from marketcast.finetune.loop import CHECKPOINT, Hyper, load_checkpoint, train
    from marketcast.forecast.tuning import FILE_NAME, record_text

    dev = torch.device(device)
    if (dev.type == "cuda" and not torch.cuda.is_available()) or (dev.type == "mps"
                                                                  and not torch.backends.mps.is_available()):
        raise ConfigError(f"--device {device}: {dev.type.upper()} is not available here; use --device cpu")
    hyper = Hyper(steps=steps, lr=lr, batch_size=batch_size, context=context, horizon=horizon, lora=lora,
                  dtype=dtype, seed=seed, eval_every=eval_every, patience=patience, checkpoint_every=checkpoint_every,
                  model=model, weights=weights or "auto")
    bars = [load_symbol(n, data_dir=data_dir) for n in names]
    autocast = torch.bfloat16 if dtype == "bfloat16" else None
    if model in ("toto", "toto2"):  # the same steps; each module brings its model, loss, LoRA targets and files
        patched = import_module(f"marketcast.finetune.{model}")
        base, source = patched.load_base(weights, dev, seed)
        windows = make_windows(bars, cutoff, context, horizon, base.config.patch_size)
        targets = patched.LORA_TARGETS
        objective = patched.OBJECTIVE(base, context, horizon, autocast, dev)
        files = lambda: patched.checkpoint_files(base)  # noqa: E731
    else:
        from marketcast.finetune import kronos

        base, tokenizer, source = kronos.load_base(weights, dev, seed)
        if context + horizon > base.config.max_context + 1:
            raise ConfigError(f"--context {context} + --horizon {horizon} exceed Kronos's window of "
                              f"{base.config.max_context} tokens; use a --context of at most "
                              f"{base.config.max_context + 1 - horizon}")
        windows = make_windows(bars, cutoff, context, horizon, 1, kronos.kronos_features, kronos.kronos_stamps)
        targets = kronos.LORA_TARGETS
        objective = kronos.KronosObjective(base, tokenizer, context, horizon, autocast, dev)
        files = lambda: kronos.checkpoint_files(base, tokenizer)  # noqa: E731
    if lora is not None:
        from marketcast.finetune.toto import add_lora

        add_lora(base, lora, seed, targets)
    make_folder(out.parent, ConfigError)
    with exclusive(out.parent / f".{out.name}.lock", str(out)):
        make_folder(out, ConfigError)
        for leftover in glob.glob(os.path.join(glob.escape(str(out)), f".{CHECKPOINT}.*.tmp")):
            os.unlink(leftover)  # of a writer killed by SIGKILL mid-checkpoint; the checkpoint itself is whole
        checkpoint = load_checkpoint(out) if resume else None
        outcome = train(objective, windows, hyper, dev, out, checkpoint)
        record = {
            "model": model, "base": weights or "auto", "base_source": source, "until": cutoff.isoformat(),
            "symbols": windows.symbols, "hyper": hyper.to_dict(),
            "adapter": f"lora rank {lora} on {', '.join(targets)}, merged into the weights" if lora else "full",
            "steps": outcome.steps, "stopped": outcome.stopped, "best_step": outcome.best_step,
            "loss": {"train": outcome.train_loss, "validation": outcome.validation_loss,
                     "base_validation": outcome.base_validation_loss},
            "history": outcome.history,
        }
        written = files()
        for name in written:  # Kronos: model/ and tokenizer/
            make_folder((out / name).parent, ConfigError)
        write_files(out, {**written, FILE_NAME: record_text(record)}, ConfigError)
        (out / CHECKPOINT).unlink(missing_ok=True)
    say = err_console if as_json else console  # with --json, stdout holds the one JSON document
    say.print(f"tuned {model} on {', '.join(windows.symbols)} through {cutoff}: {outcome.steps} steps "
              f"({outcome.stopped}), best at step {outcome.best_step}", highlight=False)
    say.print(f"validation loss {outcome.validation_loss:.4f} (base {outcome.base_validation_loss:.4f})",
              highlight=False)
    say.print(f"weights: {out} (use --weights {out}; windows on or before {cutoff} of these symbols are "
              "refused as in sample)", highlight=False, soft_wrap=True)
    result = None
    if evaluate:
        from marketcast.finetune.evaluate import evaluate as compare
        from marketcast.finetune.evaluate import print_evaluation

        result = compare(model, weights, out, bars, cutoff, context=context, samples=samples, device=device,
                         dtype=dtype, seed=seed, data_dir=data_dir)
        if not as_json:
            print_evaluation(result)
    if as_json:
        from marketcast.console import print_json
        from marketcast.finetune.evaluate import evaluation_json

        print_json({"out": out, "model": model, "base": weights or "auto", "base_source": source,
                    "until": cutoff.isoformat(), "symbols": list(windows.symbols), "lora": lora,
                    "adapter": record["adapter"], "steps": outcome.steps, "stopped": outcome.stopped,
                    "best_step": outcome.best_step, "loss": record["loss"],
                    "evaluation": None if result is None else evaluation_json(result)})
