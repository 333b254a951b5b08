"""A run's results read back from the store, grouped as its reports are written: ``marketcast report RUN``
renders them with the backtest's own writers, so the files equal what ``marketcast backtest`` wrote."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pandas as pd

from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.overfit import SelectionStats
from marketcast.runs.codec import decode
from marketcast.runs.store import RunStore
from marketcast.runs.overview import WF_RETURNS, label, run_axes


def cell_results(store: RunStore, run_id: str,
                 symbol: str | None = None) -> dict[str, list[tuple[pd.Series, SymbolResult]]]:
    """The run's finished cells (their row and their result), grouped by their settings (one group per grid
    point; the key is empty for a run without axes), in plan order; ``symbol``: only that symbol's cells (the
    filter is pushed into the Parquet scan)."""
    names = run_axes(store, [run_id])
    columns = [c for c in store.columns([run_id]) if c != WF_RETURNS]
    if "record" not in columns:
        return {}
    listing = ", ".join(f'"{c}"' for c in columns)
    where, params = ("AND symbol = ?", [symbol]) if symbol is not None else ("", [])
    found = store.query(f"SELECT {listing} FROM cells WHERE status = 'ok' {where} ORDER BY cell_index", params,
                        run_ids=[run_id])
    records = found.pop("record")
    groups: dict[str, list[tuple[pd.Series, SymbolResult]]] = {}
    for (_, cell), record in zip(found.iterrows(), records):
        key = label(cell, names, with_symbol=False)
        result = decode(record)
        stored = stored_selection(cell)
        if stored is not None:  # the figures the backtest computed: no SPA bootstrap or CSCV run again
            result.__dict__["overfit"] = stored
        groups.setdefault(key, []).append((cell, result))
    return groups


def _plain(value, kind: str):
    """A stored column's value as the field's type: NULL/NaN -> None where the field allows it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if "None" not in kind:
            raise ValueError("a required figure is missing")
        return None
    for name, cast in (("int", int), ("float", float), ("str", str)):
        if kind.startswith(name):
            return cast(value)
    raise ValueError(f"no reading for {kind}")


def stored_selection(cell: pd.Series) -> SelectionStats | None:
    """The cell's multiple-testing figures read back from its ``selection.*`` columns (the cell's
    ``result.overfit`` when it was stored); None when a field is missing (a store written before the field
    existed): the report then computes them again from the record."""
    try:
        return SelectionStats(**{f.name: _plain(cell[f"selection.{f.name}"], str(f.type))
                                 for f in dataclasses.fields(SelectionStats)})
    except (KeyError, ValueError):
        return None


def folder(output_dir: str | Path, key: str) -> Path:
    """Where the reports of one group go: ``output_dir``, or a sub-folder per grid point when it has axes."""
    return Path(output_dir) / _folder_name(key) if key else Path(output_dir)


def _folder_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=,-]+", "_", key.replace(" ", "__"))
