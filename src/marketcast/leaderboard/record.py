"""The leaderboard as one run of the run store: a cell per model x symbol, written with the backtest
recorder's own pieces (:mod:`marketcast.runs.record`, :mod:`marketcast.runs.rows`), so ``runs show`` and
``runs compare`` read it like any run.

Its kind is ``leaderboard``: a grid over the model axis, so ``runs show`` counts the models as trials of one
selection and deflates the best cell's Sharpe ratio (:func:`marketcast.runs.overview.selection`), like a sweep's.
``run.json`` keeps the leaderboard's own rows (skill, trading, cost, weights) under ``spec.leaderboard``, so
``marketcast report RUN`` puts the table on the tearsheet without running a model again, and buy and hold's row
under ``spec.benchmark``."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from marketcast.data.bars import Bars
from marketcast.leaderboard.compare import ModelRun


def record_leaderboard(runs: Sequence[ModelRun], rows: Sequence[dict], bars: Sequence[Bars], options: dict,
                       store: str | Path | None = None, benchmark: dict | None = None,
                       skipped: Sequence[dict] = ()) -> str | None:
    """Write the run; returns its id, None when the store is off (``--store off``).

    ``rows``: the leaderboard rows (:func:`marketcast.leaderboard.compare.model_row`), one per model of ``runs``.
    ``options``: the data options shared by every cell (``asset_class``, ``data_dir``, ``on_duplicate``).
    ``benchmark``: buy and hold's row (:func:`marketcast.leaderboard.compare.benchmark_row`).
    ``skipped``: the models ``--skip-missing`` left out, {model, reason} (the page says them)."""
    from marketcast.runs.cells import Cell, digest
    from marketcast.runs.record import new_run_id, now_iso
    from marketcast.runs.rows import RunContext, code_version, fingerprint, ok_rows
    from marketcast.runs.store import RunStore, store_root

    root = store_root(store)
    if root is None or not runs:
        return None
    opts = {k: (str(Path(v).resolve()) if k == "data_dir" and v is not None else v) for k, v in options.items()}
    cells = [(Cell(symbol=r.symbol, config=r.config, model=run.model, weights=run.weights, device=run.device,
                   dtype=run.dtype, **opts), r) for run in runs for r in run.results]
    prints = {b.symbol: fingerprint(b) for b in bars}
    ctx = RunContext(run_id=new_run_id("compare"), kind="leaderboard", spec_hash=digest([c.cell_id for c, _ in cells]),
                     code_version=code_version())
    records = [row for i, (cell, result) in enumerate(cells)
               for row in ok_rows(ctx, cell, i, result, prints[result.symbol], seconds=None)]
    store_ = RunStore(root)
    first = cells[0][0].settings()
    store_.write_info(ctx.run_id, {
        "kind": ctx.kind, "created_at": now_iso(), "spec_hash": ctx.spec_hash, "code_version": ctx.code_version,
        "cells_total": len(cells),
        "spec": {"leaderboard": list(rows), "benchmark": benchmark, "skipped": list(skipped),
                 "symbols": [b.symbol for b in bars],
                 "models": [{"model": run.model, "weights": run.weights, "random_weights": run.random_weights,
                             "device": run.device, "dtype": run.dtype} for run in runs],
                 **{k: v for k, v in first.items() if k not in ("model", "weights", "device", "dtype")}}})
    store_.write_rows(ctx.run_id, records)
    store_.write_summary(ctx.run_id, records)
    return ctx.run_id
