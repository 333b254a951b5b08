"""``marketcast finetune``'s work, from its options to the written checkpoint: the checks that refuse bad input
before torch loads, the model's objective and windows, the training loop, the output folder (weights plus
``tuning.json``, the record also inside the weights' safetensors header) and, when asked, the evaluation of
base vs tuned after ``--until``.

Kept out of the command so the command only parses and prints, and so a tuning runs without the CLI.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from functools import partial
from datetime import date
from importlib import import_module
from pathlib import Path
from typing import Callable, Optional

from marketcast.errors import ConfigError

MODELS = ("toto", "kronos", "toto2")


@dataclass(frozen=True)
class TuneRequest:
    """What ``marketcast finetune`` was asked (its options, by name)."""

    model: str
    weights: Optional[str]
    symbols: Optional[list[str]]  # comma-separated or repeated; default: every file of data_dir, else embedded
    data_dir: Optional[Path]
    until: str
    steps: int
    lr: float
    batch_size: int
    context: int
    horizon: int
    lora: Optional[int]
    device: str
    dtype: str
    seed: int
    eval_every: int
    patience: int
    checkpoint_every: int
    out: Path
    resume: bool
    evaluate: bool
    samples: int  # for the evaluation


@dataclass
class Tuned:
    """A finished tuning: where it went, its ``tuning.json`` record, the loop's outcome and the evaluation."""

    out: Path
    cutoff: date
    source: str  # where the base weights came from
    symbols: list[str]
    record: dict
    outcome: object  # marketcast.finetune.loop.Outcome
    evaluation: Optional[dict] = None


def tune_symbols(values: Optional[list[str]], data_dir: Optional[Path]) -> list[str]:
    """``--symbols`` as given; without it every file of ``--data-dir``, else the embedded symbols."""
    from marketcast.data import DEFAULT_SYMBOLS
    from marketcast.data.load import symbol_files

    names = [s.strip().upper() for v in values or [] for s in v.split(",") if s.strip()]
    names = names or (sorted(symbol_files(data_dir)) if data_dir is not None else list(DEFAULT_SYMBOLS))
    if len(set(names)) != len(names):
        raise ConfigError(f"--symbols repeat: {', '.join(names)}")
    return names


def check_out(out: Path, resume: bool) -> None:
    """Refuse an ``--out`` that is a file, or holds something without ``--resume``, or has nothing to resume."""
    from marketcast.fileio import check_writable
    from marketcast.finetune.loop import CHECKPOINT
    from marketcast.forecast.tuning import FILE_NAME

    check_writable(out, "--out")  # a file, a read-only or pseudo filesystem: exit 3 before the weights load
    busy = out.is_dir() and any(out.iterdir())
    if busy and not resume:
        raise ConfigError(f"--out {out} already exists and is not empty; pass --resume to continue its training, or "
                          "choose a new folder")
    if resume and not busy:
        raise ConfigError(f"--resume: {out} holds no {CHECKPOINT} to continue from; drop --resume to start a new "
                          "training there")
    if resume and not (out / CHECKPOINT).is_file():
        finished = (out / FILE_NAME).is_file()
        raise ConfigError(f"--resume: {out} has no {CHECKPOINT} to continue from"
                          + ("; its tuning already finished" if finished else "") + "; choose a new --out")


def check_windows(bars: list, cutoff: date, context: int, horizon: int, batch_size: int) -> None:
    """The bars' checks of the windows, before the weights load: a cutoff after the last bar, a --horizon or
    --context the bars up to the cutoff cannot hold, a --batch-size larger than the training windows. Each
    model's windows come whole patches long (at least these: patches of 1 bar), so what fails here fails there
    too; the model's own rounding is checked again once its config is read."""
    from marketcast.finetune.data import make_windows

    windows = make_windows(bars, cutoff, context, horizon, 1)
    if batch_size > len(windows.train):
        raise ConfigError(f"--batch-size {batch_size} is more than the {len(windows.train):,} training windows the "
                          f"bars up to {cutoff} hold; use at most {len(windows.train):,}")


def check_tuned_base(weights: Optional[str], cutoff: date, names: list[str]) -> None:
    """Tuned weights tuned again carry both tunings' bars, and the new ``tuning.json`` has one cutoff and one
    symbol list: it must cover the base's (its ``until`` and symbols), or the guard would call bars the base was
    tuned on out of sample. Refused in one line otherwise, before any work."""
    from marketcast.forecast.tuning import read_tuning

    base = read_tuning(weights)
    if base is None:
        return
    missing = [s for s in base.symbols if s not in names]
    if base.until > cutoff or missing:
        need = ",".join([*names, *missing])
        raise ConfigError(
            f"--weights {weights} were tuned on {', '.join(base.symbols)} up to {base.until} (their tuning record); "
            f"tuning them with --until {cutoff} on {', '.join(names)} would record a period that leaves out bars "
            f"they saw; use --until {max(cutoff, base.until)} or later with --symbols {need}, or tune from their "
            f"base ({base.base or 'auto'})")


