"""Input files are checked before anything opens them, and garbage is refused from its first rows.

A FIFO used to block ``data check`` forever; a symlink loop read as "no such file"; a header naming ``Close``
twice passed with the first column; 200 MB of text took 90 s and 2 GB to be refused at row 1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from marketcast.commands import main
from marketcast.data.load import load_bars
from marketcast.data.read import LARGE_CSV_BYTES, MAX_LINE_BYTES
from marketcast.errors import DataError
from tests.conftest import make_ohlcv

HEADER = "timestamp,open,high,low,close\n"


def _one_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _special(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "GOOG.csv"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        os.symlink(tmp_path / "B.csv", path)
        os.symlink(path, tmp_path / "B.csv")
    elif kind == "dangling":
        os.symlink(tmp_path / "gone.csv", path)
    elif kind == "device":
        os.symlink("/dev/null", path)
    elif kind == "folder":
        path.mkdir()
    return path


@pytest.mark.parametrize("kind, words", [
    ("fifo", "is a named pipe (FIFO), not a regular file"),
    ("loop", "is a symbolic link that loops"),
    ("dangling", "which does not exist; point it at a CSV or Parquet file"),
    ("device", "is a character device, not a regular file"),
    ("folder", "is a folder, not a regular file"),
])
def test_a_path_that_is_no_regular_file_is_one_line_exit_2_without_opening_it(tmp_path, capsys, kind, words):
    path = _special(tmp_path, kind)
    assert words in _one_line(capsys, ["data", "check", str(path)])
    out = tmp_path / "never"
    line = _one_line(capsys, ["backtest", "GOOG", "--data-dir", str(tmp_path), "--output-dir", str(out)])
    assert words in line and not out.exists()


def test_a_column_named_twice_is_refused_with_both_positions(tmp_path, capsys):
    frame = make_ohlcv(30)
    frame["Close "] = 2 * frame["close"]  # matched as 'close', like the loader matches names
    path = tmp_path / "DUP.csv"
    frame.to_csv(path)
    assert "column 'Close' appears twice (columns 5 and 7)" in _one_line(capsys, ["data", "check", str(path)])


def _large(path: Path, first: bytes, rest: bytes) -> Path:
    """A file over LARGE_CSV_BYTES: the header, ``first``, then ``rest`` repeated past the threshold."""
    with open(path, "wb") as fh:
        fh.write(HEADER.encode() + first)
        for _ in range(LARGE_CSV_BYTES // len(rest) + 1):
            fh.write(rest)
    return path


def test_a_large_garbage_file_is_refused_from_its_first_rows(tmp_path):
    # rows 1.. are text, and past them the bytes are not UTF-8: a whole-file read would name the encoding; the
    # head read names row 1's cell, so the file was refused before being read whole
    path = _large(tmp_path / "G.csv", b"2024-01-01,lorem,ipsum,dolor,sit\n" * 2000, b"\xff\xfe garbage\n" * 4096)
    with pytest.raises(DataError, match=r"row 1 \(line 2\), column 'open': 'lorem' is not a number"):
        load_bars(path)


def test_a_giant_line_is_refused_as_it_is_read(tmp_path):
    path = _large(tmp_path / "L.csv", b"", b"x" * (MAX_LINE_BYTES // 4))  # one line, no newline
    with pytest.raises(DataError, match=r"line 2 is longer than 1 MiB, so this is not a CSV of bars"):
        load_bars(path)


def test_a_large_good_file_still_loads_whole(tmp_path):
    path = tmp_path / "BIG.csv"
    make_ohlcv(150_000, freq="min").to_csv(path)
    assert path.stat().st_size > LARGE_CSV_BYTES
    assert load_bars(path, asset_class="crypto").frame.shape == (150_000, 5)
