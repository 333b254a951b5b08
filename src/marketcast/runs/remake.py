"""Re-make a run's reports from the store: the results are rebuilt from their records and rendered by the
backtest's own writer, so the files equal what ``marketcast backtest`` wrote for the same cells."""

from __future__ import annotations

import re
from pathlib import Path

from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.report import write_outputs
from marketcast.errors import ConfigError
from marketcast.runs.codec import decode
from marketcast.runs.store import RunStore
from marketcast.runs.views import axes, cells, label


def results(store: RunStore, run_id: str) -> dict[str, list[SymbolResult]]:
    """The run's finished cells as results, grouped by their settings (one group per grid point; the key
    is empty for a run without axes), in plan order."""
    found = cells(store, run_id)
    names = axes([found])
    records = store.query("SELECT cell_id, record FROM cells WHERE status = 'ok'", run_ids=[run_id])
    by_cell = dict(zip(records["cell_id"], records["record"]))
    groups: dict[str, list[SymbolResult]] = {}
    for _, cell in found[found["status"] == "ok"].iterrows():
        key = label(cell, names, with_symbol=False)
        groups.setdefault(key, []).append(decode(by_cell[cell["cell_id"]]))
    return groups


def _folder_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=,-]+", "_", key.replace(" ", "__"))


def remake_reports(store: RunStore, run_id: str, output_dir: str | Path, plots: bool = False) -> list[Path]:
    """Write the reports of ``run_id`` into ``output_dir`` (a sub-folder per grid point when it has axes)."""
    groups = results(store, run_id)
    if not groups:
        raise ConfigError(f"run {run_id} has no finished cells; there is nothing to report")
    written = []
    for key, group in groups.items():
        folder = Path(output_dir) / _folder_name(key) if key else Path(output_dir)
        written += write_outputs(group, folder, plots)
    return written
