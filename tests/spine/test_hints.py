"""Each bad input gets the message that names its real cause: a NaN fee is no number (not "negative"), a
non-ASCII symbol names its character, day-first dates are read day first (not "sort the file by time"), and a
horizon past the history is bounded by the history."""

from __future__ import annotations

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data.load import load_bars
from marketcast.errors import DataError
from tests.conftest import make_ohlcv


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_nan_fee_is_no_number(tmp_path, capsys):
    line = _error(capsys, ["backtest", "--fee", "nan", "--output-dir", str(tmp_path / "o")])
    assert line == "error: Invalid value for '--fee': nan is not a finite number. (see 'marketcast backtest --help')"


def test_a_non_ascii_symbol_names_its_character(tmp_path, capsys):
    line = _error(capsys, ["backtest", "ÄPFEL", "--data-dir", str(tmp_path), "--output-dir", str(tmp_path / "o")])
    assert "symbol 'ÄPFEL' is not a symbol: 'Ä' is not an ASCII letter, digit or one of '. _ ^ = -'" in line


@pytest.mark.parametrize("fmt", ["%d/%m/%Y", "%d.%m.%Y", "%m/%d/%Y"])
def test_day_first_and_month_first_dates_read_as_the_iso_file(tmp_path, fmt):
    frame = make_ohlcv(60)  # 60 days from 2024-01-01: days past the 12th appear, so the order is decidable
    iso, other = tmp_path / "ISO.csv", tmp_path / "OTHER.csv"
    frame.to_csv(iso)
    written = frame.copy()
    written.index = written.index.strftime(fmt)
    written.to_csv(other)
    pd.testing.assert_frame_equal(load_bars(other).frame, load_bars(iso).frame)


def test_a_column_mixing_day_first_and_month_first_is_refused_naming_both(tmp_path):
    path = tmp_path / "MIX.csv"
    path.write_text("Date,Open,High,Low,Close\n13/01/2024,1,2,0.5,1.5\n01/14/2024,1,2,0.5,1.5\n")
    with pytest.raises(DataError, match=r"row 2 \(line 3\), column 'timestamp': '01/14/2024' puts the day second "
                                        r"but '13/01/2024' puts it first"):
        load_bars(path)


def test_a_horizon_past_the_history_is_bounded_by_it(tmp_path, capsys):
    make_ohlcv(40).to_csv(tmp_path / "AAA.csv")
    line = _error(capsys, ["forecast", "AAA", "--data-dir", str(tmp_path), "--asset-class", "crypto",
                           "--horizon", "5000"])  # under the documented limit (10,000): the history bounds it
    assert line == ("error: --horizon 5,000 is more than the 40 bars of AAA's history; forecast at most 40 bars "
                    "ahead")


@pytest.mark.parametrize("args, code", [
    (["status"], 2), (["orders"], 2),  # a folder to read: a file there is bad input
    (["replay", "--symbols", "SP500", "--start", "2015-01-02", "--end", "2015-01-09"], 3),  # one to create: exit 3
])
def test_a_state_folder_that_is_a_file_is_named_so(tmp_path, capsys, args, code):
    state = tmp_path / "state"
    state.write_text("x")
    assert main(["trade", *args, "--state-dir", str(state)]) == code  # the README's exit-code table
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and f"--state-dir {state} is a file, not a state folder" in err[0], err
    assert captured.out == "" and state.read_text() == "x"  # refused before the exit rule is announced


def test_control_characters_in_an_echoed_name_are_escaped(tmp_path, capsys):
    """An ANSI escape in a file name (or a value) must not recolour or move the user's terminal: the error line
    shows it written out, and stays one line."""
    name = tmp_path / "a\x1b[31mRED\x1b[0m\tb\x07.csv"
    line = _error(capsys, ["data", "check", str(name)])
    assert "\x1b" not in line and "\x07" not in line and "\t" not in line
    assert "a\\x1b[31mRED\\x1b[0m\\tb\\x07.csv: no such file" in line


def test_weights_that_read_as_a_folder_and_a_repo_id_name_both(tmp_path, capsys, monkeypatch):
    """``weights/toto`` is a folder path and a valid owner/name: when it is neither here nor in the hub cache
    (offline), one line says both, with the download command."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    line = _error(capsys, ["backtest", "--model", "toto", "--weights", "weights/toto", "--windows", "3",
                           "--output-dir", str(tmp_path / "o")])
    assert f"no folder 'weights/toto' here ({tmp_path})" in line
    assert "and no hub repo 'weights/toto' in the Hugging Face cache" in line and "hf download weights/toto" in line


@pytest.mark.parametrize("limit", [20, 37, 60])
def test_a_long_library_message_is_cut_at_a_word_end(limit):
    from marketcast.errors import first_line

    text = "Cannot find an appropriate cached snapshot folder for the specified revision on the local disk"
    cut = first_line(RuntimeError(text), limit)
    assert len(cut) <= limit and cut.endswith("...")
    assert text.startswith(cut[:-3]) and text[len(cut) - 3] == " "  # the cut falls before a space
    assert first_line(RuntimeError(text), len(text)) == text
