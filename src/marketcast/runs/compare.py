"""``runs compare``: any two runs, cell by cell and strategy by strategy, judged like ``compile compare``.

Cells are matched on the symbol and on every setting that varies within either run (a sweep's axes); the
settings that are constant in each run but differ between them (the model, the compile mode, ...) are what
is being compared. Each matched cell becomes the backtest object ``compile compare`` reads, and
:func:`marketcast.compile.compare.compare_backtests` judges them: return delta > 0.05 FAIL, > 0.01 WARN. A
strategy of both runs whose return is NaN (or missing) in either, or whose Sharpe ratio is NaN in one run
only, is a FAIL: a run that lost a number differs from one that has it, however small the other deltas.
"""

from __future__ import annotations

import math

from marketcast.compile.compare import ORDER, compare_backtests
from marketcast.errors import ConfigError
from marketcast.runs.store import RunStore
from marketcast.runs.views import label, plain, run_axes, strategy_order


def _backtests(store: RunStore, run_id: str, names: list[str]) -> tuple[dict, list[str]]:
    """label -> ``{symbol, strategies: {name: metrics}, metrics}`` for the run's finished cells, and a note
    per failed cell: the cells in plan order and their strategy rows hashed by cell (linear, not per cell)."""
    columns = store.columns([run_id])
    wanted = ["cell_id", "symbol", "status", "error", *names, *(c for c in columns if c.startswith("metrics."))]
    listing = ", ".join(f'c."{c}"' if c in columns else f'NULL AS "{c}"' for c in dict.fromkeys(wanted))
    has_results = {"strategy", "return", "sharpe"} <= set(columns)
    rows = store.query(f"SELECT {listing} FROM cells c ORDER BY c.cell_index", run_ids=[run_id]).to_dict("records")
    out, notes = {}, []
    if not any(row["status"] == "ok" for row in rows) or not has_results:  # only failed cells: no strategy rows
        return out, [f"{label(cell, names)}: failed in {run_id}: {cell['error']}" for cell in rows]
    order = f"ORDER BY cell_index, {strategy_order(columns)}" if "strategies" in columns else ""  # else as written
    by_cell: dict[str, list[dict]] = {}
    for r in store.query(f'SELECT cell_id, strategy, "return", sharpe FROM results {order}',
                         run_ids=[run_id]).to_dict("records"):
        by_cell.setdefault(r["cell_id"], []).append(r)
    metric_names = [c for c in wanted if c.startswith("metrics.")]
    for cell in rows:
        key = label(cell, names)
        if key in out:
            raise ConfigError(f"run {run_id} holds two cells {key!r}; nothing tells them apart")
        if cell["status"] != "ok":
            notes.append(f"{key}: failed in {run_id}: {cell['error']}")
            continue
        strategies = {r["strategy"]: {"return": plain(r["return"]), "sharpe": plain(r["sharpe"])}
                      for r in by_cell.get(cell["cell_id"], [])}
        metrics = {c.removeprefix("metrics."): plain(cell[c]) for c in metric_names}
        out[key] = {"symbol": key, "strategies": strategies, "metrics": metrics}
    return out, notes


def compare_runs(store: RunStore, run_a: str, run_b: str) -> dict:
    """``compile compare``'s result (rows, metric deltas, notes, status) for two runs of the store."""
    for run in (run_a, run_b):
        if store.query("SELECT 1 FROM cells LIMIT 1", run_ids=[run]).empty:
            raise ConfigError(f"run {run} has no finished cells yet; nothing to compare")
    names = run_axes(store, [run_a, run_b])
    a, notes_a = _backtests(store, run_a, names)
    b, notes_b = _backtests(store, run_b, names)
    if not a or not b:
        raise ConfigError(f"run {run_a if not a else run_b} has no successful cells; nothing to compare")
    if not set(a) & set(b):
        raise ConfigError(f"runs {run_a} and {run_b} have no cell in common (matched on symbol"
                          f"{''.join(', ' + n for n in names)}); nothing to compare")
    result = compare_backtests(a, b)
    lost = _lost_numbers(result["rows"], a, b)
    if lost:
        result["status"] = max([result["status"], "FAIL"], key=ORDER.__getitem__)
    result["notes"] = notes_a + notes_b + result["notes"] + lost
    result["runs"] = {"a": run_a, "b": run_b}
    result["matched_on"] = ["symbol", *names]
    return result


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def _lost_numbers(rows: list[dict], a: dict, b: dict) -> list[str]:
    """Mark FAIL (in place) each row of a strategy in both runs whose return is NaN in either, or whose Sharpe
    ratio is NaN in one only; a note per row says which."""
    notes = []
    for row in rows:
        sa = a[row["symbol"]]["strategies"].get(row["strategy"])
        sb = b[row["symbol"]]["strategies"].get(row["strategy"])
        if sa is None or sb is None:
            continue  # in one run only: compile compare's WARN
        lost = [f"return is NaN in {side}" for side, s in (("A", sa), ("B", sb)) if _missing(s["return"])]
        if _missing(sa["sharpe"]) != _missing(sb["sharpe"]):
            lost.append(f"sharpe is NaN in {'A' if _missing(sa['sharpe']) else 'B'} only")
        if lost:
            row["status"] = "FAIL"
            notes.append(f"{row['symbol']}: {row['strategy']}: {', '.join(lost)}")
    return notes
