"""A bars file to a raw table of cells, with the :class:`Source` that names its rows in messages.

CSV: UTF-8 (a BOM is fine), the separator sniffed from the header line (``,`` ``;`` tab ``|``; a decimal
comma is read when the separator is not a comma); a column with any cell that is no number stays text, for
the loader to name that cell. Blank lines are skipped but still counted, so
a row is named by its line in the file. A malformed line (more cells than the other rows, a quote it never
closes) is named with its line and text; ``on_bad_line="skip"`` drops such lines instead, with one warning.
Parquet: read row group by row group, so a damaged file names the group that cannot be read; its index is
read as the timestamp when it is one, and refused when it would clash with a column.
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from pathlib import Path

import pandas as pd

from marketcast.data.validate import Source
from marketcast.errors import ConfigError, DataError, DataWarning, first_line
from marketcast.paths import input_file

SUFFIXES = (".csv", ".parquet", ".pq")
ON_BAD_LINE = ("error", "skip")
#: Column names (lower case) read as the bar times, the first found wins.
TIME_NAMES = ("timestamp", "date", "datetime", "time")
_SHOWN = 80  # characters of a malformed line quoted in its message
SEPARATORS = {",": "','", ";": "';'", "\t": "tab", "|": "'|'"}
_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d+,\d+\s*$")


#: A CSV larger than this has its first rows read and checked before the whole file is (:func:`large_csv`).
LARGE_CSV_BYTES = 8 << 20
#: Rows of a large CSV checked first; a line longer than MAX_LINE_BYTES is no row of bars.
HEAD_ROWS = 1000
MAX_LINE_BYTES = 1 << 20


def large_csv(path: Path) -> bool:
    """Whether ``path`` is a CSV big enough that garbage in it should be refused from its first rows, before the
    whole file is held in memory (200 MB of text used to take 90 s and 2 GB to be refused at row 1)."""
    return path.suffix.lower() == ".csv" and path.is_file() and path.stat().st_size > LARGE_CSV_BYTES


def read_table(path: Path, on_bad_line: str = "error", head: int | None = None) -> tuple[pd.DataFrame, Source]:
    """The file's cells (CSV: text; Parquet: its own types) and how to name their rows.

    ``on_bad_line``: ``error`` (default) names a CSV's first malformed line; ``skip`` drops them with a warning.
    ``head``: read only a CSV's first ``head`` lines (header included), each at most MAX_LINE_BYTES.
    """
    if on_bad_line not in ON_BAD_LINE:
        raise ConfigError(f"--on-bad-line {on_bad_line!r}: choose one of {', '.join(ON_BAD_LINE)}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")
    input_file(path, DataError, "a CSV or Parquet file of OHLCV bars")
    return _read_csv(path, on_bad_line, head) if suffix == ".csv" else _read_parquet(path)


def _head(path: Path, lines: int) -> bytes:
    """The first ``lines`` lines of ``path``, read one bounded line at a time: a line longer than MAX_LINE_BYTES
    is refused as soon as it is seen."""
    out = []
    with open(path, "rb") as fh:
        for number in range(1, lines + 1):
            line = fh.readline(MAX_LINE_BYTES + 1)
            if len(line) > MAX_LINE_BYTES:
                raise DataError(f"{path}: line {number} is longer than {MAX_LINE_BYTES >> 20} MiB, so this is not a "
                                "CSV of bars; export the bars with a header line and one row per bar")
            if not line:
                break
            out.append(line)
    return b"".join(out)


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


def _read_csv(path: Path, on_bad_line: str = "error", head: int | None = None) -> tuple[pd.DataFrame, Source]:
    try:
        raw = path.read_bytes() if head is None else _head(path, head)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror}); check the path and its permissions") from None
    text = _decode(path, raw)
    body = text.lstrip("\r\n")
    header_line = text[: len(text) - len(body)].count("\n") + 1
    if not body.strip():
        raise DataError(f"{path}: is empty; export the bars with a header line and one row per bar")
    if "\x00" in body:
        line = header_line + body.count("\n", 0, body.index("\x00"))
        raise DataError(f"{path}: line {line} holds a NUL byte, so this is not a text CSV; export the bars as CSV")
    sep = sniff_separator(body.splitlines()[0])
    _check_names(path, body.splitlines()[0], sep, header_line)
    frame = _parse_csv(path, body, sep, header_line, on_bad_line)
    source = Source(str(path), "csv", first_line=header_line)
    blank = frame.isna().all(axis=1).to_numpy()
    if blank.any():
        frame, source = frame[~blank].reset_index(drop=True), source.keep(~blank)
    if sep != ",":  # a decimal comma leaves number columns as text: '1,5' -> '1.5'
        for name in frame.columns[frame.dtypes == object]:
            col = frame[name].astype("string")
            frame[name] = col.where(~col.str.match(_DECIMAL_COMMA, na=False), col.str.replace(",", ".", regex=False))
    return frame, source


def _check_names(path: Path, header: str, sep: str, line: int) -> None:
    """Refuse a header naming one column twice (pandas would rename the second ``Close.1`` and the loader read
    the first without a word); names compare as the loader matches them, blank names are pandas' to number."""
    try:
        names = next(csv.reader([header], delimiter=sep))
    except csv.Error:
        return  # a header that cannot be split is named by _parse_csv
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        key = _column_key(name)
        if key and key in seen:
            raise DataError(f"{path}: line {line}: column {name.strip()!r} appears twice (columns {seen[key]} and "
                            f"{position}); keep one of them or rename the other")
        seen.setdefault(key, position)


