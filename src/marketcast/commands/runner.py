"""How a command ends: one line on stderr and an exit code from :class:`~marketcast.errors.ExitCode`.

A :class:`MarketcastError` carries its own line and code; click's usage errors (an unknown option, a value out
of range) are exit 2; the foreseeable errors of the libraries underneath (a date pandas cannot parse, a file
pyarrow cannot read, a database that is not one, a full disk, bytes that are not UTF-8) are translated here,
so a user never reads a traceback for bad input. Anything else is a bug and keeps its traceback (exit 1).
``--debug`` shows the traceback of everything. Warnings become one ``warning:`` line each.

While a command runs, SIGTERM and SIGINT raise (:mod:`marketcast.signals`); the command then ends with 143 or
130.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import sys
import warnings
from contextlib import contextmanager, nullcontext
from typing import Iterator

from rich.text import Text

from marketcast.console import err_console
from marketcast.errors import ConfigError, ExitCode, MarketcastError, first_line
from marketcast.signals import Received, Terminated, install_signal_handlers, restore_signal_handlers

DEBUG_ENV = "MARKETCAST_DEBUG"
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
_ON, _OFF = ("1", "true", "yes"), ("", "0", "false", "no")


def debug_from_env(environ=os.environ) -> bool:
    """``MARKETCAST_DEBUG``: 1/true/yes on, 0/false/no/empty off (any case); anything else is a ConfigError,
    not a guess (``false`` used to turn debug on)."""
    value = environ.get(DEBUG_ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ConfigError(f"{DEBUG_ENV}={environ[DEBUG_ENV]!r}: use 1, true or yes to show tracebacks, 0, false or no "
                      "(or leave it unset) to hide them")


def one_blas_thread(environ=os.environ) -> None:
    """numpy's OpenBLAS with one thread, unless ``OPENBLAS_NUM_THREADS`` is set (read once, when numpy loads, so
    only before it is imported). Its products here are small (bootstrap counts x returns, CSCV halves x block
    sums); a thread per core costs more than it saves: the threads start with numpy and spin after each product,
    taking the cores the command runs on (the default backtest: 0.6 s of work in 1.0 s wall on 2 busy cores
    with them, 0.4 s without; benchmarks/startup_bench.py). torch keeps its own threads."""
    if "numpy" not in sys.modules:
        environ.setdefault(BLAS_THREADS_ENV, "1")


def _exception_classes(name: str) -> tuple[type, ...]:
    """``name`` from click and from the click copy newer typer releases bundle (not click subclasses), in the
    modules imported so far: an exception of one of them means its module was imported, and an ``except``
    clause reads this when an exception arrives, so a command that never imports click does not pay for it."""
    found = []
    for module in ("click.exceptions", "typer.exceptions", "typer._click.exceptions"):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


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


def _signal_under(exc: BaseException) -> BaseException | None:
    """The Terminated or KeyboardInterrupt ``exc`` is, or was raised from or during; None if none."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (Terminated, KeyboardInterrupt)):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def describe(exc: BaseException) -> tuple[str, int] | None:
    """The one line and exit code for an exception a user can fix; None for a bug."""
    if Received.last is not None and _signal_under(exc) is None:
        # a library that met the signal's exception may end with an error of its own instead (duckdb: "Query
        # interrupted"), which the command may even translate: the command was stopped, and says so
        return describe(Terminated() if Received.last == signal.SIGTERM else KeyboardInterrupt())
    if isinstance(exc, MarketcastError):
        return str(exc), int(exc.exit_code)
    stop = _signal_under(exc)
    if stop is not None and stop is not exc:  # Ray's C code wraps a handler's exception in a SystemError
        return describe(stop)
    if isinstance(exc, Terminated) or (isinstance(exc, KeyboardInterrupt) and Received.last == signal.SIGTERM):
        if Received.finished:
            return f"terminated (SIGTERM) after {Received.finished}", ExitCode.TERMINATED
        return "terminated (SIGTERM); temporary files removed", ExitCode.TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        return f"interrupted after {Received.finished}" if Received.finished else "interrupted", ExitCode.INTERRUPTED
    if isinstance(exc, UnicodeDecodeError):
        return (f"cannot read text as {exc.encoding}: byte 0x{exc.object[exc.start]:02x} at position {exc.start} is "
                "not valid there; save the file as UTF-8", ExitCode.USAGE)
    sqlite3 = sys.modules.get("sqlite3")  # its errors exist only where it was imported: not at start-up
    if sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError):
        fix = ("another marketcast process is using it; stop that one first" if "locked" in str(exc) else
               "the state folder holds a damaged or foreign database: move it away or choose another --state-dir")
        return f"database error ({first_line(exc)}); {fix}", ExitCode.STATE
    if isinstance(exc, MemoryError):
        return "out of memory; use fewer --samples or --windows, or a shorter --context", ExitCode.USAGE
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        shown = name if len(name) <= 80 else f"{name[:60]}...{name[-12:]} ({len(name):,} characters)"
        return f"{shown}: file name too long for the file system; choose a shorter name", ExitCode.USAGE
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


