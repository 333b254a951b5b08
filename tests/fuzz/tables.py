"""Bar files for the fuzz tests: valid bars written in every way an export may write them, and mutations.

A :class:`BarFile` is the bytes of a CSV or Parquet file plus what a correct loader must do with it:
``expected`` (the bars it must return, for a valid file only re-encoded) and ``bad_line`` (the CSV line an
error about it must name, for an undecodable byte).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from tests.conftest import make_ohlcv

COLUMNS = ("timestamp", "open", "high", "low", "close", "volume")
HEADER_STYLES = {
    "yfinance": ("Date", "Open", "High", "Low", "Close", "Volume"),
    "alpaca": ("timestamp", "open", "high", "low", "close", "volume"),
    "upper": ("TIME", "OPEN", "HIGH", "LOW", "CLOSE", "VOLUME"),
    "index": ("", "Open", "High", "Low", "Close", "Volume"),  # pandas' unnamed index column
}
SEPARATORS = (",", ";", "\t", "|")
EPOCH = {"epoch_s": 10**9, "epoch_ms": 10**6, "epoch_us": 10**3, "epoch_ns": 1}
DATE_STYLES = ("iso", "iso_z", "iso_offset", "yyyymmdd", *EPOCH)
NASTY = ("", " ", "abc", "NaN", "nan", "inf", "-inf", "1e300", "-1e300", "1e-300", "-5", "0", "1e15", "1,5",
         "0x10", "\uff11\uff12", "\x00", "\u00e9", "9" * 400, "2018-13-45", "1704067200", "20240131", "-1",
         "99999-01-01", "True", '"', "1e", "--1", "2024-02-30", "1970-01-01", "12:00")


@dataclass(frozen=True)
class Table:
    """A bars table as text cells, before it is written as a file."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    expected: pd.DataFrame | None


@dataclass(frozen=True)
class BarFile:
    data: bytes
    suffix: str
    expected: pd.DataFrame | None = None
    bad_line: int | None = None


