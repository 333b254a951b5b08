"""A run's results read back from the store, grouped as its reports are written: ``marketcast report RUN``
renders them with the backtest's own writers, so the files equal what ``marketcast backtest`` wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from marketcast.backtest.engine import SymbolResult
from marketcast.runs.codec import decode
from marketcast.runs.store import RunStore
from marketcast.runs.views import axes, cells, label


def cell_results(store: RunStore, run_id: str) -> dict[str, list[tuple[pd.Series, SymbolResult]]]:
    """The run's finished cells (their row and their result), grouped by their settings (one group per grid
    point; the key is empty for a run without axes), in plan order."""
    found = cells(store, run_id)
    names = axes([found])
    records = store.query("SELECT cell_id, record FROM cells WHERE status = 'ok'", run_ids=[run_id])
    by_cell = dict(zip(records["cell_id"], records["record"]))
    groups: dict[str, list[tuple[pd.Series, SymbolResult]]] = {}
    for _, cell in found[found["status"] == "ok"].iterrows():
        key = label(cell, names, with_symbol=False)
        groups.setdefault(key, []).append((cell, decode(by_cell[cell["cell_id"]])))
    return groups


def folder(output_dir: str | Path, key: str) -> Path:
    """Where the reports of one group go: ``output_dir``, or a sub-folder per grid point when it has axes."""
    return Path(output_dir) / _folder_name(key) if key else Path(output_dir)


def _folder_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=,-]+", "_", key.replace(" ", "__"))
