"""``marketcast models compare``: one leaderboard of skill, trading and cost over the same windows."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from marketcast.commands import options
from marketcast.data import DEFAULT_SYMBOLS
from marketcast.forecast.registry import MODEL_NAMES, installed

STORE_HELP = "Run store folder, or off (default: $MARKETCAST_RUN_STORE or out/runs)."


def leaderboard_table(rows: list[dict], title: str):
    """The rich table: one row per model; random weights in red (their numbers mean nothing)."""
    from rich.markup import escape
    from rich.table import Table

    from marketcast.report.leaderboard import COLUMNS, TEXT_COLUMNS, cells

    table = Table(title=title, title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="left" if name in TEXT_COLUMNS else "right")
    for row in rows:
        texts = [escape(t) for t in cells(row)]
        if row["random_weights"]:
            texts[1] = f"[bold red]{texts[1]} (random)[/]"
        table.add_row(*texts)
    return table


def compare(
    symbols: Annotated[str, typer.Option(
        "--symbols", help="Comma-separated symbols, e.g. SP500,NASDAQ (read from --data-dir, default the embedded "
                          "bars).")] = ",".join(DEFAULT_SYMBOLS),
    models: Annotated[str, typer.Option(
        "--models", help=f"Comma-separated models to compare, from {', '.join(MODEL_NAMES)} (default: every "
                         "model whose optional extra is installed).")
    ] = ",".join(n for n in MODEL_NAMES if installed(n)),
    weights: Annotated[Optional[list[str]], typer.Option(
        "--weights", metavar="MODEL=WEIGHTS",
        help="One model's weights, repeatable, e.g. toto2=random:4m or toto=/path/to/folder (default: each "
             "model's public checkpoint).")] = None,
    windows: Annotated[int, typer.Option("--windows", "-n", min=1, help="Decision bars per symbol, the same "
                                                                        "for every model.")] = 70,
    samples: options.Samples = 256,
    context: options.Context = 512,
    seed: options.Seed = 0,
    device: options.Device = "cpu",
    dtype: options.Dtype = "float32",
    data_dir: options.DataDir = None,
    as_json: options.AsJson = False,
    store: Annotated[Optional[str], typer.Option("--store", help=STORE_HELP)] = None,
) -> None:
    """Backtest the same windows with each model; print skill, trading and cost, and record one run."""
    from marketcast.backtest.config import BacktestConfig
    from marketcast.console import console, print_json, progress_steps
    from marketcast.data import load_symbol
    from marketcast.errors import ConfigError
    from marketcast.leaderboard.compare import model_row, parse_models, parse_weights, refuse_tuned, run_model
    from marketcast.leaderboard.record import record_leaderboard
    from marketcast.signals import shielded

    started = time.perf_counter()
    names = parse_models(models)
    chosen = parse_weights(weights, names)
    tickers = [s.strip().upper() for s in symbols.split(",") if s.strip()]
    if not tickers:
        raise ConfigError("--symbols is empty; give a comma-separated list, e.g. --symbols SP500,NASDAQ")
    if len(set(tickers)) != len(tickers):
        raise ConfigError(f"--symbols repeats a symbol ({symbols}); list each once")
    bars = [load_symbol(s, data_dir=data_dir) for s in tickers]
    config = BacktestConfig(windows=windows, context=context, num_samples=samples, seed=seed)
    refuse_tuned(chosen, bars, config)
    runs = []
    with progress_steps(len(names) * (len(bars) + 2), "models compare") as step:  # load, forecast, simulate
        for name in names:
            step(f"{name}: loading")
            runs.append(run_model(name, bars, config, weights=chosen.get(name), device=device, dtype=dtype,
                                  step=step))
    rows = [model_row(r) for r in runs]
    with shielded():
        run_id = record_leaderboard(runs, rows, bars, {"data_dir": data_dir}, store)
    if as_json:
        print_json({"symbols": tickers, "windows": windows, "samples": samples, "context": context, "seed": seed,
                    "models": rows, "run_id": run_id})
        return
    console.print(leaderboard_table(rows, f"{', '.join(tickers)}: the last {windows} windows, {samples} samples"))
    if any(r["random_weights"] for r in rows):
        console.print("[red]random weights: their forecasts are noise; use them for plumbing and speed only[/]")
    console.print(f"[dim]skill and trading: means over the symbols (max DD: the worst); "
                  f"{time.perf_counter() - started:.1f} s[/dim]")
    if run_id:  # the last line, as the backtest prints it
        console.print(f"run {run_id}", highlight=False, markup=False, soft_wrap=True)

