"""Read-side summaries of the store: the runs, a run's grid axes and its per-strategy table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from marketcast.errors import ConfigError
from marketcast.runs.cells import setting_names
from marketcast.runs.store import RunStore

SHOWN_METRICS = ("return", "sharpe", "max_drawdown")


def plain(value):
    """A pandas/numpy cell as a plain Python value (lists for arrays, None for NaN)."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def _key(value) -> str:
    return json.dumps(plain(value), default=str)


def list_runs(store: RunStore) -> pd.DataFrame:
    """One row per run: id, kind, start, cells ok / failed / planned, symbols, models, code version."""
    runs = store.run_ids()
    counts = store.query("SELECT run_id, count(*) FILTER (WHERE status = 'ok') AS ok, "
                         "count(*) FILTER (WHERE status = 'error') AS failed, count(DISTINCT symbol) AS symbols, "
                         "string_agg(DISTINCT model, ',' ORDER BY model) AS models FROM cells GROUP BY run_id")
    counts = counts.set_index("run_id") if len(counts) else counts
    rows = []
    for run in runs:
        info = store.info(run)
        got = counts.loc[run] if run in counts.index else None
        rows.append({"run_id": run, "kind": info.get("kind"), "created_at": info.get("created_at"),
                     "ok": int(got["ok"]) if got is not None else 0,
                     "failed": int(got["failed"]) if got is not None else 0,
                     "planned": info.get("cells_total"),
                     "symbols": int(got["symbols"]) if got is not None else 0,
                     "models": got["models"] if got is not None else "",
                     "code_version": info.get("code_version"), "spec_hash": info.get("spec_hash")})
    return pd.DataFrame(rows, columns=["run_id", "kind", "created_at", "ok", "failed", "planned", "symbols",
                                       "models", "code_version", "spec_hash"])


def cells(store: RunStore, run_id: str) -> pd.DataFrame:
    """The cell rows of a run (without their records), in plan order."""
    columns = [c for c in store.columns([run_id]) if c != "record"]
    listing = ", ".join(f'"{c}"' for c in columns)
    return store.query(f"SELECT {listing} FROM cells ORDER BY cell_index", run_ids=[run_id])


def axes(frames: list[pd.DataFrame]) -> list[str]:
    """The settings that take more than one value within any of ``frames`` (the grid's axes)."""
    out = []
    for name in setting_names():
        if any(name in f and f[name].map(_key).nunique() > 1 for f in frames):
            out.append(name)
    return out


def label(row: pd.Series, names: list[str], with_symbol: bool = True) -> str:
    """``SP500 fill_mode=touch point=median``: a cell's symbol and its values on ``names``."""
    parts = [f"{n}={','.join(map(str, v)) if isinstance(v, list) else v}" for n in names for v in [plain(row.get(n))]]
    return " ".join([str(row["symbol"]), *parts] if with_symbol else parts)


def summary(store: RunStore, run_id: str, by: list[str] | None = None,
            metrics: tuple[str, ...] = SHOWN_METRICS) -> pd.DataFrame:
    """Mean of ``metrics`` per group of ``by`` (default: the grid's axes, or the symbol in a run without
    axes) and strategy, with the number of cells in each group."""
    found = cells(store, run_id)
    results = store.query("SELECT * EXCLUDE (settle_times, returns) FROM results", run_ids=[run_id])
    if results.empty:
        return pd.DataFrame()
    by = by if by is not None else (axes([found]) or ["symbol"])
    missing = [c for c in [*by, *metrics] if c not in results.columns]
    if missing:
        raise ConfigError(f"run {run_id} has no column {', '.join(missing)}; choose from "
                          f"{', '.join(c for c in results.columns if c not in ('record',))}")
    keyed = results.assign(**{c: results[c].map(lambda v: _key(v) if isinstance(plain(v), list) else v)
                              for c in by})
    keyed[list(metrics)] = keyed[list(metrics)].apply(pd.to_numeric, errors="coerce")
    grouped = keyed.groupby([*by, "strategy"], sort=False, dropna=False)
    table = grouped[list(metrics)].mean(numeric_only=True)
    table.insert(0, "cells", grouped.size())
    return table.reset_index()
