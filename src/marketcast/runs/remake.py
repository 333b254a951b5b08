"""A run's results read back from the store, grouped as its reports are written: ``marketcast report RUN``
renders them with the backtest's own writers, so the files equal what ``marketcast backtest`` wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from marketcast.backtest.engine import SymbolResult
from marketcast.runs.codec import decode
from marketcast.runs.rows import with_stored_selection
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
        groups.setdefault(key, []).append((cell, with_stored_selection(decode(record), cell)))
    return groups


def folder(output_dir: str | Path, key: str, by_model: bool = False) -> Path:
    """Where the reports of one group go: ``output_dir``, or a sub-folder per grid point when it has axes;
    ``by_model`` (a ``models compare`` run, which lists each model once): a sub-folder named by the model alone,
    ``baseline`` rather than ``model=baseline__weights=None``."""
    model = re.search(r"(?:^| )model=(\S+)", key) if by_model else None
    if model:
        return Path(output_dir) / _folder_name(model.group(1))
    return Path(output_dir) / _folder_name(key) if key else Path(output_dir)


def _folder_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=,-]+", "_", key.replace(" ", "__"))
