"""A bars file to a raw table of cells, with the :class:`Source` that names its rows in messages.

CSV: UTF-8 (a BOM is fine), the separator sniffed from the header line (``,`` ``;`` tab ``|``; a decimal
comma is read when the separator is not a comma); a column with any cell that is no number stays text, for
the loader to name that cell. Blank lines are skipped but still counted, so
a row is named by its line in the file.
Parquet: read row group by row group, so a damaged file names the group that cannot be read.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from marketcast.data.validate import Source
from marketcast.errors import DataError, first_line

SUFFIXES = (".csv", ".parquet", ".pq")
SEPARATORS = {",": "','", ";": "';'", "\t": "tab", "|": "'|'"}
_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d+,\d+\s*$")


def read_table(path: Path) -> tuple[pd.DataFrame, Source]:
    """The file's cells (CSV: text; Parquet: its own types) and how to name their rows."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")
    if not path.exists():
        raise DataError(f"{path}: no such file; pass a CSV or Parquet file of OHLCV bars")
    if path.is_dir():
        raise DataError(f"{path}: is a folder; pass a CSV or Parquet file of OHLCV bars")
    return _read_csv(path) if suffix == ".csv" else _read_parquet(path)


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataError(f"{path}: line {line} (row {line - 1}), character {column}: byte 0x{raw[exc.start]:02x} is "
                        "not UTF-8; save the file as UTF-8 (Excel: 'CSV UTF-8')") from None


def sniff_separator(header: str) -> str:
    """The separator the header line uses most (outside quotes); a comma when it has none of them."""
    counts = dict.fromkeys(SEPARATORS, 0)
    quoted = False
    for char in header:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] else ","


def _read_csv(path: Path) -> tuple[pd.DataFrame, Source]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror}); check the path and its permissions") from None
    text = _decode(path, raw)
    body = text.lstrip("\r\n")
    first_line = text[: len(text) - len(body)].count("\n") + 1  # the header's line
    if not body.strip():
        raise DataError(f"{path}: is empty; export the bars with a header line and one row per bar")
    if "\x00" in body:
        line = first_line + body.count("\n", 0, body.index("\x00"))
        raise DataError(f"{path}: line {line} holds a NUL byte, so this is not a text CSV; export the bars as CSV")
    sep = sniff_separator(body.splitlines()[0])
    try:
        frame = pd.read_csv(io.StringIO(body), sep=sep, skip_blank_lines=False)
    except (pd.errors.ParserError, ValueError) as exc:
        detail = first_line(exc).split("C error: ")[-1]
        detail = re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) + first_line - 1}", detail)
        raise DataError(f"{path}: {detail}; every row needs the header's columns, separated by "
                        f"{SEPARATORS[sep]}") from None
    if not isinstance(frame.index, pd.RangeIndex):  # more cells than header names: pandas made an index of them
        frame = frame.reset_index()
    source = Source(str(path), "csv", first_line=first_line)
    blank = frame.isna().all(axis=1).to_numpy()
    if blank.any():
        frame, source = frame[~blank].reset_index(drop=True), source.keep(~blank)
    if sep != ",":  # a decimal comma leaves number columns as text: '1,5' -> '1.5'
        for name in frame.columns[frame.dtypes == object]:
            col = frame[name].astype("string")
            frame[name] = col.where(~col.str.match(_DECIMAL_COMMA, na=False), col.str.replace(",", ".", regex=False))
    return frame, source


def _read_parquet(path: Path) -> tuple[pd.DataFrame, Source]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({first_line(exc)}); export the bars again "
                        "(pandas: DataFrame.to_parquet)") from None
    tables, starts, row = [], [], 0
    for group in range(file.num_row_groups):
        rows = file.metadata.row_group(group).num_rows
        try:
            tables.append(file.read_row_group(group))
        except (pa.ArrowException, OSError) as exc:
            raise DataError(f"{path}: row group {group} (rows {row + 1}-{row + rows}) cannot be read "
                            f"({first_line(exc)}); the file is damaged, export it again") from None
        starts.append(row)
        row += rows
    try:
        table = pa.concat_tables(tables) if tables else file.schema_arrow.empty_table()
        frame = table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise DataError(f"{path}: its columns cannot be read as a table ({first_line(exc)}); export the bars "
                        "again with plain number and timestamp columns") from None
    # a named index (yfinance's Date, alpaca-py's (symbol, timestamp) MultiIndex) holds columns we need
    if isinstance(frame.index, pd.DatetimeIndex) or any(name is not None for name in frame.index.names):
        frame = frame.reset_index()
    frame.index = pd.RangeIndex(len(frame))
    return frame, Source(str(path), "parquet", tuple(starts))