def _pandas_csv(body: str, sep: str) -> tuple[pd.DataFrame | None, Exception | None]:
    """pandas' table of ``body`` (None and its error when it refuses); an index pandas made is kept for the
    caller to judge."""
    try:
        return pd.read_csv(io.StringIO(body), sep=sep, skip_blank_lines=False), None
    except (pd.errors.ParserError, ValueError) as exc:
        return None, exc


def _refused(path: Path, exc: Exception, sep: str, header_line: int) -> DataError:
    """pandas' own words, with its line renumbered to the file's, when no single line is to blame."""
    detail = first_line(exc).split("C error: ")[-1]
    detail = re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) + header_line - 1}", detail)
    return DataError(f"{path}: {detail}; every row needs the header's columns, separated by {SEPARATORS[sep]}")


def _parse_csv(path: Path, body: str, sep: str, header_line: int, on_bad_line: str) -> pd.DataFrame:
    """The table of ``body``. Lines are looked at one by one only when pandas refuses the text or makes an
    index of a first row that has a cell too many: a malformed line is named, or (``skip``) blanked, which
    keeps every other line's number, and counted in one warning."""
    frame, failure = _pandas_csv(body, sep)
    if frame is not None and isinstance(frame.index, pd.RangeIndex):
        return frame
    lines = re.split(r"\r\n|\r|\n", body)  # pandas' line ends
    bad, wide = _malformed(lines, sep)
    if not bad:
        if failure is not None:
            raise _refused(path, failure, sep, header_line)
        return frame.reset_index()  # every row has one cell more than the header names: an unnamed index
    index, problem = bad[0]
    first = f"line {header_line + index} {problem}: {_shown(lines[index])}"
    if index == 0:
        raise DataError(f"{path}: {first}; fix the header line (the column names)")
    if on_bad_line == "error":
        raise DataError(f"{path}: {first}; fix or delete that line, or pass --on-bad-line skip")
    for i, _ in bad:
        lines[i] = ""  # a blank line: dropped below, still counted
    if wide:  # name the unnamed index column: pandas finds it only when the first row is not blank
        lines[0] = sep + lines[0]
    frame, failure = _pandas_csv("\n".join(lines), sep)
    if failure is not None:
        raise _refused(path, failure, sep, header_line)
    warnings.warn(DataWarning(f"{path}: skipped {len(bad)} malformed line{'s' if len(bad) != 1 else ''} "
                              f"(--on-bad-line skip), the first {first}"), stacklevel=2)
    return frame


