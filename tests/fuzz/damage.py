"""Damaged inputs: bar files, TOML sweep specs, trade configs and run-store files.

Every strategy returns bytes (or edits a copied folder) plus a list of labels naming what was done, so a
failing example says which damage caused it (labels are also hypothesis events).
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz.tables import SEPARATORS, Table, tables, write_csv, write_parquet

# --- bar files -------------------------------------------------------------------------------------------

HUGE = ("1e308", "-1e308", "1.7976931348623157e308", "1e309", "-1e309", "4.9e-324", "1e-308")
NONFINITE = ("NaN", "nan", "inf", "-inf", "Infinity", "-Infinity", "")
WRONG_TYPE = ("abc", "True", "2024-01-01", "1,000", "0x1F", "[1]", "None", "null", "1e", "--5", "\u00bd",
              "\uff11\uff12")
TZ_SUFFIX = ("", "Z", "+00:00", "+05:30", "-08:00", "+14:00", " UTC", " America/New_York", "+0100")


@dataclass(frozen=True)
class Damaged:
    data: bytes
    suffix: str
    labels: tuple[str, ...]


def _date_col(t: Table) -> int:
    for i, name in enumerate(t.header):
        if name.lower() in ("", "date", "timestamp", "time"):
            return i
    return 0


def _num_cols(t: Table) -> list[int]:
    d = _date_col(t)
    return [i for i in range(len(t.header)) if i != d] or [0]


def _set(t: Table, r: int, c: int, value: str) -> Table:
    rows = [list(row) for row in t.rows]
    rows[r][c] = value
    return replace(t, rows=tuple(map(tuple, rows)))


def _cell_damage(pool):
    def damage(t: Table, draw) -> Table:
        if not t.rows:
            return t
        c = draw(st.sampled_from(_num_cols(t)))
        rows = draw(st.lists(st.integers(0, len(t.rows) - 1), min_size=1, max_size=len(t.rows)))
        for r in rows:
            t = _set(t, r, c, draw(st.sampled_from(pool)))
        return t
    return damage


def _wrong_type_column(t: Table, draw) -> Table:
    """A whole column (dates included) of the wrong type."""
    c = draw(st.integers(0, len(t.header) - 1))
    value = draw(st.sampled_from(WRONG_TYPE + ("1.5", "0", "17040672000")))
    for r in range(len(t.rows)):
        t = _set(t, r, c, value)
    return t


def _duplicate_timestamps(t: Table, draw) -> Table:
    if not t.rows:
        return t
    r = draw(st.integers(0, len(t.rows) - 1))
    row = list(t.rows[r])
    if draw(st.booleans()):  # same time, other prices
        for c in _num_cols(t):
            try:
                row[c] = repr(float(row[c]) * 1.01)
            except ValueError:
                pass
    at = draw(st.integers(0, len(t.rows)))
    return replace(t, rows=t.rows[:at] + (tuple(row),) + t.rows[at:])


def _reverse_timestamps(t: Table, draw) -> Table:
    if draw(st.booleans()) or len(t.rows) < 3:
        return replace(t, rows=t.rows[::-1])
    a = draw(st.integers(0, len(t.rows) - 2))
    return replace(t, rows=t.rows[:a] + t.rows[a:][::-1])


def _mixed_time_zones(t: Table, draw) -> Table:
    d = _date_col(t)
    rows = [list(row) for row in t.rows]
    for row in rows:
        suffix = draw(st.sampled_from(TZ_SUFFIX))
        base = row[d].rstrip("Z")
        if "+" in base[10:] or base[10:].count("-") > 0:
            base = base[:19]
        if base.isdigit() and len(base) == 8:
            base = f"{base[:4]}-{base[4:6]}-{base[6:]}"
        elif base.isdigit():
            continue  # epoch numbers have no zone
        row[d] = base + suffix
    return replace(t, rows=tuple(map(tuple, rows)))


TABLE_DAMAGE = {
    "wrong type": _cell_damage(WRONG_TYPE),
    "wrong type column": _wrong_type_column,
    "duplicated timestamps": _duplicate_timestamps,
    "reversed timestamps": _reverse_timestamps,
    "nan/inf": _cell_damage(NONFINITE),
    "huge numbers": _cell_damage(HUGE),
    "mixed time zones": _mixed_time_zones,
}


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _extra_field(data: bytes, draw, sep: bytes) -> bytes:
    lines = _lines(data)
    i = draw(st.integers(0, max(0, len(lines) - 2)))
    lines[i] = lines[i] + sep + draw(st.sampled_from([b"1.0", b"", b"x", b'"a,b"']))
    return b"\n".join(lines)


def _unclosed_quote(data: bytes, draw, _sep: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    return data[:at] + b'"' + data[at:]


def _non_utf8(data: bytes, draw, _sep: bytes) -> bytes:
    if draw(st.booleans()):  # the whole file in another encoding
        encoding = draw(st.sampled_from(["utf-16", "utf-16-le", "cp1252", "latin-1"]))
        return data.decode("utf-8", "replace").encode(encoding, errors="replace")
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.sampled_from([b"\xff", b"\xe9", b"\xc3(", b"\x80\x81", b"\xed\xa0\x80", b"\x00"])) \
        + data[at:]


def _bom(data: bytes, draw, _sep: bytes) -> bytes:
    bom = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"]))
    return bom + (data[3:] if data.startswith(b"\xef\xbb\xbf") else data)


CSV_DAMAGE = {"extra field": _extra_field, "unclosed quote": _unclosed_quote, "non-UTF-8 bytes": _non_utf8,
              "BOM": _bom}


def _truncate(data: bytes, draw) -> bytes:
    return data[: draw(st.integers(0, max(0, len(data) - 1)))]


def _bit_flip(data: bytes, draw) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(out) - 1))
        out[i] ^= 1 << draw(st.integers(0, 7))
    return bytes(out)


BYTE_DAMAGE = {"truncated": _truncate, "bit flip": _bit_flip}


@st.composite
def damaged_bars(draw, parquet: bool | None = None) -> Damaged:
    """A valid table, damaged one to three ways, written as CSV or Parquet, maybe then cut or bit-flipped."""
    table = draw(tables())
    labels = []
    for name in draw(st.lists(st.sampled_from(sorted(TABLE_DAMAGE)), max_size=3, unique=True)):
        table = TABLE_DAMAGE[name](table, draw)
        labels.append(name)
    as_parquet = draw(st.booleans()) if parquet is None else parquet
    if as_parquet:
        data, suffix = write_parquet(replace(table, expected=None)), ".parquet"
    else:
        sep = draw(st.sampled_from(SEPARATORS))
        data, suffix = write_csv(table, sep, eol=draw(st.sampled_from(["\n", "\r\n"]))), ".csv"
        for name in draw(st.lists(st.sampled_from(sorted(CSV_DAMAGE)), max_size=2, unique=True)):
            data = CSV_DAMAGE[name](data, draw, sep.encode())
            labels.append(name)
    for name in draw(st.lists(st.sampled_from(sorted(BYTE_DAMAGE)), max_size=1)):
        data = BYTE_DAMAGE[name](data, draw)
        labels.append(name)
    return Damaged(data, suffix, tuple(labels) or ("valid",))


# --- TOML ---------------------------------------------------------------------------------------------------

class Raw(str):
    """Text written into TOML as it is (a broken value)."""


def toml_value(v) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is JSON's, but for \u escapes above the BMP
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v))


def toml_text(doc: dict) -> str:
    """Scalars first, then [tables] (nested ones as [a.b]) and [[arrays of tables]]."""
    def key(k: str) -> str:
        return k if k.replace("_", "").replace("-", "").isalnum() and k.isascii() else json.dumps(k)

    def emit(prefix: str, table: dict, out: list[str]) -> None:
        subs = []
        for k, v in table.items():
            if isinstance(v, dict) and not isinstance(v, Raw):
                subs.append((k, v))
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                subs.append((k, v))
            else:
                out.append(f"{key(k)} = {toml_value(v)}")
        for k, v in subs:
            name = f"{prefix}.{key(k)}" if prefix else key(k)
            if isinstance(v, list):
                for item in v:
                    out.append(f"\n[[{name}]]")
                    emit(name, item, out)
            else:
                out.append(f"\n[{name}]")
                emit(name, v, out)

    lines: list[str] = []
    emit("", doc, lines)
    return "\n".join(lines) + "\n"


WILD_VALUES = st.sampled_from([
    -1, 0, -(2 ** 63), 2 ** 63 - 1, 2 ** 64, 10 ** 30, -0.0, 1e308, float("inf"), float("-inf"), float("nan"),
    True, False, "", "abc", "../X", "1", "-1", [], [1, 2], ["a"], [[1]], {"a": 1}, {}, 0.5, 1.5, 3,
    Raw("1979-05-27T07:32:00Z"), Raw("1979-05-27"), Raw("07:32:00"), "\u00e9\u4e2d", "x" * 300,
])
BAD_SYMBOLS = ("../X", "..", "", "a/b", "/etc/passwd", "X\\Y", "CON", "sp 500", "\u00c4BC", ".hidden",
               "X" * 300, "~/X", "-X", "X.csv", "*", "NUL\x01")


@st.composite
def toml_damage(draw, doc: dict, paths: list[tuple[str, ...]], unknown_at: list[tuple[str, ...]]) -> tuple[str, dict]:
    """Damage a TOML document one to three ways: a value replaced (wrong type, negative, huge, nan), a key
    removed, an unknown key added; then, one time in five, the text itself (cut, a bad byte, a broken line)."""
    import copy

    doc = copy.deepcopy(doc)
    labels = []

    def at(path):
        table = doc
        for part in path[:-1]:
            table = table.setdefault(part, {}) if isinstance(table, dict) else {}
            if not isinstance(table, dict):
                return None
        return table

    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["value", "value", "value", "remove", "unknown"]))
        if kind == "unknown":
            path = draw(st.sampled_from(unknown_at)) + (draw(st.sampled_from(["bogus", "Windows", "seed ", "x.y"])),)
        else:
            path = draw(st.sampled_from(paths))
        table = at(path)
        if table is None:
            continue
        if kind == "remove":
            table.pop(path[-1], None)
        else:
            table[path[-1]] = draw(WILD_VALUES)
        labels.append(f"{kind} {'.'.join(path)}")
    text = toml_text(doc).encode()
    if draw(st.integers(0, 4)) == 0:
        how = draw(st.sampled_from(["truncated", "bit flip", "non-UTF-8", "broken line", "BOM"]))
        if how == "truncated":
            text = _truncate(text, draw)
        elif how == "bit flip":
            text = _bit_flip(text, draw)
        elif how == "non-UTF-8":
            text = _non_utf8(text, draw, b"")
        elif how == "BOM":
            text = b"\xef\xbb\xbf" + text
        else:
            lines = text.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = lines[i] + draw(st.sampled_from([b" = ", b"[", b'"', b" = 1 = 2", b"]]"]))
            text = b"\n".join(lines)
        labels.append(f"text {how}")
    return text, {"labels": labels or ["valid"]}


# --- run-store files -----------------------------------------------------------------------------------

STORE_DAMAGE = ("truncated", "bit flip", "zero bytes", "empty", "deleted", "garbage", "wrong JSON")


@st.composite
def store_damage(draw, store: Path) -> list[str]:
    """Damage one to three files of the store folder ``store`` (edited in place: a copy); returns labels."""
    labels = []
    for _ in range(draw(st.integers(1, 3))):
        files = sorted(p for p in store.rglob("*") if p.is_file())
        choices = files + sorted(p for p in store.iterdir() if p.is_dir())
        if not choices:
            break
        target = draw(st.sampled_from(choices))
        rel = str(target.relative_to(store))
        if target.is_dir():
            how = draw(st.sampled_from(["deleted", "emptied", "extra file"]))
            if how == "deleted":
                shutil.rmtree(target)
            elif how == "emptied":
                for p in target.iterdir():
                    p.unlink() if p.is_file() else shutil.rmtree(p)
            else:
                name = draw(st.sampled_from(["part-garbage.parquet", "run.json.tmp", ".lock", "notes.txt",
                                             "part-0.parquet"]))
                (target / name).write_bytes(draw(st.binary(max_size=64)))
            labels.append(f"{how} {rel}/")
            continue
        how = draw(st.sampled_from(STORE_DAMAGE))
        data = target.read_bytes()
        if how == "truncated":
            target.write_bytes(_truncate(data, draw))
        elif how == "bit flip":
            target.write_bytes(_bit_flip(data, draw))
        elif how == "zero bytes":
            at = draw(st.integers(0, max(0, len(data) - 1)))
            n = draw(st.integers(1, 512))
            target.write_bytes(data[:at] + b"\0" * n + data[at + n:])
        elif how == "empty":
            target.write_bytes(b"")
        elif how == "deleted":
            target.unlink()
        elif how == "garbage":
            target.write_bytes(draw(st.binary(min_size=1, max_size=200)))
        else:  # valid JSON of the wrong shape, or a value of the wrong type
            if target.suffix == ".json":
                try:
                    doc = json.loads(data)
                except ValueError:
                    doc = {}
                if isinstance(doc, dict) and doc and draw(st.booleans()):
                    key = draw(st.sampled_from(sorted(doc)))
                    doc[key] = draw(st.sampled_from([None, 3, -1, "x", [], {}, 1e308, "../../x"]))
                    how = f"wrong JSON {key}"
                else:
                    doc = draw(st.sampled_from([None, [], 3, "run", {"run_id": 3}, {}]))
                target.write_text(json.dumps(doc))
            else:
                target.write_text(draw(st.sampled_from(['{"a": 1}', "[]", "null"])))
        labels.append(f"{how} {rel}")
    return labels


def parquet_with_bad_pandas_metadata() -> Damaged:
    """Valid bars whose pandas metadata (the b"pandas" key of the schema) lacks index_columns: what a bit flip in
    that JSON's key does (found by the fuzzer: a KeyError out of pyarrow's pandas_compat)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.conftest import make_ohlcv

    table = pa.Table.from_pandas(make_ohlcv(12).reset_index())
    meta = json.loads(table.schema.metadata[b"pandas"])
    meta["index_colum\u0000s"] = meta.pop("index_columns")
    table = table.replace_schema_metadata({**table.schema.metadata, b"pandas": json.dumps(meta).encode()})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return Damaged(buffer.getvalue(), ".parquet", ("bad pandas metadata",))
