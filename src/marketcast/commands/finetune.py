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

from pathlib import Path
from typing import Annotated, Optional

import typer

from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.console import console, err_console
from marketcast.finetune.tune import MODELS

Model = Annotated[str, typer.Option("--model", "-m", metavar=choice_list(MODELS),
                                    help="Model to tune: toto (Toto 1.0), kronos (its tokenizer stays frozen) or "
                                         "toto2 (Toto 2.0).")]
Symbols = Annotated[Optional[list[str]], typer.Option(
    "--symbols", help="Symbols to tune on, comma-separated or repeated, e.g. SP500,NASDAQ (default: the embedded "
                      "SP500 and NASDAQ; with --data-dir, its <SYMBOL>.csv files).")]
Until = Annotated[str, typer.Option("--until", metavar="DATE", help="The last day any training bar may fall on, "
                                    "targets included, e.g. 2016-12-30; later bars stay out of sample.")]
Steps = Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")]
Lr = Annotated[float, typer.Option("--lr", min=0.0, help="Peak learning rate (AdamW, warmup then cosine decay).")]
MAX_BATCH_SIZE = 65_536  # windows a step: far above what fits a GPU; a bigger value is a typo, refused before work
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, max=MAX_BATCH_SIZE,
                                        help=f"Windows per step, at most {MAX_BATCH_SIZE:,}.")]
Lora = Annotated[Optional[int], typer.Option(
    "--lora", metavar="RANK", help="Train rank-RANK LoRA adapters on the attention projections (merged into the "
                                   "weights on save), e.g. 8 (default: full fine-tuning).")]
Seed = Annotated[int, typer.Option("--seed", min=0, max=options.MAX_SEED, help="Seed of the batch order and the "
                                   "adapters' init: the same seed, data and settings give the same weights.")]
EvalEvery = Annotated[int, typer.Option("--eval-every", min=1, help="Steps between validation losses.")]
Patience = Annotated[int, typer.Option("--patience", min=0, help="Stop after this many validations without a "
                                       "better loss (0: never stop early).")]
CheckpointEvery = Annotated[int, typer.Option(
    "--checkpoint-every", min=1, help="Steps between checkpoints (--resume continues from the last).")]
Out = Annotated[Path, typer.Option("--out", help="Folder for the tuned weights and tuning.json, e.g. "
                                   "out/toto-tuned; must be new unless --resume.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the training whose checkpoint is in --out.")]
Evaluate = Annotated[bool, typer.Option(
    "--evaluate", help="After training, backtest base and tuned on the same windows after --until and print the "
                       "deltas with a paired test on per-window CRPS (default: off).")]
Samples = Annotated[int, typer.Option("--samples", "-s", min=1, max=options.MAX_SAMPLES,
                                      help=f"--evaluate: forecast sample paths per window, e.g. 64, at most "
                                           f"{options.MAX_SAMPLES:,}.")]


def finetune(
    model: Model = "toto", weights: options.Weights = None, symbols: Symbols = None, data_dir: options.DataDir = None,
    until: Until = ..., steps: Steps = 1000, lr: Lr = 1e-4, batch_size: BatchSize = 16,
    context: options.Context = 512, horizon: options.Horizon = 1, lora: Lora = None,
    device: options.Device = "cpu", dtype: options.Dtype = "float32", seed: Seed = 0, eval_every: EvalEvery = 50,
    patience: Patience = 5, checkpoint_every: CheckpointEvery = 50, out: Out = ..., resume: Resume = False,
    evaluate: Evaluate = False, samples: Samples = 256, as_json: options.AsJson = False,
) -> None:
    """Fine-tune a forecaster on your bars up to --until; writes weights plus tuning.json (leak-proof)."""
    from marketcast.finetune.tune import TuneRequest, tune

    say = err_console if as_json else console  # with --json, stdout holds the one JSON document
    tuned = tune(TuneRequest(model, weights, symbols, data_dir, until, steps, lr, batch_size, context, horizon, lora,
                             device, dtype, seed, eval_every, patience, checkpoint_every, out, resume, evaluate,
                             samples), on_trained=lambda done: _print_tuned(done, say))
    if tuned.evaluation is not None and not as_json:
        from marketcast.finetune.evaluate import print_evaluation

        print_evaluation(tuned.evaluation)
    if as_json:
        from marketcast.console import print_json
        from marketcast.finetune.evaluate import evaluation_json

        outcome, record = tuned.outcome, tuned.record
        print_json({"out": tuned.out, "model": model, "base": weights or "auto", "base_source": tuned.source,
                    "until": tuned.cutoff.isoformat(), "symbols": tuned.symbols, "lora": lora,
                    "adapter": record["adapter"], "steps": outcome.steps, "stopped": outcome.stopped,
                    "best_step": outcome.best_step, "loss": record["loss"],
                    "evaluation": None if tuned.evaluation is None else evaluation_json(tuned.evaluation)})


def _print_tuned(tuned, say) -> None:
    """What was tuned, how the loss went, and where the weights are (on stderr under --json)."""
    outcome, out, cutoff = tuned.outcome, tuned.out, tuned.cutoff
    say.print(f"tuned {tuned.record['model']} on {', '.join(tuned.symbols)} through {cutoff}: {outcome.steps} steps "
              f"({outcome.stopped}), best at step {outcome.best_step}", highlight=False)
    say.print(f"validation loss {outcome.validation_loss:.4f} (base {outcome.base_validation_loss:.4f})",
              highlight=False)
    say.print(f"weights: {out} (use --weights {out}; windows on or before {cutoff} of these symbols are "
              "refused as in sample)", highlight=False, soft_wrap=True)
