"""One error path: library errors a user can fix become one line and a documented exit code; a bug keeps
its traceback; --debug shows every traceback; warnings are one line each."""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import threading
import warnings

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer

from marketcast.errors import ConfigError, DataWarning, ExitCode, HaltedError
from marketcast.commands.runner import debug_from_env, describe, main, run
from marketcast.signals import Terminated, shielded


def _real(fn):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test wants the library's own exception object
        return exc
    raise AssertionError("expected an exception")


def test_a_foreign_database_is_a_state_error(tmp_path):
    path = tmp_path / "journal.db"
    path.write_bytes(b"this is not sqlite" * 100)
    line, code = describe(_real(lambda: sqlite3.connect(path).execute("select * from sqlite_master").fetchall()))
    assert code == ExitCode.STATE == 3
    assert line == ("database error (file is not a database); the state folder holds a damaged or foreign "
                    "database: move it away or choose another --state-dir")


def test_a_locked_database_says_another_process_has_it():
    line, code = describe(sqlite3.OperationalError("database is locked"))
    assert code == ExitCode.STATE and "another marketcast process is using it" in line


def test_a_full_disk_is_a_state_error():
    line, code = describe(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out/SP500.json"))
    assert (line, code) == ("out/SP500.json: No space left on device; free space or fix the permissions and run "
                            "again", ExitCode.STATE)


def test_a_missing_path_is_bad_input(tmp_path):
    line, code = describe(_real(lambda: open(tmp_path / "nope.csv")))
    assert code == ExitCode.USAGE and line == f"{tmp_path / 'nope.csv'}: No such file or directory; check the path"


def test_undecodable_text_is_bad_input():
    line, code = describe(_real(lambda: b"ab\xffcd".decode("utf-8")))
    assert code == ExitCode.USAGE and line.startswith("cannot read text as utf-8: byte 0xff at position 2")


def test_a_date_pandas_cannot_parse_is_bad_input():
    line, code = describe(_real(lambda: pd.Timestamp("2018-13-45")))
    assert code == ExitCode.USAGE
    assert line == ("cannot use a date: month must be in 1..12: 2018-13-45; write dates as ISO 8601 such as "
                    "2024-01-31 or 2024-01-31T14:30:00Z")


def test_a_parquet_pyarrow_cannot_read_is_bad_input(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1 nothing PAR1")
    line, code = describe(_real(lambda: pq.read_table(path)))
    assert code == ExitCode.USAGE and line.startswith("cannot read a table: ")
    assert isinstance(_real(lambda: pq.read_table(path)), pa.ArrowException)


def test_own_errors_keep_their_code_and_bugs_are_not_described():
    assert describe(HaltedError("halted: drawdown 26% >= 25%; see trade status")) == (
        "halted: drawdown 26% >= 25%; see trade status", ExitCode.HALTED)
    assert describe(KeyboardInterrupt()) == ("interrupted", ExitCode.INTERRUPTED)
    assert describe(ValueError("an internal bug")) is None


def _app(fail: BaseException | None = None, warn: str | None = None) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def go() -> None:
        if warn:
            warnings.warn(DataWarning(warn))
        if fail is not None:
            raise fail

    @app.command()
    def other() -> None:
        """A second command, so that `go` is a subcommand as in marketcast."""

    return app


def test_run_prints_one_line_and_returns_the_code(capsys):
    assert run(_app(sqlite3.DatabaseError("file is not a database")), ["go"], debug=False) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: database error (file is not a database)") and len(err.splitlines()) == 1


def test_run_keeps_the_traceback_of_a_bug_and_everything_under_debug():
    with pytest.raises(ValueError, match="an internal bug"):
        run(_app(ValueError("an internal bug")), ["go"], debug=False)
    with pytest.raises(sqlite3.DatabaseError):
        run(_app(sqlite3.DatabaseError("file is not a database")), ["go"], debug=True)


def test_a_value_with_a_line_break_stays_on_one_line(capsys):
    assert run(_app(ConfigError("--weights a\nb: no such folder")), ["go"], debug=False) == 2
    assert capsys.readouterr().err == "error: --weights a\\nb: no such folder\n"


def test_warnings_are_one_line_each_and_text_is_never_markup(capsys):
    assert run(_app(warn="x.csv: row 3 (line 4), column 'close': [bold]odd[/bold]"), ["go"], debug=False) == 0
    assert capsys.readouterr().err == "warning: x.csv: row 3 (line 4), column 'close': [bold]odd[/bold]\n"


@pytest.mark.parametrize("value,debug", [("1", True), ("true", True), ("YES", True), (" True ", True),
                                         ("0", False), ("false", False), ("No", False), ("", False)])
def test_marketcast_debug_reads_the_usual_words(value, debug):
    assert debug_from_env({"MARKETCAST_DEBUG": value}) is debug
    assert debug_from_env({}) is False


def test_marketcast_debug_false_keeps_the_one_line_and_a_bad_value_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_DEBUG", "false")  # used to turn debug on
    assert main(_app(ConfigError("--weights x: no such folder")), ["go"]) == 2
    assert capsys.readouterr().err == "error: --weights x: no such folder\n"
    monkeypatch.setenv("MARKETCAST_DEBUG", "TRUE")
    with pytest.raises(ConfigError):
        main(_app(ConfigError("--weights x: no such folder")), ["go"])
    monkeypatch.setenv("MARKETCAST_DEBUG", "verbose")
    assert main(_app(), ["go"]) == ExitCode.USAGE
    assert capsys.readouterr().err == ("error: MARKETCAST_DEBUG='verbose': use 1, true or yes to show tracebacks, "
                                       "0, false or no (or leave it unset) to hide them\n")


def _signalled_app(signum: int, cleaned: list, shield: bool = False) -> typer.Typer:
    """A command that receives ``signum`` from the OS part-way through its work and cleans up in ``finally``."""
    app = typer.Typer()

    @app.command()
    def go() -> None:
        try:
            if shield:
                with shielded():
                    os.kill(os.getpid(), signum)
                    for _ in range(1000):  # the handler has run by now; the shield holds the signal back
                        pass
                    cleaned.append("committed")
            else:
                os.kill(os.getpid(), signum)
                for _ in range(10**6):  # the handler raises at the next bytecode boundary
                    pass
                cleaned.append("not reached")
        finally:
            cleaned.append("cleaned up")

    @app.command()
    def other() -> None:
        """A second command, so that `go` is a subcommand as in marketcast."""

    return app


@pytest.mark.parametrize("signum,code,line", [
    (signal.SIGTERM, 143, "error: terminated (SIGTERM); temporary files removed\n"),
    (signal.SIGINT, 130, "error: interrupted\n"),
])
def test_a_signal_runs_the_cleanup_and_ends_with_its_code(capsys, signum, code, line):
    before = signal.getsignal(signum)
    cleaned: list = []
    assert run(_signalled_app(signum, cleaned), ["go"], debug=False) == code
    assert cleaned == ["cleaned up"]
    assert capsys.readouterr().err == line
    assert signal.getsignal(signum) is before  # the handlers of the caller are back


def test_a_shielded_commit_finishes_before_the_signal_ends_the_command(capsys):
    cleaned: list = []
    assert run(_signalled_app(signal.SIGTERM, cleaned, shield=True), ["go"], debug=False) == ExitCode.TERMINATED
    assert cleaned == ["committed", "cleaned up"]
    assert capsys.readouterr().err == "error: terminated (SIGTERM); temporary files removed\n"


def test_terminated_is_described_like_an_interrupt():
    assert describe(Terminated()) == ("terminated (SIGTERM); temporary files removed", ExitCode.TERMINATED)
    assert issubclass(Terminated, BaseException) and not issubclass(Terminated, Exception)


def test_a_signal_a_library_wrapped_is_still_the_signal():
    """Ray's C code turns a signal handler's exception into a SystemError raised from it."""
    try:
        try:
            raise Terminated()
        except Terminated as stop:
            raise SystemError("<cyfunction CoreWorker.wait> returned a result with an exception set") from stop
    except SystemError as wrapped:
        assert describe(wrapped) == ("terminated (SIGTERM); temporary files removed", ExitCode.TERMINATED)
    assert describe(SystemError("a bug")) is None


def test_the_error_a_library_makes_of_a_signal_still_ends_as_the_signal(capsys):
    """duckdb answers a signal during a query with its own RuntimeError("Query interrupted")."""
    import duckdb

    app = typer.Typer()

    @app.command()
    def go() -> None:
        # one thread: with duckdb's worker threads running the query, it saw the signal only 14 to 17 s later in
        # about half the tries (also with the signal blocked in them); on one thread, after 0.3 s in every one
        con = duckdb.connect(config={"threads": 1})
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()  # while duckdb runs the query
        con.execute("SELECT sum(range * 2) FROM range(4000000000)").fetchall()

    @app.command()
    def other() -> None:
        """A second command, so that `go` is a subcommand as in marketcast."""

    assert run(app, ["go"], debug=False) == ExitCode.TERMINATED
    assert capsys.readouterr().err == "error: terminated (SIGTERM); temporary files removed\n"
    assert describe(RuntimeError("Query interrupted")) is None  # no signal now: a bug like any other
