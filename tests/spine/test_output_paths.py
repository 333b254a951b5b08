"""Outputs are checked before any work: a file where the output folder should be, a folder that cannot be
created or written, a plot path under a file: one line, exit 3, nothing left (a backtest used to run 11 s
first, then say exit 2)."""

from __future__ import annotations

import pytest

from marketcast.commands import main
from marketcast.errors import StateError
from marketcast.fileio import check_writable


def _state_error(capsys, argv) -> str:
    assert main(argv) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_file_as_output_folder_is_refused_before_the_data_is_read(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    # the symbol does not exist: had the data been read first, this would be exit 2 naming the symbol
    line = _state_error(capsys, ["backtest", "NOSUCH", "--output-dir", str(blocker)])
    assert line == f"error: --output-dir {blocker}: exists and is not a folder; choose another folder"
    assert blocker.read_text() == "x"


def test_a_folder_under_a_file_and_an_unwritable_folder_are_refused(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    line = _state_error(capsys, ["backtest", "--output-dir", str(tmp_path / "afile" / "out")])
    assert f"{tmp_path / 'afile'} is not a folder, so it cannot be created" in line
    line = _state_error(capsys, ["backtest", "--output-dir", "/proc/nope/out"])
    assert line.startswith("error: --output-dir /proc/nope/out: cannot write in /proc (")
    line = _state_error(capsys, ["forecast", "SP500", "--plot", "/proc/nope/fan.png"])
    assert line.startswith("error: --plot /proc/nope/fan.png: cannot write in /proc (")


def test_a_writable_path_leaves_nothing_behind(tmp_path):
    assert check_writable(tmp_path / "a" / "b", "--output-dir") == tmp_path / "a" / "b"
    assert check_writable(tmp_path / "fan.png", "--plot", folder=False) == tmp_path / "fan.png"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StateError, match="is a folder; give a file name"):
        check_writable(tmp_path, "--plot", folder=False)
