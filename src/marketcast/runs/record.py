"""Recording a ``marketcast backtest`` in the run store: the backtest CLI calls :func:`record_backtest`
through its after-run hook (the root CLI installs it), so the backtest never imports this layer. Imported
by the CLI at start-up, so the heavy imports wait until a run is recorded."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from marketcast.backtest.engine import SymbolResult
from marketcast.data.bars import Bars
from marketcast.fileio import new_run_id
from marketcast.runs.cells import Cell, digest

__all__ = ["new_run_id", "now_iso", "record_backtest"]


def now_iso() -> str:
    """UTC now to the microsecond: runs are listed in this order, and two runs can start within a second."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def record_backtest(results: Sequence[SymbolResult], bars: Sequence[Bars], options: dict,
                    run_id: str | None = None, store: str | Path | None = None) -> str | None:
    """Write one run of kind ``backtest`` (a cell per symbol); returns its id (``run_id``, the one its output
    folder is named by, else a new one), None when the store is off.

    ``options`` are the model and data options of the command (``model``, ``weights``, ``device``,
    ``dtype``, ``compile``, ``asset_class``, ``data_dir``); the rest of each cell is the result's config.
    """
    from marketcast.runs.rows import RunContext, code_version, fingerprint, ok_rows  # pyarrow, matplotlib: lazy
    from marketcast.runs.store import RunStore, store_root

    root = store_root(store)
    if root is None or not results:
        return None
    opts = {k: (str(Path(v).resolve()) if k == "data_dir" and v is not None else v) for k, v in options.items()}
    cells = [Cell(symbol=r.symbol, config=r.config, **opts) for r in results]
    ids = [c.cell_id for c in cells]
    ctx = RunContext(run_id=run_id or new_run_id("backtest"), kind="backtest", spec_hash=digest(ids),
                     code_version=code_version())
    rows = [row for i, (cell, result, b) in enumerate(zip(cells, results, bars))
            for row in ok_rows(ctx, cell, i, result, fingerprint(b), seconds=None)]
    runs = RunStore(root)
    with runs.new_run(ctx.run_id):  # a full disk under the part leaves no run listed as planned
        runs.write_info(ctx.run_id, {"kind": ctx.kind, "created_at": now_iso(), "spec_hash": ctx.spec_hash,
                                     "code_version": ctx.code_version, "cells_total": len(cells),
                                     "spec": {"symbols": [c.symbol for c in cells], **cells[0].settings()}})
        runs.write_rows(ctx.run_id, rows)
        runs.write_summary(ctx.run_id, rows)  # what `runs list` shows, without reading the part
    return ctx.run_id
