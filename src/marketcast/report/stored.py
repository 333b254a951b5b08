"""A stored run's tearsheet inputs: its results from the run store, the bars they read and their fans.

The store keeps each result whole but not the bars, so they are loaded again from where the run read them
(the embedded data or its ``data_dir``) and checked against the content hash the run recorded: a report
never silently draws other bars than the backtest used. The fans were computed with the backtest and are
stored on each result; a report only draws them. Fans it does not hold (another ``--fan-date``, a run
recorded before fans were stored) come from ``forecast``, a function the command layer passes in: this
layer never runs a model.
"""

from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.fans import Fan, stored_fans
from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.errors import DataError
from marketcast.report.tearsheet import SymbolReport
from marketcast.runs.remake import cell_results
from marketcast.runs.rows import fingerprint
from marketcast.runs.store import RunStore
from marketcast.runs.overview import plain

#: (the cell's store row, its result, its bars, the fan dates) -> its fans at those dates (the default ones without)
FanSource = Callable[[pd.Series, SymbolResult, Bars, Sequence[pd.Timestamp]], Sequence[Fan]]


def _bars(row: pd.Series, asset_class: str, run_id: str) -> Bars:
    symbol, data_dir = row["symbol"], plain(row.get("data_dir"))
    where = data_dir or "the embedded data"
    try:
        bars = load_symbol(symbol, data_dir=data_dir, asset_class=asset_class,
                           on_duplicate=plain(row.get("on_duplicate")) or "error", timezone=plain(row.get("timezone")))
    except DataError as exc:
        raise DataError(f"run {run_id}: cannot load {symbol}'s bars again from {where} ({exc})") from None
    if fingerprint(bars) != row["data_fingerprint"]:
        raise DataError(f"run {run_id}: {symbol}'s bars in {where} changed since the run (content hash "
                        f"{fingerprint(bars)}, the run read {row['data_fingerprint']}); restore them to report on it")
    return bars


def stored_reports(store: RunStore, run_id: str, forecast: FanSource, fan_dates: Sequence[pd.Timestamp] = (),
                   symbol: str | None = None) -> dict[str, list[SymbolReport]]:
    """The run's symbol reports (``symbol``: that symbol's only), grouped like its cells (one group per grid
    point, key '' without axes). The stored fans are drawn; only those it lacks come from ``forecast``."""
    groups: dict[str, list[SymbolReport]] = {}
    for key, group in cell_results(store, run_id, symbol).items():
        for row, result in group:
            bars = _bars(row, result.asset_class, run_id)
            fans = stored_fans(result, bars, fan_dates)
            if fans is None:
                fans = forecast(row, result, bars, fan_dates)
            groups.setdefault(key, []).append(SymbolReport(result, bars, list(fans)))
    return groups