#: C0 and C1 control characters and DEL: a file name may hold an ANSI escape that would recolour, move the cursor
#: or retitle the user's terminal when echoed back
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as its escape (``\\n``, ``\\x1b``), so one line stays
    one line of plain text."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


def _say(label: str, style: str, line: str) -> None:
    """One line on stderr: control characters inside (line breaks and ANSI escapes of a value echoed back) are
    escaped, and the text is never read as rich markup (paths and values may hold brackets)."""
    line = escape_controls(line)
    err_console.print(Text.assemble((label, style), " ", line), highlight=False, soft_wrap=True)


class _Warned:
    """The warning lines the running command has said: each is said once (a factory called once per mode, a
    library resetting the warnings registry, a log record beside a warning would otherwise repeat it)."""

    lines: set[str] = set()


def _warn(line: str) -> None:
    if line not in _Warned.lines:
        _Warned.lines.add(line)
        _say("warning:", "yellow", line)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    _warn(str(message))


class _LogWarnings(logging.Handler):
    """Python's last-resort log handler while a command runs: a record no handler takes (a WARNING of ours or
    a library's) becomes a ``warning:`` line like a Python warning, not a bare message."""

    def emit(self, record: logging.LogRecord) -> None:
        _warn(record.getMessage())


_LAST_RESORT = _LogWarnings(logging.WARNING)


@contextmanager
def _warning_lines() -> Iterator[None]:
    """Python warnings and unhandled log records become ``warning:`` lines on stderr, each said once."""
    shown, resort = warnings.showwarning, logging.lastResort
    warnings.showwarning, logging.lastResort, _Warned.lines = _show_warning, _LAST_RESORT, set()
    try:
        yield
    finally:
        warnings.showwarning, logging.lastResort = shown, resort


def _error(line: str) -> None:
    _say("error:", "red", line)


def main(app, argv: list[str] | None = None, prog_name: str = "marketcast") -> int:
    """A console script's entry: ``--debug`` is taken from anywhere on the command line (so it also works
    after a command's own options), or from ``MARKETCAST_DEBUG`` (see :func:`debug_from_env`); returns the
    exit code. A signal after the command is done is ignored: its outputs are complete, its code stands."""
    args = list(sys.argv[1:] if argv is None else argv)
    one_blas_thread()
    try:
        debug = "--debug" in args or debug_from_env()
    except ConfigError as exc:
        _error(str(exc))
        return ExitCode.USAGE
    after = signal.SIG_IGN if argv is None else None  # a console script's process: nothing left to clean up
    return run(app, [a for a in args if a != "--debug"], debug, prog_name, after=after)


def run(app, args: list[str], debug: bool, prog_name: str = "marketcast", after: object = None) -> int:
    """Run the typer ``app`` on ``args``; return the exit code (see the module docstring). SIGTERM and SIGINT
    raise while it runs (:class:`Terminated`, ``KeyboardInterrupt``); then the handlers before are put back,
    or ``after`` (``signal.SIG_IGN``: a signal once the command is done changes nothing) becomes the handler."""
    previous = install_signal_handlers()
    try:
        code = _run(app, args, debug, prog_name)
    except (KeyboardInterrupt, Terminated) as exc:  # arrived between the command's end and here
        if debug:
            raise
        line, code = describe(exc)
        _error(line)
    finally:
        restore_signal_handlers(previous if after is None or previous is None else dict.fromkeys(previous, after))
        Received.last = None
    return code


def _run(app, args: list[str], debug: bool, prog_name: str) -> int:
    with warnings.catch_warnings(), nullcontext() if debug else _warning_lines():
        try:
            result = app(args=args, prog_name=prog_name, standalone_mode=False)
        except _exception_classes("Exit") as exc:
            return int(exc.exit_code)
        except _exception_classes("Abort"):  # click's KeyboardInterrupt (a SIGTERM that Ray turned into one)
            if Received.last == signal.SIGTERM:
                _error(describe(Terminated())[0])
                return ExitCode.TERMINATED
            _error("aborted")
            return ExitCode.INTERRUPTED
        except _exception_classes("NoArgsIsHelpError") as exc:  # a bare group: its help on stdout, as --help
            print(exc.format_message())
            return ExitCode.OK
        except _exception_classes("ClickException") as exc:  # usage errors (unknown option, bad value, ...)
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
        except (Exception, KeyboardInterrupt, Terminated) as exc:
            known = describe(exc)
            if debug or known is None:
                raise
            _error(known[0])
            return known[1]
    if result == ExitCode.INTERRUPTED and Received.last is not None:
        # typer answers a KeyboardInterrupt with a silent 130 (also a SIGTERM Ray turned into one): say which
        line, code = describe(KeyboardInterrupt())
        _error(line)
        return code
    return result if isinstance(result, int) else ExitCode.OK
