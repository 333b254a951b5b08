"""``marketcast`` command line: backtest | forecast | data | compile | trade.

Bad input ends with one line on stderr and exit code 2 (``--debug`` shows the traceback instead). Each
subcommand is imported only when it runs (:mod:`marketcast.lazy_commands`), so ``--help`` answers at once.
"""

from __future__ import annotations

import importlib
import sys

import typer

from marketcast.console import err_console
from marketcast.errors import ExitCode, MarketcastError
from marketcast.lazy_commands import lazy_group

COMMANDS = {
    "backtest": ("marketcast.backtest.cli:backtest",
                 "Walk-forward backtest: forecast bar t+1 from bars <= t, decide, settle on bar t+1."),
    "forecast": ("marketcast.forecast.cli:forecast", "Forecast the next bars of SYMBOL and print the quantile fan."),
    "data": ("marketcast.data.cli:app", "Inspect and validate bar files."),
    "compile": ("marketcast.compile.cli:app", "torch.compile settings, checks and diagnostics."),
    "trade": ("marketcast.trade.cli:app", "Paper and live trading loop."),
}

app = typer.Typer(
    name="marketcast",
    help="Probabilistic forecasts (Toto, Kronos, baseline) -> honest backtests -> trading decisions.",
    cls=lazy_group(COMMANDS),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    pass


def _exception_classes(name: str) -> tuple[type, ...]:
    """``name`` from click and from the click copy newer typer releases bundle (not click subclasses)."""
    found = []
    for module in ("click.exceptions", "typer.exceptions", "typer._click.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


EXIT, ABORT, NO_ARGS, CLICK_ERROR = (_exception_classes(n) for n in ("Exit", "Abort", "NoArgsIsHelpError",
                                                                      "ClickException"))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script exits with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    try:
        result = app(args=args, prog_name="marketcast", standalone_mode=False)
    except EXIT as exc:
        return int(exc.exit_code)
    except ABORT:
        err_console.print("aborted")
        return ExitCode.INTERRUPTED
    except NO_ARGS as exc:  # a bare group: its help, as click does
        print(exc.format_message())
        return int(exc.exit_code)
    except CLICK_ERROR as exc:  # usage errors (unknown option, bad value, missing argument): one line
        if debug:
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        err_console.print(f"[red]error:[/red] {exc.format_message()}{hint}", highlight=False, soft_wrap=True)
        return int(exc.exit_code)
    except MarketcastError as exc:
        if debug:
            raise
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return int(exc.exit_code)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
