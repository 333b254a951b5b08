"""``marketcast`` command line: backtest | report | sweep | runs | forecast | data | models | compile | trade.

Bad input ends with one line on stderr and an exit code from ``marketcast.errors.ExitCode`` (2 for bad
input); ``--debug`` shows the traceback instead (see :mod:`marketcast.failures`).
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from marketcast.backtest import cli as backtest_cli
from marketcast.backtest.cli import backtest
from marketcast.compile.cli import app as compile_app
from marketcast.data.cli import app as data_app
from marketcast import failures
from marketcast.forecast.cli import forecast
from marketcast.forecast.models_cli import app as models_app
from marketcast.report.cli import report
from marketcast.runs.cli import app as runs_app
from marketcast.runs.record import record_backtest
from marketcast.sweep.cli import sweep
from marketcast.trade.cli import app as trade_app

app = typer.Typer(
    name="marketcast",
    help="Probabilistic forecasts (Toto, Kronos, baseline) -> honest backtests -> trading decisions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("backtest")(backtest)
backtest_cli.AFTER_RUN.append(record_backtest)  # every backtest goes to the run store
app.command("report")(report)
app.command("sweep")(sweep)
app.add_typer(runs_app, name="runs", help="The run store: list, show, compare and re-report runs.")
app.command("forecast")(forecast)
app.add_typer(data_app, name="data", help="Inspect and validate bar files.")
app.add_typer(models_app, name="models", help="Download model weights from the Hugging Face hub.")
app.add_typer(compile_app, name="compile", help="torch.compile settings, checks and diagnostics.")
app.add_typer(trade_app, name="trade", help="Paper and live trading loop.")


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
    :func:`marketcast.failures.main` from anywhere on the command line."""


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script exits with it)."""
    return failures.main(app, argv)


if __name__ == "__main__":
    sys.exit(main())
