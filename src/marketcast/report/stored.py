"""A stored run's tearsheet inputs: its results from the run store, the bars they read and its forecaster.

The store keeps each result whole but not the bars, so they are loaded again from where the run read them
(the embedded data or its ``data_dir``) and checked against the content hash the run recorded: a report
never silently draws other bars than the backtest used. The fans need the run's model, loaded with the
run's options (the baseline at once; Toto and Kronos from their weights).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.errors import DataError
from marketcast.forecast.registry import load_forecaster
from marketcast.report.fans import HORIZON, forecast_fans
from marketcast.report.tearsheet import SymbolReport
from marketcast.runs.cells import MODEL_OPTIONS, Cell
from marketcast.runs.remake import cell_results
from marketcast.runs.rows import fingerprint
from marketcast.runs.store import RunStore
from marketcast.runs.overview import plain


def _bars(row: pd.Series, asset_class: str, run_id: str) -> Bars:
    symbol, data_dir = row["symbol"], plain(row.get("data_dir"))
    where = data_dir or "the embedded data"
    try:
        bars = load_symbol(symbol, data_dir=data_dir, asset_class=asset_class,
                           on_duplicate=plain(row.get("on_duplicate")) or "error")
    except DataError as exc:
        raise DataError(f"run {run_id}: cannot load {symbol}'s bars again from {where} ({exc})") from None
    if fingerprint(bars) != row["data_fingerprint"]:
        raise DataError(f"run {run_id}: {symbol}'s bars in {where} changed since the run (content hash "
                        f"{fingerprint(bars)}, the run read {row['data_fingerprint']}); restore them to report on it")
    return bars


def stored_reports(store: RunStore, run_id: str, fan_dates: Sequence[pd.Timestamp] = (),
                   horizon: int = HORIZON, symbol: str | None = None) -> dict[str, list[SymbolReport]]:
    """The run's symbol reports (``symbol``: that symbol's only), grouped like its cells (one group per grid
    point, key '' without axes)."""
    forecasters: dict[tuple, object] = {}
    groups: dict[str, list[SymbolReport]] = {}
    for key, group in cell_results(store, run_id, symbol).items():
        for row, result in group:
            cell = Cell(symbol=result.symbol, config=result.config,
                        **{name: plain(row.get(name)) for name in MODEL_OPTIONS})
            if cell.model_key not in forecasters:
                forecasters[cell.model_key] = load_forecaster(**cell.model_options())
            bars = _bars(row, result.asset_class, run_id)
            fans = forecast_fans(forecasters[cell.model_key], result, bars, fan_dates, horizon)
            groups.setdefault(key, []).append(SymbolReport(result, bars, fans))
    return groups
