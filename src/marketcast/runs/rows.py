"""Store rows of one cell, built from the backtest's public results.

Every cell has one *cell row* (``strategy`` NULL): its identity, settings, status (``ok`` or ``error`` with
the message), the symbol-level metrics and ``record``, the whole result in the lossless form of
:mod:`marketcast.runs.codec` (reports are re-made from it). A finished cell also has one *strategy row* per
strategy with that strategy's metrics and its per-window net ``returns``. Metrics are flattened from
``symbol_json``'s dict generically (nested keys joined by ``.``; the symbol-level ones under ``metrics.``, the
multiple-testing figures of :mod:`marketcast.backtest.overfit` under ``selection.``; per field the interval
coverage and PIT p-values under ``calibration.``, e.g. ``calibration.close.cov80``),
so a metric the backtest adds becomes a column without a change here. The cell row also holds its
walk-forward record as a trial of the run (``walk_forward.*``: the per-window returns, their per-period
Sharpe ratio, skewness, kurtosis and count, and the periods per year), from which ``runs show`` deflates the
best cell of a sweep (:func:`marketcast.runs.overview.selection`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from pandas import NA as _NA

from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.overfit import SelectionStats, moments
from marketcast.backtest.report import symbol_json
from marketcast.calibrate.summary import store_columns
from marketcast.data.bars import Bars
from marketcast.runs.cells import Cell
from marketcast.runs.codec import encode

STORE_SCHEMA = 1


GRID_KINDS = ("sweep", "leaderboard")  # runs whose cells are trials of one selection (a backtest's are its symbols)


@dataclass(frozen=True)
class RunContext:
    """What every row of one run shares."""

    run_id: str
    kind: str  # "backtest" | "sweep" | "leaderboard"
    spec_hash: str
    code_version: str


def fingerprint(bars: Bars) -> str:
    """A content hash of the bars a cell read (timestamps, every column, symbol and asset class)."""
    h = hashlib.sha256(f"{bars.symbol}|{bars.asset_class}|{','.join(map(str, bars.frame.columns))}".encode())
    h.update(np.ascontiguousarray(bars.frame.index.asi8).tobytes())
    h.update(np.ascontiguousarray(bars.frame.to_numpy(dtype=np.float64)).tobytes())
    return h.hexdigest()[:16]


def flatten(values: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}, "c": 2}`` -> ``{"a.b": 1, "c": 2}`` (lists and scalars are kept as they are)."""
    out = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _identity(ctx: RunContext, cell: Cell, position: int, data_fingerprint: str | None,
              seconds: float | None) -> dict:
    return {
        "run_id": ctx.run_id, "cell_id": cell.cell_id, "cell_index": position, "kind": ctx.kind,
        "spec_hash": ctx.spec_hash,
        "code_version": ctx.code_version, "store_schema": STORE_SCHEMA,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": None if seconds is None else float(seconds),
        "data_fingerprint": data_fingerprint, "symbol": cell.symbol, **cell.settings(),
    }


def _metric_columns(metrics: dict, taken: dict) -> dict:
    """Flattened metrics; one whose name is already a column (an identity or a setting) gets ``metric.``."""
    return {(f"metric.{k}" if k in taken else k): v for k, v in flatten(metrics).items()}


def ok_rows(ctx: RunContext, cell: Cell, position: int, result: SymbolResult, data_fingerprint: str,
            seconds: float | None) -> list[dict]:
    """The cell row and one row per strategy of a finished cell (``position``: its place in the run's plan)."""
    doc = symbol_json(result)
    shared = {**_identity(ctx, cell, position, data_fingerprint, seconds), "status": "ok", "error": None,
              "best_strategy": doc.get("best_strategy"), **flatten(doc.get("metrics") or {}, "metrics."),
              **flatten(doc.get("selection") or {}, "selection."),
              **flatten(doc.get("costs") or {}, "costs."),  # fee, half-spread, slippage (bp), borrow rate
              **flatten(doc.get("context_seen") or {}, "context_seen."),  # real bars the windows read: min, max
              **store_columns(result.calibration_report),  # calibration.close.cov80, calibration.close.pit_ks_p
              "settle_times": list(result.settle_times.to_pydatetime())}
    rows = [{**shared, "strategy": None, **trial_columns(result), "record": encode(result)}]
    for name, metrics in doc["strategies"].items():
        rows.append({**shared, "strategy": name, **_metric_columns(metrics, shared),
                     "returns": [float(x) for x in result.strategies[name].returns]})
    return rows


