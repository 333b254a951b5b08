"""``marketcast models compare``: one leaderboard of skill, trading and cost over the same windows."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from marketcast.commands import options
from marketcast.data import DEFAULT_SYMBOLS
from marketcast.forecast.registry import MODEL_NAMES

STORE_HELP = "Run store folder, or off (default: $MARKETCAST_RUN_STORE or out/runs)."


def leaderboard_table(rows: list[dict], title: str, benchmark: dict | None = None):
    """The rich table: one row per model; random weights in red (their numbers mean nothing); buy and hold's row
    last, dimmed (the benchmark, not a model)."""
    from rich.markup import escape
    from rich.table import Table

    from marketcast.report.leaderboard import COLUMNS, TEXT_COLUMNS, benchmark_cells, headers, marked_cells

    table = Table(title=title, title_justify="left")
    for name, head in zip(COLUMNS, headers()):
        table.add_column(head, justify="left" if name in TEXT_COLUMNS else "right",
                         no_wrap=name in ("model", "device"))  # a model's name stays on its row
    for row, marked in zip(rows, marked_cells(rows)):
        texts = [escape(t) for t in marked]
        if row["random_weights"]:
            texts[1] = f"[bold red]{texts[1]} (random)[/]"
        table.add_row(*texts)
    if benchmark:
        table.add_row(*(escape(t) for t in benchmark_cells(benchmark)), style="dim")
    return table


Symbols = Annotated[str, typer.Option(
    "--symbols", help="Comma-separated symbols, e.g. SP500,NASDAQ (read from --data-dir, default the embedded bars).")]
Models = Annotated[Optional[str], typer.Option(
    "--models", show_default=False,
    help=f"Comma-separated models to compare, from {', '.join(MODEL_NAMES)} (default: every model whose optional "
         "extra is installed). Each is checked before any runs: its extra installed, its weights found.")]
SkipMissing = Annotated[bool, typer.Option(
    "--skip-missing", help="Compare the models that can run here and leave out the others (each said, on the page "
                           "too), instead of stopping with exit 2.")]
Weights = Annotated[Optional[list[str]], typer.Option(
    "--weights", metavar="MODEL=WEIGHTS", help="One model's weights, repeatable, e.g. toto2=random:4m or "
                                               "toto=/path/to/folder (default: each model's public checkpoint).")]
Store = Annotated[Optional[str], typer.Option("--store", metavar="PATH", help=STORE_HELP)]
# every symbol and model is scored on one count of windows, so there is no --start/--end here
Windows = Annotated[str, typer.Option("--windows", "-n", callback=options.windows_callback, metavar="INTEGER|all",
                                      show_default="70", help=f"{options.WINDOWS_HELP} The same count for every "
                                                              "symbol and model (all: the fewest any symbol allows).")]


def compare(
    symbols: Symbols = ",".join(DEFAULT_SYMBOLS), models: Models = None, skip_missing: SkipMissing = False,
    weights: Weights = None, windows: Windows = None, samples: options.Samples = 256,
    context: options.Context = 512,
    seed: options.Seed = 0, device: options.Device = "cpu", dtype: options.Dtype = "float32",
    data_dir: options.DataDir = None, exit: options.Exit = "close", hold: options.Hold = False,
    as_json: options.AsJson = False, store: Store = None,
) -> None:
    """Backtest the same windows with each model; print skill, trading and cost, and record one run."""
    from rich.markup import escape

    from marketcast.console import console, print_json
    from marketcast.forecast.paths import paths_note
    from marketcast.leaderboard.board import compare_models
    from marketcast.report.leaderboard import BEST_NOTE, PICK_NOTE, best, notes, skipped_line

    started = time.perf_counter()
    board = compare_models(symbols, models, weights, windows=windows, samples=samples, context=context, seed=seed,
                           device=device, dtype=dtype, data_dir=data_dir, store=store, exit_rule=exit, hold=hold,
                           skip_missing=skip_missing)
    rows, tickers, run_id = board.rows, board.symbols, board.run_id
    if as_json:
        print_json({"symbols": tickers, "windows": board.windows, "samples": samples, "context": context, "seed": seed,
                    "exit": exit, "hold": hold, "models": rows, "benchmark": board.benchmark, "verdicts": board.verdicts,
                    "best": best(rows), "skipped": board.skipped, "run_id": run_id})
        return
    console.print(leaderboard_table(rows, f"{', '.join(tickers)}: the last {board.windows} windows, {samples} samples, "
                                          f"exit {exit}{', hold' if hold else ''}",
                                    board.benchmark))
    from marketcast.backtest.verdict import one_line

    for v in board.verdicts:  # the verdict strip of each model on each symbol, as the backtest prints it
        console.print(one_line(f"{v['model']} {v['symbol']}", v["verdict"]), highlight=False, soft_wrap=True)
    for line in notes(rows):
        console.print(f"[yellow]{escape(line)}[/]")
    if paths_note(rows):
        console.print(f"[yellow]{escape(paths_note(rows))}[/]")
    if board.skipped:
        console.print(f"[yellow]{escape(skipped_line(board.skipped))}[/]")
    if any(r["random_weights"] for r in rows):
        console.print("[red]random weights: their forecasts are noise; use them for plumbing and speed only[/]")
    console.print(f"[dim]skill and trading: means over the symbols (max DD: the worst). {escape(PICK_NOTE)} {escape(BEST_NOTE)} "
                  f"{time.perf_counter() - started:.1f} s[/dim]")
    if run_id:  # the last line, as the backtest prints it
        console.print(f"run {run_id}", highlight=False, markup=False, soft_wrap=True)