def _objective(r: TuneRequest, bars: list, cutoff: date, dev, autocast):
    """The model's base weights, its source, windows, LoRA targets, objective and files to write."""
    from marketcast.finetune.data import make_windows

    if r.model in ("toto", "toto2"):  # the same steps; each module brings its model, loss, LoRA targets and files
        patched = import_module(f"marketcast.finetune.{r.model}")
        base, source = patched.load_base(r.weights, dev, r.seed)
        windows = make_windows(bars, cutoff, r.context, r.horizon, base.config.patch_size)
        objective = patched.OBJECTIVE(base, r.context, r.horizon, autocast, dev)
        return base, source, windows, patched.LORA_TARGETS, objective, partial(patched.checkpoint_files, base)
    from marketcast.finetune import kronos

    base, tokenizer, source = kronos.load_base(r.weights, dev, r.seed)
    if r.context + r.horizon > base.config.max_context + 1:
        raise ConfigError(f"--context {r.context} + --horizon {r.horizon} exceed Kronos's window of "
                          f"{base.config.max_context} tokens; use a --context of at most "
                          f"{base.config.max_context + 1 - r.horizon}")
    windows = make_windows(bars, cutoff, r.context, r.horizon, 1, kronos.kronos_features, kronos.kronos_stamps)
    objective = kronos.KronosObjective(base, tokenizer, r.context, r.horizon, autocast, dev)
    return base, source, windows, kronos.LORA_TARGETS, objective, partial(kronos.checkpoint_files, base, tokenizer)


def tune(request: TuneRequest, on_trained: Callable[[Tuned], None] = lambda tuned: None) -> Tuned:
    """Fine-tune ``request.model`` on the bars up to ``request.until`` and write the checkpoint folder;
    ``on_trained`` hears of the weights once written, before the (optional, slow) evaluation."""
    r = request
    if r.model not in MODELS:
        raise ConfigError(f"--model {r.model!r} is unknown; choose one of {', '.join(MODELS)}")
    if r.lora is not None and r.lora <= 0:
        raise ConfigError(f"--lora {r.lora}: a LoRA rank is a positive integer, e.g. --lora 8 (leave it out for full "
                          "fine-tuning)")
    from marketcast.finetune.data import parse_until

    cutoff = parse_until(r.until)
    out = Path(os.path.abspath(r.out.expanduser()))
    check_out(out, r.resume)
    names = tune_symbols(r.symbols, r.data_dir)
    check_tuned_base(r.weights, cutoff, names)
    from marketcast.forecast.cards import lineage
    from marketcast.forecast.registry import import_models

    import_models()  # the hub catalogue names the model's default checkpoint
    ancestry = lineage(r.model, r.weights)  # the public checkpoint it descends from, or "base: provenance unknown"

    import torch

    from marketcast.data import load_symbol
    from marketcast.fileio import check_writable, exclusive, make_folder, write_files
    from marketcast.finetune.loop import (
        CHECKPOINT,
        Hyper,
        check_resume,
        load_checkpoint,
        train,
        trained_on,
    )
    from marketcast.forecast.tuning import FILE_NAME, record_metadata, record_text

    dev = torch.device(r.device)
    if (dev.type == "cuda" and not torch.cuda.is_available()) or (dev.type == "mps"
                                                                  and not torch.backends.mps.is_available()):
        raise ConfigError(f"--device {r.device}: {dev.type.upper()} is not available here; use --device cpu")
    check_writable(out, "--out")  # a file, a FIFO or a device there is refused before the bars and the weights
    hyper = Hyper(steps=r.steps, lr=r.lr, batch_size=r.batch_size, context=r.context, horizon=r.horizon,
                  lora=r.lora, dtype=r.dtype, seed=r.seed, eval_every=r.eval_every, patience=r.patience,
                  checkpoint_every=r.checkpoint_every, model=r.model, weights=r.weights or "auto")
    bars = [load_symbol(n, data_dir=r.data_dir) for n in names]
    check_windows(bars, cutoff, r.context, r.horizon, r.batch_size)
    data = trained_on(cutoff, bars)
    saved = load_checkpoint(out, mmap=True) if r.resume else None
    if saved is not None:  # before the model loads: another cutoff, symbols or bars are refused in one line
        check_resume(saved, hyper, data)
    del saved
    autocast = torch.bfloat16 if r.dtype == "bfloat16" else None
    base, source, windows, targets, objective, files = _objective(r, bars, cutoff, dev, autocast)
    if r.lora is not None:
        from marketcast.finetune.toto import add_lora

        add_lora(base, r.lora, r.seed, targets)
    make_folder(out.parent, ConfigError)
    with exclusive(out.parent / f".{out.name}.lock", str(out)):
        make_folder(out, ConfigError)
        for leftover in glob.glob(os.path.join(glob.escape(str(out)), f".{CHECKPOINT}.*.tmp")):
            os.unlink(leftover)  # of a writer killed by SIGKILL mid-checkpoint; the checkpoint itself is whole
        checkpoint = load_checkpoint(out) if r.resume else None
        outcome = train(objective, windows, hyper, dev, out, checkpoint, data)
        record = {
            "model": r.model, "base": r.weights or "auto", "base_source": source, **ancestry,
            "until": cutoff.isoformat(),
            "symbols": windows.symbols, "hyper": hyper.to_dict(),
            "adapter": f"lora rank {r.lora} on {', '.join(targets)}, merged into the weights" if r.lora else "full",
            "steps": outcome.steps, "stopped": outcome.stopped, "best_step": outcome.best_step,
            "loss": {"train": outcome.train_loss, "validation": outcome.validation_loss,
                     "base_validation": outcome.base_validation_loss},
            "history": outcome.history,
        }
        written = files(record_metadata(record))  # the record inside the weights, and beside them
        for name in written:  # Kronos: model/ and tokenizer/
            make_folder((out / name).parent, ConfigError)
        write_files(out, {**written, FILE_NAME: record_text(record)}, ConfigError)
        (out / CHECKPOINT).unlink(missing_ok=True)
    tuned = Tuned(out, cutoff, source, list(windows.symbols), record, outcome)
    on_trained(tuned)
    if r.evaluate:
        from marketcast.finetune.evaluate import evaluate

        tuned.evaluation = evaluate(r.model, r.weights, out, bars, cutoff, context=r.context, samples=r.samples,
                                    device=r.device, dtype=r.dtype, seed=r.seed, data_dir=r.data_dir)
    return tuned