def _date_cell(ts: pd.Timestamp, style: str) -> str:
    if style == "iso":
        return ts.strftime("%Y-%m-%d") if ts == ts.normalize() else ts.strftime("%Y-%m-%d %H:%M:%S")
    if style == "iso_z":
        return ts.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == "iso_offset":
        return ts.tz_convert("America/New_York").isoformat()
    if style == "yyyymmdd":
        return ts.strftime("%Y%m%d")
    return str(ts.value // EPOCH[style])


@st.composite
def base_frames(draw, min_rows: int = 3, max_rows: int = 12) -> pd.DataFrame:
    """Valid bars: daily or hourly, a few rows, UTC index named timestamp."""
    n = draw(st.integers(min_rows, max_rows))
    freq = draw(st.sampled_from(["D", "h"]))
    start = draw(st.sampled_from(["2003-03-03", "2021-06-30", "2024-01-01"]))
    return make_ohlcv(n, start=start, seed=draw(st.integers(0, 5)), freq=freq)


@st.composite
def tables(draw) -> Table:
    """A valid table in any header style, date style and column order, with ignored extra columns."""
    frame = draw(base_frames())
    daily = bool((frame.index == frame.index.normalize()).all())
    style = draw(st.sampled_from([s for s in DATE_STYLES if daily or s != "yyyymmdd"]))
    names = list(draw(st.sampled_from(sorted(HEADER_STYLES.values()))))
    cols = [[_date_cell(ts, style) for ts in frame.index]] + [[repr(float(v)) for v in frame[c]] for c in COLUMNS[1:]]
    if draw(st.booleans()):
        names.append("Adj Close")
        cols.append([repr(float(v) * 0.98) for v in frame["close"]])
    order = list(range(len(names)))
    if names[0] != "":  # an unnamed index column stays first, as pandas writes it
        order = draw(st.permutations(order))
    header = tuple(names[i] for i in order)
    rows = tuple(tuple(cols[i][r] for i in order) for r in range(len(frame)))
    return Table(header, rows, frame)


def write_csv(table: Table, sep: str = ",", eol: str = "\n", bom: bool = False, decimal_comma: bool = False) -> bytes:
    def cell(text: str) -> str:
        if decimal_comma:
            text = text.replace(".", ",")
        return f'"{text}"' if sep in text or '"' in text or "\n" in text else text

    lines = [sep.join(cell(c) for c in table.header)] + [sep.join(cell(c) for c in row) for row in table.rows]
    return (b"\xef\xbb\xbf" if bom else b"") + (eol.join(lines) + eol).encode("utf-8")


def _typed(cells: list[str]) -> pd.Series:
    """A column as Parquet would hold it: numbers when every cell is one, else text."""
    numbers = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce")
    return numbers if numbers.notna().all() else pd.Series(cells, dtype=object)


def write_parquet(table: Table, date_type: str = "text", as_index: bool = False) -> bytes:
    frame = pd.DataFrame({name or "Date": _typed([r[i] for r in table.rows]) for i, name in enumerate(table.header)})
    if table.expected is not None and date_type != "text":
        key = next(n or "Date" for n in table.header if n in ("Date", "timestamp", "TIME", ""))
        stamps = table.expected.index
        frame[key] = {
            "utc": stamps, "naive": stamps.tz_localize(None), "ms": stamps.tz_localize(None).astype("datetime64[ms]"),
            **{name: stamps.asi8 // unit for name, unit in EPOCH.items()},
        }[date_type]
        if as_index:
            frame = frame.set_index(key)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=as_index)
    return buffer.getvalue()


@st.composite
def valid_files(draw) -> BarFile:
    """Valid bars, re-encoded: a correct loader returns exactly ``expected``."""
    table = draw(tables())
    if draw(st.booleans()):
        date_type = draw(st.sampled_from(["text", "utc", "naive", "ms", *EPOCH]))
        return BarFile(write_parquet(table, date_type, as_index=draw(st.booleans())), ".parquet", table.expected)
    sep = draw(st.sampled_from(SEPARATORS))
    data = write_csv(table, sep, eol=draw(st.sampled_from(["\n", "\r\n"])), bom=draw(st.booleans()),
                     decimal_comma=sep == ";" and draw(st.booleans()))
    return BarFile(data, ".csv", table.expected)


# --- mutations ---------------------------------------------------------------------------------------------

def _drop_column(t: Table, i: int, _draw) -> Table:
    i %= len(t.header)
    return replace(t, header=t.header[:i] + t.header[i + 1:], rows=tuple(r[:i] + r[i + 1:] for r in t.rows))


def _swap_headers(t: Table, i: int, draw) -> Table:
    i, j = i % len(t.header), draw(st.integers(0, len(t.header) - 1))
    names = list(t.header)
    names[i], names[j] = names[j], names[i]
    return replace(t, header=tuple(names))


def _set_cell(t: Table, i: int, draw) -> Table:
    if not t.rows:
        return t
    r, c = i % len(t.rows), draw(st.integers(0, len(t.header) - 1))
    value = draw(st.sampled_from(NASTY) | st.text(max_size=12))
    rows = [list(row) for row in t.rows]
    rows[r][c] = value
    return replace(t, rows=tuple(map(tuple, rows)))


def _scale_row(t: Table, i: int, draw) -> Table:
    """Multiply one row's numbers (a price jump, a missing split adjustment, 1e300)."""
    if not t.rows:
        return t
    r, factor = i % len(t.rows), draw(st.sampled_from([1e-300, 1e-6, 1e6, 1e300]))
    dates = {k for k, name in enumerate(t.header) if name.lower() in ("", "date", "timestamp", "time")}
    row = [repr(float(c) * factor) if k not in dates and _is_number(c) else c for k, c in enumerate(t.rows[r])]
    return replace(t, rows=t.rows[:r] + (tuple(row),) + t.rows[r + 1:])


def _duplicate_row(t: Table, i: int, _draw) -> Table:
    if not t.rows:
        return t
    r = i % len(t.rows)
    return replace(t, rows=t.rows[:r + 1] + (t.rows[r],) + t.rows[r + 1:])


def _swap_rows(t: Table, i: int, draw) -> Table:
    if not t.rows:
        return t
    rows = list(t.rows)
    a, b = i % len(rows), draw(st.integers(0, len(rows) - 1))
    rows[a], rows[b] = rows[b], rows[a]
    return replace(t, rows=tuple(rows))


def _shuffle_rows(t: Table, _i: int, draw) -> Table:
    return replace(t, rows=tuple(draw(st.permutations(t.rows))))


def _header_only(t: Table, _i: int, _draw) -> Table:
    return replace(t, rows=())


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


MUTATIONS = (_drop_column, _swap_headers, _set_cell, _set_cell, _scale_row, _duplicate_row, _swap_rows,
             _shuffle_rows, _header_only)


@st.composite
def mutated_files(draw) -> BarFile:
    """Valid tables after one to three mutations, as CSV (possibly cut short or with a bad byte) or Parquet."""
    table = draw(tables())
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(MUTATIONS))(table, draw(st.integers(0, 100)), draw)
    table = replace(table, expected=None)
    if draw(st.booleans()):
        return BarFile(write_parquet(table), ".parquet")
    sep = draw(st.sampled_from(SEPARATORS + (" ",)))
    data = write_csv(table, sep)
    damage = draw(st.sampled_from(["none", "truncate", "bad_byte"]))
    if damage == "truncate":
        return BarFile(data[: draw(st.integers(0, len(data)))], ".csv")
    if damage == "bad_byte" and table.rows:
        lines = data.split(b"\n")
        line = draw(st.integers(2, len(table.rows) + 1))  # a data line, 1-based
        at = draw(st.integers(0, len(lines[line - 1])))
        bad = draw(st.sampled_from([b"\xff", b"\xe9", b"\xc3("]))
        lines[line - 1] = lines[line - 1][:at] + bad + lines[line - 1][at:]
        return BarFile(b"\n".join(lines), ".csv", bad_line=line)
    return BarFile(data, ".csv")


def garbage_files() -> st.SearchStrategy[BarFile]:
    """Arbitrary bytes named .csv or .parquet, and valid Parquet cut short."""
    raw = st.builds(BarFile, st.binary(max_size=600), st.sampled_from([".csv", ".parquet"]))
    cut = st.builds(lambda t, k: BarFile(write_parquet(t)[: k], ".parquet"), tables(), st.integers(0, 4000))
    return raw | cut


def check_bars_contract(bars, max_price: float, max_volume: float) -> None:
    """What every successful load guarantees, whatever the file held."""
    frame = bars.frame
    assert len(frame) >= 1
    assert isinstance(frame.index, pd.DatetimeIndex) and str(frame.index.tz) == "UTC"
    assert (np.diff(frame.index.asi8) > 0).all()
    o, h, lo, c = (frame[k].to_numpy() for k in ("open", "high", "low", "close"))
    for values in (o, h, lo, c):
        assert values.dtype == np.float64 and np.isfinite(values).all()
        assert ((values > 0) & (values <= max_price)).all(), values
    assert (h >= np.maximum(o, c) * (1 - 1e-9)).all() and (lo <= np.minimum(o, c) * (1 + 1e-9)).all()
    if "volume" in frame:
        volume = frame["volume"].to_numpy()
        assert np.isfinite(volume).all() and (volume >= 0).all() and (volume <= max_volume).all()
