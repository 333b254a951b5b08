"""``marketcast`` command line: backtest | forecast | data | compile | trade.

Bad input ends with one line on stderr and exit code 2 (``--debug`` shows the traceback instead).
"""

from __future__ import annotations

import sys

import click
import typer

from marketcast.backtest.cli import backtest
from marketcast.compile.cli import app as compile_app
from marketcast.console import err_console
from marketcast.data.cli import app as data_app
from marketcast.errors import MarketcastError
from marketcast.forecast.cli import forecast
from marketcast.trade.cli import app as trade_app

app = typer.Typer(
    name="marketcast",
    help="Probabilistic forecasts (Toto, Kronos, baseline) -> honest backtests -> trading decisions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("backtest")(backtest)
app.command("forecast")(forecast)
app.add_typer(data_app, name="data", help="Inspect and validate bar files.")
app.add_typer(compile_app, name="compile", help="torch.compile settings, checks and diagnostics.")
app.add_typer(trade_app, name="trade", help="Paper and live trading loop.")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script exits with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    try:
        result = app(args=args, prog_name="marketcast", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        err_console.print("aborted")
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2
    except MarketcastError as exc:
        if debug:
            raise
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return exc.exit_code
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