def trial_columns(result: SymbolResult) -> dict:
    """The cell as one trial of its run: the walk-forward record's per-window returns and the moments the
    deflated Sharpe ratio needs (:func:`marketcast.backtest.overfit.moments`; NULL when the record never
    varies)."""
    returns = np.asarray(result.walk_forward["returns"], dtype=np.float64)
    found = moments(returns)
    sharpe, skew, kurtosis = found if found is not None else (None, None, None)
    return {"walk_forward.returns": [float(x) for x in returns], "walk_forward.observations": len(returns),
            "walk_forward.sharpe_per_period": sharpe, "walk_forward.skew": skew,
            "walk_forward.kurtosis": kurtosis, "walk_forward.periods_per_year": float(result.periods_per_year)}


def error_row(ctx: RunContext, cell: Cell, position: int, message: str, seconds: float | None = None,
              data_fingerprint: str | None = None) -> dict:
    """The cell row of a failed cell: what went wrong, in one line."""
    return {**_identity(ctx, cell, position, data_fingerprint, seconds), "status": "error", "error": message,
            "strategy": None}


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<package version>+g<commit>[.dirty]`` in a git checkout, else the package version. The two git
    commands run side by side (a backtest waits for them before it ends)."""
    import marketcast

    version = marketcast.__version__
    here = Path(marketcast.__file__).resolve().parent

    def start(*args: str) -> subprocess.Popen | None:
        try:
            return subprocess.Popen(["git", "-C", str(here), *args], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return None

    def answer(git: subprocess.Popen | None) -> str | None:
        if git is None:
            return None
        try:
            out, _ = git.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            git.kill()
            git.communicate()
            return None
        return out.strip() if git.returncode == 0 else None

    head, status = start("rev-parse", "--short=12", "HEAD"), start("status", "--porcelain", "--untracked-files=no",
                                                                     "--", ".")
    commit, dirty = answer(head), answer(status)
    if not commit:
        return version
    return f"{version}+g{commit}{'.dirty' if dirty else ''}"


def _plain(value, kind: str):
    """A stored column's value as the field's type: NULL/NaN -> None where the field allows it (pandas reads a
    NULL of an integer column that holds other cells' integers as ``pd.NA``)."""
    if value is None or value is _NA or (isinstance(value, float) and math.isnan(value)):
        if "None" not in kind:
            raise ValueError("a required figure is missing")
        return None
    for name, cast in (("int", int), ("float", float), ("str", str)):
        if kind.startswith(name):
            return cast(value)
    raise ValueError(f"no reading for {kind}")


def stored_selection(cell) -> SelectionStats | None:
    """A cell's multiple-testing figures read back from its ``selection.*`` columns (what :func:`ok_rows`
    stored from ``result.overfit``); None when a field is missing (a store written before the field existed)."""
    try:
        return SelectionStats(**{f.name: _plain(cell[f"selection.{f.name}"], str(f.type))
                                 for f in dataclasses.fields(SelectionStats)})
    except (KeyError, ValueError):
        return None


def with_stored_selection(result, cell):
    """``result`` (decoded from ``cell``'s record) carrying the figures the backtest computed and stored, so its
    ``overfit`` is read, not computed again (no SPA bootstrap, no CSCV); unchanged when they are not stored."""
    stored = stored_selection(cell)
    if stored is not None:
        result.__dict__["overfit"] = stored  # fills SymbolResult.overfit's cached_property
    return result
