"""``marketcast`` command line: backtest | report | sweep | runs | forecast | data | models | compile | trade |
finetune | schema.

Bad input ends with one line on stderr and an exit code from ``marketcast.errors.ExitCode`` (2 for bad
input); ``--debug`` shows the traceback instead (see :mod:`marketcast.commands.runner`). Each subcommand is imported
only when it runs (:mod:`marketcast.commands.lazy`), so ``--help`` answers at once.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from marketcast.commands.help import HELP_OPTIONS
from marketcast.commands.lazy import lazy_group
from marketcast.forecast.registry import MODEL_NAMES  # the names alone: no numpy, pandas or torch

COMMANDS = {
    "backtest": ("marketcast.commands.backtest:backtest",
                 "Walk-forward backtest: forecast bar t+1 from bars <= t, decide, settle on bar t+1."),
    "report": ("marketcast.commands.report:report",
               "Re-make a run's reports from the run store: report.html, JSON, Markdown, trades.csv and PNGs."),
    "sweep": ("marketcast.commands.sweep:sweep",
              "Backtest every cell of SPEC's grid on Ray; a failing cell is recorded with its error, the rest go on."),
    "runs": ("marketcast.commands.runs:app", "The run store: list, show, compare and query runs."),
    "forecast": ("marketcast.commands.forecast:forecast", "Forecast the next bars of SYMBOL and print the quantile fan."),
    "data": ("marketcast.commands.data:app", "Inspect, validate and fetch bar files."),
    "models": ("marketcast.commands.models:app",
               "Download model weights from the Hugging Face hub; compare models on the same windows."),
    "compile": ("marketcast.commands.compile:app", "torch.compile settings, checks and diagnostics."),
    "trade": ("marketcast.commands.trade:app", "Paper and live trading loop."),
    "finetune": ("marketcast.commands.finetune:finetune",
                 "Fine-tune a forecaster on your bars up to --until; writes weights plus tuning.json (leak-proof)."),
    "schema": ("marketcast.commands.schema:schema",
               "Print the JSON Schema of a --json output (no NAME: list every schema and its $id)."),
}

app = typer.Typer(
    name="marketcast",
    help=f"Probabilistic forecasts ({', '.join(MODEL_NAMES)}) -> honest backtests -> trading decisions.",
    cls=lazy_group(COMMANDS),
    context_settings=HELP_OPTIONS,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("marketcast")
    except PackageNotFoundError:
        from marketcast import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        print(f"marketcast {_version()} (Python {sys.version.split()[0]})")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[Optional[bool], typer.Option(
        "--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show the full traceback of an error instead of one line (also accepted after the "
                        "command, or as MARKETCAST_DEBUG=1).")] = False,
) -> None:
    """The options before any command; ``--debug`` is declared here for --help and read by
    :func:`marketcast.commands.runner.main` from anywhere on the command line."""


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script exits with it)."""
    from marketcast.commands import runner

    return runner.main(app, argv)


if __name__ == "__main__":
    sys.exit(main())
