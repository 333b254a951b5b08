"""One error path: library errors a user can fix become one line and a documented exit code; a bug keeps
its traceback; --debug shows every traceback; warnings are one line each."""

from __future__ import annotations

import errno
import os
import sqlite3
import warnings

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer

from marketcast.errors import ConfigError, DataWarning, ExitCode, HaltedError
from marketcast.failures import describe, run


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