def _cells(line: str, sep: str) -> int | str:
    """How many cells pandas splits one line into, or what keeps it from being split (a quote never closed)."""
    try:
        rows = list(csv.reader([line.rstrip("\r"), "\x01"], delimiter=sep))
    except csv.Error as exc:
        return f"cannot be split into fields ({first_line(exc)})"
    return len(rows[0]) if len(rows) == 2 else "opens a quote it never closes"  # an open quote swallows "\x01"


def _malformed(lines: list[str], sep: str) -> tuple[list[tuple[int, str]], bool]:
    """(index into ``lines``, what is wrong) of each malformed line, and whether rows are wide. A row should have
    the header's cells, or one more when most rows have one more (wide: an export whose index has no name)."""
    header = _cells(lines[0], sep)
    if isinstance(header, str):
        return [(0, header)], False
    counts = {i: _cells(line, sep) for i, line in enumerate(lines[1:], start=1) if line.strip()}
    width = header + (2 * sum(1 for n in counts.values() if n == header + 1) > len(counts))
    bad = [(i, n if isinstance(n, str) else f"has {n} fields where the header has {header}" if width == header
            else f"has {n} fields where the other rows have {width}")
           for i, n in counts.items() if isinstance(n, str) or n > width]
    return bad, width > header


def _shown(line: str) -> str:
    """A line as a message quotes it: its first characters, in quotes."""
    line = line.rstrip("\r")
    return repr(line if len(line) <= _SHOWN else line[: _SHOWN - 3] + "...")


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
    except (pa.ArrowException, ValueError, TypeError, KeyError) as exc:  # KeyError: damaged pandas metadata
        raise DataError(f"{path}: its columns cannot be read as a table ({first_line(exc)}); export the bars "
                        "again with plain number and timestamp columns") from None
    return _index_as_columns(path, frame), Source(str(path), "parquet", tuple(starts))


def _column_key(name) -> str:
    """A column name as the loader matches it (:func:`marketcast.data.load._normalise_columns`)."""
    return str(name).strip().lower().replace(" ", "_")


def _is_time(level: pd.Index) -> bool:
    return level.inferred_type in ("datetime64", "datetime", "date")


def _index_as_columns(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """A Parquet file's pandas index as columns: it may hold what we need (yfinance's Date, alpaca-py's
    (symbol, timestamp) MultiIndex). A datetime-like index is the timestamp when no column is; a plain row
    number is dropped; any other index named like a column is refused, as which to use cannot be guessed."""
    index = frame.index
    if isinstance(index, pd.RangeIndex):  # pandas' default row numbers, whatever their name
        return frame.reset_index(drop=True)
    keys = {_column_key(c) for c in frame.columns}
    levels = [index.get_level_values(i) for i in range(index.nlevels)]
    names = list(index.names)
    if not keys.intersection(TIME_NAMES) and (at := next((i for i, v in enumerate(levels) if _is_time(v)), None)) \
            is not None:
        names[at] = "timestamp"
    if all(name is None for name in names) and not any(_is_time(v) for v in levels):
        return frame.reset_index(drop=True)  # unnamed and not times: row labels, not data
    clash = next((n for n in names if n is not None and _column_key(n) in keys), None)
    if clash is not None:
        raise DataError(f"{path}: its index {str(clash)[:40]!r} has the name of a column, so which one to read is "
                        "unclear; write the file again without that index (pandas: "
                        "df.reset_index(drop=True).to_parquet) or rename it")
    try:
        return frame.set_axis(index.set_names(names)).reset_index()
    except ValueError as exc:  # an unnamed level pandas would call 'index' or 'level_0' and a column has that name
        raise DataError(f"{path}: its index cannot become a column ({first_line(exc)}); write the file again "
                        "without that index (pandas: df.reset_index(drop=True).to_parquet)") from None
