"""Checked before any work: special files, duplicated columns, naive local times, huge grids and giant garbage,
run through the commands that read them (issue "Checked before any work").

Each keeps the harness's contract (exit 0, or 2/3 with one ``error:`` line; no traceback, no hang, no file outside
``out/``) and says the right thing: a FIFO, a device, a folder or a symlink that loops or dangles is named for
what it is (and never opened: a FIFO would block the reader forever); a column named twice is refused with both
positions; exchange-local 5-minute stock bars without a zone get one warning naming ``--timezone``, and none with
it; a grid over ``--max-cells`` is refused with its count; a large file of garbage is refused from its first rows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import event, given, note
from hypothesis import strategies as st

from marketcast.data.read import LARGE_CSV_BYTES
from tests.fuzz.harness import check, counted, fuzz_settings, run, sandbox

SYMBOL = "ZZZ"
SPECIAL = {"fifo": "is a named pipe (FIFO), not a regular file", "folder": "is a folder, not a regular file",
           "loop": "is a symbolic link that loops", "dangling": "which does not exist; point it at",
           "null device": "is a character device, not a regular file",
           "zero device": "is a character device, not a regular file"}


def _special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "loop":
        os.symlink(path.with_name("other" + path.suffix), path)
        os.symlink(path, path.with_name("other" + path.suffix))
    elif kind == "dangling":
        os.symlink(path.with_name("gone" + path.suffix), path)
    else:
        os.symlink("/dev/null" if kind == "null device" else "/dev/zero", path)


def _error(o) -> str:
    return next(line for line in o.err.splitlines() if line.startswith("error: "))


@fuzz_settings(ci=12, long=300)
@given(st.sampled_from(sorted(SPECIAL)), st.sampled_from([".csv", ".parquet"]),
       st.sampled_from(["data check", "backtest", "forecast", "sweep"]))
def test_a_special_file_is_named_and_never_opened(kind, suffix, command):
    counted("special files")
    event(f"{kind} via {command}")
    with sandbox() as root:
        folder = root / "in" / "bars"
        folder.mkdir()
        path = folder / f"{SYMBOL}{suffix if command != 'sweep' else '.toml'}"
        _special(path, kind)
        args = {"data check": ["data", "check", str(path)],
                "backtest": ["backtest", SYMBOL, "--data-dir", str(folder), "--windows", "3", "--samples", "8",
                             "--no-spa", "--output-dir", str(root / "out" / "bt")],
                "forecast": ["forecast", SYMBOL, "--data-dir", str(folder), "--samples", "8"],
                "sweep": ["sweep", str(path), "--local", "--store", str(root / "out" / "runs")]}[command]
        o = run(root, args, timeout=20)
        note(repr(o))
        check(o, {"kind": kind, "command": command}, codes=(2,))
        assert SPECIAL[kind] in _error(o), o.err


def _bars_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    return pd.DataFrame({"Date": pd.bdate_range("2021-01-04", periods=n).strftime("%Y-%m-%d"), "Open": close,
                         "High": close * 1.01, "Low": close * 0.99, "Close": close, "Volume": 1000})


@fuzz_settings(ci=15, long=400)
@given(st.integers(20, 200), st.integers(0, 2**16), st.sampled_from(["Date", "Open", "High", "Low", "Close",
                                                                        "Volume"]),
       st.sampled_from(["same", "lower", "upper", "padded"]), st.sampled_from([",", ";", "\t"]))
def test_a_column_named_twice_is_refused(n, seed, twice, variant, sep):
    counted("duplicated columns")
    event(f"{twice} twice ({variant})")
    frame = _bars_frame(n, seed)
    name = {"same": twice, "lower": twice.lower(), "upper": twice.upper(), "padded": f" {twice} "}[variant]
    doubled = pd.concat([frame, frame[[twice]].set_axis([name], axis=1)], axis=1)
    with sandbox() as root:
        path = root / "in" / f"{SYMBOL}.csv"
        path.write_text(doubled.to_csv(index=False, sep=sep))
        o = run(root, ["data", "check", str(path)])
        note(repr(o))
        check(o, {"n": n, "twice": twice, "variant": variant}, codes=(2,))
        assert f"column '{name.strip()}' appears twice" in _error(o), o.err


@fuzz_settings(ci=10, long=250)
@given(st.integers(0, 400), st.integers(2, 8), st.sampled_from(["5min", "15min", "30min"]), st.booleans())
def test_local_intraday_stock_times_warn_once_unless_their_zone_is_given(start, days, step, zone_given):
    counted("naive local times")
    from marketcast.data.calendar import calendar_for

    first = pd.Timestamp("2019-01-02") + pd.Timedelta(days=start)
    sessions = calendar_for("stock").sessions(first, first + pd.Timedelta(days=3 * days)).iloc[:days]
    stamps = pd.DatetimeIndex([t for o, c in zip(sessions["open"], sessions["close"])  # early closes included
                               for t in pd.date_range(o, c, freq=step, inclusive="left")])
    stamps = stamps.tz_convert("America/New_York").tz_localize(None)  # as an exchange-local export writes them
    close = 100 + np.cumsum(np.random.default_rng(start).normal(0, 0.05, len(stamps)))
    frame = pd.DataFrame({"timestamp": stamps.strftime("%Y-%m-%d %H:%M"), "open": close, "high": close + 0.1,
                          "low": close - 0.1, "close": close})
    with sandbox() as root:
        path = root / "in" / "AAPL.csv"
        path.write_text(frame.to_csv(index=False))
        zone = ["--timezone", "America/New_York"] if zone_given else []
        o = run(root, ["data", "check", str(path), "--asset-class", "stock", *zone])
        note(repr(o))
        check(o, {"start": str(first.date()), "days": days, "step": step, "zone": zone_given}, codes=(0,))
        warned = [line for line in o.err.splitlines() if "--timezone America/New_York" in line]
        event("warned" if warned else "no warning")
        assert len(warned) == (0 if zone_given else 1), o.err


@fuzz_settings(ci=15, long=400)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=4), st.integers(1, 3), st.integers(1, 200_000))
def test_a_grid_is_counted_from_its_axes_and_capped(lengths, symbols, max_cells):
    counted("huge grids")
    axes = ["seed", "fee", "slippage", "num_samples"][:len(lengths)]
    values = {"seed": lambda i: str(i), "fee": lambda i: f"{i / 1e7:.7f}", "slippage": lambda i: f"{i / 1e7:.7f}",
              "num_samples": lambda i: str(i + 8)}
    cells = int(np.prod(lengths)) * symbols
    event("over the cap" if cells > max_cells else "within the cap")
    names = ["SP500", "NASDAQ", "sp500x"][:symbols]
    text = f'name = "g"\n[data]\nsymbols = {names!r}\n[grid]\n'.replace("'", '"')
    text += "".join(f"{a} = [{', '.join(values[a](i) for i in range(n))}]\n" for a, n in zip(axes, lengths))
    with sandbox() as root:
        spec = root / "in" / "grid.toml"
        spec.write_text(text)
        if cells <= max_cells:  # under the cap the spec is planned: only a cheap check of the count itself
            from marketcast.sweep.spec import count_cells

            assert count_cells({a: [0] * n for a, n in zip(axes, lengths)}, [], tuple(names)) == cells
            return
        o = run(root, ["sweep", str(spec), "--local", "--max-cells", str(max_cells), "--store",
                       str(root / "out" / "runs")], timeout=5)
        note(repr(o))
        check(o, {"lengths": lengths, "symbols": symbols, "max_cells": max_cells}, codes=(2,))
        assert f"the grid has {cells:,} cells" in _error(o) and f"--max-cells {max_cells:,}" in _error(o)
        assert os.listdir(root / "out") == []  # refused from its count: no store, no planned cell


GARBAGE = {
    "text lines": b"lorem ipsum, dolor sit, amet consectetur, adipiscing, elit\n",
    "one long line": b"x" * 4096,
    "binary": bytes(range(256)),
    "numbers without dates": b"1,2,3,4,5\n",
}


@fuzz_settings(ci=6, long=120)
@given(st.sampled_from(sorted(GARBAGE)), st.integers(0, 50), st.sampled_from(["timestamp,open,high,low,close\n",
                                                                              "Date,Open,High,Low,Close,Volume\n"]))
def test_a_large_garbage_file_is_refused_from_its_first_rows(kind, good_rows, header):
    counted("giant garbage")
    event(kind)
    good = "".join(f"2021-01-{1 + i % 28:02d},1,2,0.5,1.5{',7' if 'Volume' in header else ''}\n"
                   for i in range(good_rows)).encode()
    chunk = GARBAGE[kind] * (2**20 // len(GARBAGE[kind]))
    with sandbox() as root:
        path = root / "in" / f"{SYMBOL}.csv"
        with open(path, "wb") as fh:
            fh.write(header.encode() + good)
            for _ in range(LARGE_CSV_BYTES // len(chunk) + 2):
                fh.write(chunk)
        o = run(root, ["data", "check", str(path)], timeout=10)
        note(repr(o))
        check(o, {"kind": kind, "good_rows": good_rows}, codes=(2,))
        named = re.search(r"\bline (\d+)", _error(o))
        assert named and int(named[1]) in (good_rows + 2, good_rows + 3), o.err  # the first line of garbage
