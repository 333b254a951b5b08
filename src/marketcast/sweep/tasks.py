"""The work a sweep sends to Ray: load a symbol (CPU task), forecast it (a model actor), settle its cells
(CPU task). Plain functions and a plain class here; :mod:`marketcast.sweep.execute` wraps them with
``ray.remote``. Each step calls what ``marketcast backtest`` calls (``load_symbol``/``load_bars``,
``decision_ends`` + ``forecast_windows``, ``simulate``), so a cell equals the backtest of that cell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import decision_ends, forecast_windows, simulate
from marketcast.data import load_bars, load_symbol
from marketcast.data.bars import Bars
from marketcast.errors import MarketcastError, ModelLoadError
from marketcast.forecast.base import Forecast
from marketcast.forecast.registry import load_forecaster
from marketcast.runs.cells import Cell
from marketcast.runs.rows import RunContext, error_row, fingerprint, ok_rows


def describe(exc: BaseException) -> str:
    """One line for a failed cell: a marketcast error's own message, else the exception's type and text.
    A Ray task error is described by its cause."""
    exc = getattr(exc, "cause", None) or exc
    text = str(exc) if isinstance(exc, MarketcastError) else f"{type(exc).__name__}: {exc}"
    return (text.strip().splitlines() or [type(exc).__name__])[0]


@dataclass
class Loaded:
    bars: Bars
    fingerprint: str


@dataclass
class Forecasted:
    forecast: Forecast
    ends: np.ndarray
    seconds: float


def load(symbol: str, path: Path | None, cell: Cell) -> Loaded:
    """The symbol's bars, as ``marketcast backtest`` loads them (``path`` spares a folder listing)."""
    min_rows = cell.config.windows + 2
    if path is not None and path.is_file():
        bars = load_bars(path, symbol=symbol, asset_class=cell.asset_class, min_rows=min_rows,
                         on_duplicate=cell.on_duplicate)
    else:
        bars = load_symbol(symbol, data_dir=cell.data_dir, asset_class=cell.asset_class, min_rows=min_rows,
                           on_duplicate=cell.on_duplicate)
    return Loaded(bars, fingerprint(bars))


class ForecastServer:
    """Holds one loaded (and, on CUDA, compiled) forecaster and forecasts symbol after symbol with it.

    Each call forecasts all windows of one symbol in one batch, the call ``marketcast backtest`` makes: the
    forecaster's shape buckets let every symbol with the same windows reuse the graphs compiled for the
    first. A model that fails to load does not kill the actor: every call reports the load error, so its
    cells are recorded as failed and the sweep goes on.
    """

    def __init__(self, options: dict) -> None:
        self.forecaster, self.error = None, None
        try:
            self.forecaster = load_forecaster(**options)
        except Exception as exc:  # any load failure becomes the message of this model's cells
            self.error = f"model {options.get('name')!r} failed to load: {describe(exc)}"

    def forecast(self, loaded: Loaded, config: BacktestConfig) -> Forecasted:
        if self.forecaster is None:
            raise ModelLoadError(self.error)
        started = time.perf_counter()
        ends = decision_ends(len(loaded.bars), config)
        (forecast,) = forecast_windows(self.forecaster, [(loaded.bars, ends)], config)
        return Forecasted(forecast, ends, time.perf_counter() - started)


def settle(ctx: RunContext, loaded: Loaded, forecasted: Forecasted, cells: list[tuple[int, Cell]],
           job_cells: int) -> list[list[dict]]:
    """The rows of each cell: simulated on the shared forecast, or its error. ``seconds`` of a cell is its
    own simulation plus an equal share of the job's forecast."""
    out = []
    for position, cell in cells:
        started = time.perf_counter()
        try:
            result = simulate(loaded.bars, forecasted.forecast, forecasted.ends, cell.config)
            seconds = time.perf_counter() - started + forecasted.seconds / job_cells
            out.append(ok_rows(ctx, cell, position, result, loaded.fingerprint, seconds))
        except Exception as exc:  # one bad cell is recorded and the others go on
            out.append([error_row(ctx, cell, position, describe(exc), data_fingerprint=loaded.fingerprint)])
    return out
