"""The loader cases of issue 19: each bad file is one line naming file, row and fix; each odd but valid
export (epoch dates, semicolons, a decimal comma, Parquet units) loads to the same bars."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from marketcast.data import load_bars
from marketcast.errors import ConfigError, DataError, DataWarning
from tests.conftest import make_ohlcv


def _expect(path, *fragments, **kwargs):
    with pytest.raises(DataError) as info:
        load_bars(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def _same(bars, frame):
    assert bars.frame.index.dtype == "datetime64[ns, UTC]"
    assert (bars.frame.index == frame.index).all()
    np.testing.assert_allclose(bars.frame[["open", "high", "low", "close"]].to_numpy(),
                               frame[["open", "high", "low", "close"]].to_numpy(), rtol=1e-12)


def test_header_only_csv_is_one_line(tmp_path):
    path = tmp_path / "empty.csv"
    make_ohlcv(5).iloc[:0].to_csv(path)
    _expect(path, "holds no bars")


def test_header_only_parquet_is_one_line(tmp_path):
    path = tmp_path / "empty.parquet"
    make_ohlcv(5).iloc[:0].to_parquet(path)
    _expect(path, "holds no bars")


def test_1e300_in_the_last_row_is_refused_with_its_row(tmp_path):
    frame = make_ohlcv(30)
    frame.iloc[-1, frame.columns.get_loc("close")] = 1e300
    frame.iloc[-1, frame.columns.get_loc("high")] = 1e300
    path = tmp_path / "huge.csv"
    frame.to_csv(path)
    _expect(path, "row 30 (line 31)", "column 'high'", "1e+300", "outside 1e-12 .. 1e+15")


def test_volume_beyond_float32_use_is_refused(tmp_path):
    frame = make_ohlcv(10)
    frame.iloc[4, frame.columns.get_loc("volume")] = 1e25
    path = tmp_path / "vol.csv"
    frame.to_csv(path)
    _expect(path, "row 5 (line 6)", "column 'volume'", "above 1e+18")


def test_a_price_jump_is_a_warning_naming_the_row(tmp_path):
    frame = make_ohlcv(20, freq="B")  # weekdays: no asset-class warning besides the jump
    frame.iloc[12:, :4] *= 20.0  # a 1:20 reverse split not adjusted for
    path = tmp_path / "split.csv"
    frame.to_csv(path)
    with pytest.warns(DataWarning) as caught:
        bars = load_bars(path)
    assert len(bars) == 20 and len(caught) == 1
    message = str(caught[0].message)
    ratio = frame["open"].iloc[12] / frame["close"].iloc[11]
    assert "row 13 (line 14)" in message and "column 'high'" in message and "--max-jump 5" in message
    assert f"{frame['high'].iloc[12] / frame['close'].iloc[11]:.3g}x" in message and ratio > 19
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_bars(path, max_jump=25.0)  # the threshold is configurable: no warning at 25x


@pytest.mark.parametrize("unit,scale", [("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1)])
def test_epoch_integers_are_read_by_magnitude(tmp_path, unit, scale):
    frame = make_ohlcv(12, freq="h")
    for suffix in ("csv", "parquet"):
        out = frame.reset_index()
        out["timestamp"] = frame.index.asi8 // scale
        path = tmp_path / f"epoch_{unit}.{suffix}"
        out.to_csv(path, index=False) if suffix == "csv" else out.to_parquet(path)
        _same(load_bars(path), frame)


def test_yyyymmdd_integers_are_dates(tmp_path):
    frame = make_ohlcv(10)
    out = frame.reset_index()
    out["timestamp"] = frame.index.strftime("%Y%m%d").astype(int)
    path = tmp_path / "ymd.parquet"
    out.to_parquet(path)
    _same(load_bars(path), frame)


def test_small_integers_are_refused_with_the_fix(tmp_path):
    out = make_ohlcv(10).reset_index()
    out["timestamp"] = np.arange(1, 11)  # row numbers, not dates
    path = tmp_path / "ints.parquet"
    out.to_parquet(path)
    _expect(path, "column 'timestamp'", "neither epoch seconds", "ISO 8601")


def test_one_epoch_outlier_is_named(tmp_path):
    out = make_ohlcv(10).reset_index()
    out["timestamp"] = out["timestamp"].astype("int64") // 10**9
    out.loc[6, "timestamp"] = 5
    path = tmp_path / "outlier.csv"
    out.to_csv(path, index=False)
    _expect(path, "row 7 (line 8)", "5 is not epoch seconds")


def test_parquet_millisecond_dates_become_nanoseconds(tmp_path):
    frame = make_ohlcv(10)
    out = frame.reset_index()
    out["timestamp"] = out["timestamp"].dt.tz_localize(None).astype("datetime64[ms]")
    path = tmp_path / "ms.parquet"
    out.to_parquet(path)
    _same(load_bars(path), frame)


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_other_separators_are_sniffed(tmp_path, sep):
    frame = make_ohlcv(10)
    path = tmp_path / "sep.csv"
    frame.to_csv(path, sep=sep)
    _same(load_bars(path), frame)


def test_semicolon_csv_with_decimal_comma(tmp_path):
    frame = make_ohlcv(10)
    path = tmp_path / "excel.csv"
    frame.to_csv(path, sep=";", decimal=",")
    _same(load_bars(path), frame)


def test_an_unknown_separator_is_named(tmp_path):
    path = tmp_path / "spaces.csv"
    make_ohlcv(5).to_csv(path, sep=" ")
    _expect(path, "line 1 holds a single column", "separate the columns with ','")


def test_non_utf8_byte_names_its_line(tmp_path):
    data = make_ohlcv(12).to_csv().encode()
    at = data.index(b"2024-01-10")
    path = tmp_path / "latin.csv"
    path.write_bytes(data[:at] + b"\xe9" + data[at:])
    _expect(path, "line 11 (row 10), character 1", "byte 0xe9 is not UTF-8", "save the file as UTF-8")


def test_blank_lines_keep_line_numbers(tmp_path):
    lines = make_ohlcv(8).to_csv().splitlines()
    lines.insert(3, "")  # a blank line 4
    bad = lines[6].split(",")
    bad[2] = "abc"  # the high of line 7 = row 6, counting the blank line
    lines[6] = ",".join(bad)
    path = tmp_path / "blank.csv"
    path.write_text("\n".join(lines) + "\n")
    _expect(path, "row 6 (line 7)", "column 'high'", "'abc' is not a number")


def test_parquet_errors_name_the_row_group(tmp_path):
    frame = make_ohlcv(12).reset_index()
    frame.loc[9, "low"] = -1.0
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=4)
    message = _expect(path, "row 10 (row group 2)", "column 'low'", "not positive")
    assert "line" not in message


def test_a_damaged_row_group_is_named(tmp_path):
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(make_ohlcv(12).reset_index(), preserve_index=False), buffer,
                   row_group_size=4, compression="snappy")
    data = bytearray(buffer.getvalue())
    chunk = pq.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(1).column(1)
    start = chunk.data_page_offset
    data[start + 8: start + chunk.total_compressed_size] = b"\xff" * (chunk.total_compressed_size - 8)
    path = tmp_path / "damaged.parquet"
    path.write_bytes(bytes(data))
    _expect(path, "row group 1 (rows 5-8) cannot be read", "export it again")


def _with_duplicate(tmp_path):
    frame = make_ohlcv(10).reset_index()
    repeat = frame.iloc[[6]].assign(close=frame.loc[6, "close"] * 1.001, high=frame.loc[6, "high"] * 1.001)
    out = pd.concat([frame.iloc[:7], repeat, frame.iloc[7:]]).reset_index(drop=True)  # row 8 repeats row 7
    path = tmp_path / "dup.csv"
    out.to_csv(path, index=False)
    return path, frame, repeat


def test_duplicate_timestamp_error_names_the_flag(tmp_path):
    path, _, _ = _with_duplicate(tmp_path)
    _expect(path, "row 8 (line 9)", "duplicate timestamp", "--on-duplicate first|last")


@pytest.mark.parametrize("keep", ["first", "last"])
def test_on_duplicate_keeps_one_bar_with_a_warning(tmp_path, keep):
    path, frame, repeat = _with_duplicate(tmp_path)
    with pytest.warns(DataWarning, match=rf"dropped 1 bar\(s\) whose timestamp repeats \(kept the {keep}\)"):
        bars = load_bars(path, on_duplicate=keep)
    assert len(bars) == 10 and (bars.frame.index == frame["timestamp"]).all()
    expected = frame.loc[6, "close"] if keep == "first" else repeat["close"].iloc[0]
    assert bars.frame["close"].iloc[6] == pytest.approx(expected, rel=1e-15)


def test_on_duplicate_rejects_other_values(tmp_path):
    path, _, _ = _with_duplicate(tmp_path)
    with pytest.raises(ConfigError, match="--on-duplicate 'mean'"):
        load_bars(path, on_duplicate="mean")


def test_rows_of_another_symbol_do_not_shift_row_numbers(tmp_path):
    a, b = make_ohlcv(6, seed=1).reset_index(), make_ohlcv(6, seed=2).reset_index()
    b.loc[4, "close"] = -3.0
    rows = pd.concat([a.assign(symbol="AAA"), b.assign(symbol="BBB")]).sort_values("timestamp", kind="stable")
    path = tmp_path / "two.csv"
    rows.to_csv(path, index=False)
    line = 2 + int(np.flatnonzero((rows["symbol"] == "BBB").to_numpy())[4])  # BBB's 5th row in the file
    _expect(path, f"(line {line})", "column 'close'", symbol="BBB")
