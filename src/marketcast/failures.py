"""How a command ends: one line on stderr and an exit code from :class:`~marketcast.errors.ExitCode`.

A :class:`MarketcastError` carries its own line and code; click's usage errors (an unknown option, a value out
of range) are exit 2; the foreseeable errors of the libraries underneath (a date pandas cannot parse, a file
pyarrow cannot read, a database that is not one, a full disk, bytes that are not UTF-8) are translated here,
so a user never reads a traceback for bad input. Anything else is a bug and keeps its traceback (exit 1).
``--debug`` shows the traceback of everything. Warnings become one ``warning:`` line each.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys
import warnings

from rich.text import Text

from marketcast.console import err_console
from marketcast.errors import ExitCode, MarketcastError, first_line


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


def _library_classes() -> dict[str, tuple[type, ...]]:
    """pandas' and pyarrow's parse errors, looked up only when those libraries were imported."""
    out: dict[str, tuple[type, ...]] = {"date": (), "table": ()}
    if "pandas" in sys.modules:
        import pandas as pd
        from pandas._libs.tslibs.parsing import DateParseError

        out["date"] = (DateParseError, pd.errors.OutOfBoundsDatetime, pd.errors.OutOfBoundsTimedelta)
        out["table"] = (pd.errors.ParserError, pd.errors.EmptyDataError)
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        out["table"] += (pa.ArrowException,)
    return out


def describe(exc: BaseException) -> tuple[str, int] | None:
    """The one line and exit code for an exception a user can fix; None for a bug."""
    if isinstance(exc, MarketcastError):
        return str(exc), int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", ExitCode.INTERRUPTED
    if isinstance(exc, UnicodeDecodeError):
        return (f"cannot read text as {exc.encoding}: byte 0x{exc.object[exc.start]:02x} at position {exc.start} is "
                "not valid there; save the file as UTF-8", ExitCode.USAGE)
    if isinstance(exc, sqlite3.DatabaseError):
        fix = ("another marketcast process is using it; stop that one first" if "locked" in str(exc) else
               "the state folder holds a damaged or foreign database: move it away or choose another --state-dir")
        return f"database error ({first_line(exc)}); {fix}", ExitCode.STATE
    if isinstance(exc, MemoryError):
        return "out of memory; use fewer --samples or --windows, or a shorter --context", ExitCode.USAGE
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        reason = exc.strerror or first_line(exc)
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
            return f"{where}{reason}; check the path", ExitCode.USAGE
        return f"{where}{reason}; free space or fix the permissions and run again", ExitCode.STATE
    classes = _library_classes()
    if isinstance(exc, classes["date"]):
        from marketcast.data.timestamps import ISO_FIX  # pandas: only once a date went wrong

        return f"cannot use a date: {first_line(exc)}; {ISO_FIX}", ExitCode.USAGE
    if isinstance(exc, classes["table"]):
        return f"cannot read a table: {first_line(exc)}; check the file and export it again", ExitCode.USAGE
    return None


def _say(label: str, style: str, line: str) -> None:
    """One line on stderr: line breaks inside (a value echoed back) are escaped, and the text is never read as
    rich markup (paths and values may hold brackets)."""
    line = str(line).replace("\r", "\\r").replace("\n", "\\n")
    err_console.print(Text.assemble((label, style), " ", line), highlight=False, soft_wrap=True)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    _say("warning:", "yellow", str(message))


def _error(line: str) -> None:
    _say("error:", "red", line)


def main(app, argv: list[str] | None = None, prog_name: str = "marketcast") -> int:
    """A console script's entry: ``--debug`` is taken from anywhere on the command line (so it also works
    after a command's own options), or from ``MARKETCAST_DEBUG=1``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("MARKETCAST_DEBUG", "") not in ("", "0")
    return run(app, [a for a in args if a != "--debug"], debug, prog_name)


def run(app, args: list[str], debug: bool, prog_name: str = "marketcast") -> int:
    """Run the typer ``app`` on ``args``; return the exit code (see the module docstring)."""
    with warnings.catch_warnings():
        if not debug:
            warnings.showwarning = _show_warning
        try:
            result = app(args=args, prog_name=prog_name, standalone_mode=False)
        except EXIT as exc:
            return int(exc.exit_code)
        except ABORT:
            _error("aborted")
            return ExitCode.INTERRUPTED
        except NO_ARGS as exc:  # a bare group: its help on stdout, as `--help` does
            print(exc.format_message())
            return ExitCode.OK
        except CLICK_ERROR as exc:  # usage errors (unknown option, bad value, missing argument): one line
            if debug:
                raise
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            _error(f"{exc.format_message()}{hint}")
            return int(exc.exit_code)
        except BrokenPipeError:  # `marketcast ... | head`: the reader left; say nothing more
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            return ExitCode.OK
        except (Exception, KeyboardInterrupt) as exc:
            known = describe(exc)
            if debug or known is None:
                raise
            _error(known[0])
            return known[1]
    return result if isinstance(result, int) else ExitCode.OK
