"""Malformed CSV lines and clashing Parquet indexes (issue "Nothing half-written"): each is one line naming
the file, the line (and its text) and the fix, or with ``--on-bad-line skip`` is dropped with one warning
that counts them, the other rows loading as if those lines were never there. Symbols never leave --data-dir."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data import load_bars
from marketcast.errors import ConfigError, DataError, DataWarning
from tests.conftest import make_ohlcv

HEADER_FIELDS = 6  # timestamp, open, high, low, close, volume


def _lines(n: int = 10) -> tuple[pd.DataFrame, list[str]]:
    """Weekday bars (no asset-class warning) and their CSV lines; line L of the file is ``lines[L - 1]``."""
    frame = make_ohlcv(n, freq="B")
    return frame, frame.to_csv().splitlines()


def _write(path, lines: list[str]):
    path.write_text("\n".join(lines) + "\n")
    return path


def _error(path, **kwargs) -> str:
    with pytest.raises(DataError) as info:
        load_bars(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    return message


def _shown(line: str) -> str:
    """A line quoted the way the message quotes it: its first 77 characters and '...' (80 in all)."""
    return repr(line[:77] + "...")


def test_an_extra_field_names_the_line_its_text_and_the_fix(tmp_path):
    _, lines = _lines()
    lines[3] += ",9"  # line 4 = row 3
    path = _write(tmp_path / "bad.csv", lines)
    message = _error(path)
    assert f"line 4 has 7 fields where the header has {HEADER_FIELDS}: {_shown(lines[3])}" in message
    assert message.endswith("; fix or delete that line, or pass --on-bad-line skip")
    assert len(_shown(lines[3])) == 80 + 2 and len(lines[3]) > 80  # truncated to 80 characters, in quotes


def test_an_extra_field_on_the_first_row_is_not_taken_for_an_index(tmp_path):
    _, lines = _lines()
    lines[1] += ",9"  # pandas alone would read the first column of every row as an index
    message = _error(_write(tmp_path / "first.csv", lines))
    assert "line 2 has 7 fields" in message


def test_a_short_line_is_quoted_whole(tmp_path):
    path = _write(tmp_path / "short.csv", ["timestamp,open,high,low,close", "2024-01-01,1,2,0.5,1.5",
                                           "2024-01-02,1,2,0.5,1.5,7", "2024-01-03,1,2,0.5,1.5"])
    assert "line 3 has 6 fields where the header has 5: '2024-01-02,1,2,0.5,1.5,7';" in _error(path)


def test_an_unclosed_quote_names_its_line(tmp_path):
    _, lines = _lines()
    lines[5] = lines[5].replace(",", ',"', 1)  # line 6 opens a quote that runs to the end of the file
    message = _error(_write(tmp_path / "quote.csv", lines))
    assert f"line 6 opens a quote it never closes: {_shown(lines[5])}; fix or delete that line" in message


def test_line_numbers_count_blank_lines_before_the_header(tmp_path):
    _, lines = _lines()
    lines[4] += ",1,2"
    path = tmp_path / "blank.csv"
    path.write_text("\n\n" + "\n".join(lines) + "\n")  # the header is on line 3
    assert "line 7 has 8 fields" in _error(path)


def test_a_malformed_header_is_an_error_even_when_skipping(tmp_path):
    _, lines = _lines()
    lines[0] = 'timestamp,"open,high,low,close,volume'
    path = _write(tmp_path / "header.csv", lines)
    message = _error(path, on_bad_line="skip")
    assert "line 1 opens a quote it never closes" in message and "fix the header line" in message


def _three_bad(tmp_path):
    frame, lines = _lines(12)
    lines[2] += ",9"  # line 3: row 2
    lines[5] = lines[5].replace(",", ',"', 1)  # line 6: row 5
    lines[8] += ",1,2"  # line 9: row 8
    return frame, _write(tmp_path / "three.csv", lines)


def test_skip_drops_the_malformed_lines_with_one_warning(tmp_path):
    frame, path = _three_bad(tmp_path)
    with pytest.warns(DataWarning) as caught:
        bars = load_bars(path, on_bad_line="skip")
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert message.startswith(f"{path}: skipped 3 malformed lines (--on-bad-line skip), the first line 3 has 7 "
                              "fields where the header has 6")
    kept = frame.drop(frame.index[[1, 4, 7]])  # rows 2, 5 and 8 (1-based) were on lines 3, 6 and 9
    assert len(bars) == 9 and (bars.frame.index == kept.index).all()
    np.testing.assert_allclose(bars.frame.to_numpy(), kept.to_numpy(), rtol=1e-12)


def test_skip_keeps_the_line_numbers_of_later_rows(tmp_path):
    _, lines = _lines()
    lines[2] += ",9"  # line 3 skipped
    cells = lines[7].split(",")
    cells[4] = "-1"  # the close of line 8
    lines[7] = ",".join(cells)
    path = _write(tmp_path / "later.csv", lines)
    with pytest.warns(DataWarning, match="skipped 1 malformed line "):
        message = _error(path, on_bad_line="skip")
    assert "row 7 (line 8), column 'close': price -1 is not positive" in message


def test_skip_in_a_file_whose_index_column_has_no_name(tmp_path):
    frame = make_ohlcv(8, freq="B")
    lines = frame.to_csv().splitlines()
    lines[0] = lines[0].removeprefix("timestamp,")  # 'open,...': every row has one cell more than the header
    lines[1] += ",9"  # and the first row one more still
    path = _write(tmp_path / "noname.csv", lines)
    assert "line 2 has 7 fields where the other rows have 6" in _error(path)
    with pytest.warns(DataWarning, match="skipped 1 malformed line "):
        bars = load_bars(path, on_bad_line="skip")
    assert (bars.frame.index == frame.index[1:]).all()
    np.testing.assert_allclose(bars.frame["close"].to_numpy(), frame["close"].to_numpy()[1:], rtol=1e-12)


def test_a_clean_file_loads_the_same_either_way(tmp_path):
    frame, lines = _lines()
    path = _write(tmp_path / "clean.csv", lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = load_bars(path), load_bars(path, on_bad_line="skip")
    assert a.frame.equals(b.frame) and (a.frame.index == frame.index).all()


def test_on_bad_line_rejects_other_values(tmp_path):
    _, lines = _lines()
    with pytest.raises(ConfigError, match="--on-bad-line 'warn': choose one of error, skip"):
        load_bars(_write(tmp_path / "x.csv", lines), on_bad_line="warn")


# --- Parquet indexes ---------------------------------------------------------------------------------------

def test_a_datetime_index_named_like_a_column_is_the_timestamp_when_no_column_is(tmp_path):
    frame = make_ohlcv(10, freq="B")
    path = tmp_path / "close_index.parquet"
    frame.rename_axis("close").to_parquet(path)  # the times are in an index called 'close'
    bars = load_bars(path)
    assert (bars.frame.index == frame.index).all()
    np.testing.assert_allclose(bars.frame["close"].to_numpy(), frame["close"].to_numpy(), rtol=1e-15)


def test_a_datetime_index_beside_a_timestamp_column_is_refused(tmp_path):
    frame = make_ohlcv(10, freq="B")
    frame["timestamp"] = frame.index  # the index is named 'timestamp' too
    path = tmp_path / "both.parquet"
    frame.to_parquet(path)
    message = _error(path)
    assert "its index 'timestamp' has the name of a column" in message
    assert "df.reset_index(drop=True).to_parquet" in message and "line" not in message


def test_a_number_index_named_like_a_column_is_refused(tmp_path):
    out = make_ohlcv(10, freq="B").reset_index()
    out.index = pd.Index(np.arange(100, 110), name="Close")  # any case: the loader reads 'Close' as 'close'
    path = tmp_path / "close_numbers.parquet"
    out.to_parquet(path)
    assert "its index 'Close' has the name of a column" in _error(path)


def test_row_numbers_and_alpacas_multiindex_still_load(tmp_path):
    frame = make_ohlcv(10, freq="B")
    out = frame.reset_index()
    out.index = pd.RangeIndex(10, name="close")  # plain row numbers: dropped, whatever their name
    out.to_parquet(tmp_path / "rows.parquet")
    alpaca = frame.reset_index().assign(symbol="AAPL").set_index(["symbol", "timestamp"])
    alpaca.to_parquet(tmp_path / "alpaca.parquet")
    for name in ("rows", "alpaca"):
        bars = load_bars(tmp_path / f"{name}.parquet")
        assert (bars.frame.index == frame.index).all(), name
        np.testing.assert_allclose(bars.frame["close"].to_numpy(), frame["close"].to_numpy(), rtol=1e-15)
    assert load_bars(tmp_path / "alpaca.parquet").symbol == "AAPL"


# --- the commands ------------------------------------------------------------------------------------------

def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_data_check_names_the_line_in_one_line_and_exits_2(tmp_path, capsys):
    _, lines = _lines()
    lines[3] += ",9"
    path = _write(tmp_path / "bad.csv", lines)
    code, out, err = _run(capsys, "data", "check", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {path}: line 4 has 7 fields") and "--on-bad-line skip" in err
    code, out, err = _run(capsys, "data", "check", str(path), "--on-bad-line", "skip")
    assert code == 0 and "OK" in out
    assert err.strip().splitlines() == [f"warning: {path}: skipped 1 malformed line (--on-bad-line skip), the "
                                        f"first line 4 has 7 fields where the header has 6: {_shown(lines[3])}"]


def test_on_bad_line_is_declared_once_for_every_command_that_reads_bars():
    from marketcast.commands.options import OnBadLine
    from tests.spine.test_conventions import _options

    shared = OnBadLine.__metadata__[0]
    for path in ("backtest", "forecast", "data check"):
        option = _options(path)["--on-bad-line"]
        assert (option.opts, option.help, option.default) == (["--on-bad-line"], shared.help, "error"), path


def _data_dir(tmp_path):
    """tmp/D/AAPL.csv with one malformed line, and a valid tmp/SECRET.csv one folder up."""
    folder = tmp_path / "D"
    folder.mkdir()
    frame, lines = _lines(60)
    lines[10] += ",1"
    _write(folder / "AAPL.csv", lines)
    frame.to_csv(tmp_path / "SECRET.csv")
    return folder


def test_backtest_and_forecast_take_on_bad_line(tmp_path, capsys):
    folder = _data_dir(tmp_path)
    small = ("--windows", "3", "--samples", "8", "--context", "20", "--no-spa")
    out_dir = tmp_path / "out"
    code, _, err = _run(capsys, "backtest", "--data-dir", str(folder), "AAPL", *small, "--output-dir", str(out_dir))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "line 11 has 7 fields" in err, err
    assert not out_dir.exists()
    code, _, err = _run(capsys, "backtest", "--data-dir", str(folder), "AAPL", *small, "--output-dir", str(out_dir),
                        "--on-bad-line", "skip")
    assert code == 0 and err.count("skipped 1 malformed line (--on-bad-line skip), the first line 11") == 1, err
    code, _, err = _run(capsys, "forecast", "AAPL", "--data-dir", str(folder), "--samples", "8")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "line 11 has 7 fields" in err, err
    code, out, err = _run(capsys, "forecast", "AAPL", "--data-dir", str(folder), "--samples", "8",
                          "--on-bad-line", "skip")
    assert code == 0 and "AAPL baseline forecast" in out and "skipped 1 malformed line" in err


@pytest.mark.parametrize("command", ["backtest", "forecast"])
def test_a_symbol_cannot_reach_outside_the_data_dir(tmp_path, capsys, monkeypatch, command):
    folder = _data_dir(tmp_path)
    monkeypatch.chdir(folder)  # '../SECRET' is no file here either: it can only be read as a symbol
    out_dir = tmp_path / "out"
    args = ["--output-dir", str(out_dir)] if command == "backtest" else []
    code, out, err = _run(capsys, command, "--data-dir", str(folder), "../SECRET", *args)
    # SECRET.csv holds valid bars: read, the command would succeed
    assert code == 2 and out == "" and not out_dir.exists()
    assert err.strip().splitlines() == ["error: symbol '../SECRET' is not a symbol: '/' is not an ASCII letter, "
                                        "digit or one of '. _ ^ = -'; name the file and the symbol with ASCII "
                                        "letters, digits and '. _ ^ = -' (such as BRK.B, ^GSPC, EURUSD=X)"]
