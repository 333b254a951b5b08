"""The work a sweep sends to Ray: load a symbol (CPU task), forecast it (a model actor), settle its cells
(CPU task); or, for cheap jobs, all three for several whole jobs in one CPU task (:func:`run_whole`). Plain
functions and a plain class here; :mod:`marketcast.sweep.execute` wraps them with ``ray.remote``. Each step calls
what ``marketcast backtest`` calls (``load_symbol``/``load_bars``, ``decision_ends`` + ``forecast_windows``,
``simulate``), so a cell equals the backtest of that cell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import decision_ends, forecast_windows, simulate
from marketcast.backtest.period import Period
from marketcast.backtest.prepare import prepare
from marketcast.backtest.fans import Fan, forecast_fans
from marketcast.data import load_bars, load_symbol
from marketcast.data.bars import Bars
from marketcast.errors import MarketcastError, ModelLoadError
from marketcast.forecast.base import Forecast
from marketcast.forecast.exposure import exposure_of
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
class Failed:
    """A symbol whose load or forecast failed: its cells are recorded with ``message``, the others of its
    forecast call go on."""

    message: str


@dataclass
class Forecasted:
    forecast: Forecast
    ends: np.ndarray
    seconds: float
    fans: tuple[Fan, ...]  # the symbol's default forecast fans, stored on each of its cells' results


def load(symbol: str, path: Path | None, cell: Cell) -> Loaded | Failed:
    """The symbol's bars, as ``marketcast backtest`` loads them (``path`` spares a folder listing), or why they
    cannot be used (returned, not raised: a bad file must not fail the other symbols of its forecast call)."""
    try:
        return _load(symbol, path, cell)
    except Exception as exc:  # recorded on the symbol's cells
        return Failed(describe(exc))


def _load(symbol: str, path: Path | None, cell: Cell) -> Loaded:
    min_rows = cell.config.windows + 2
    if path is not None and path.is_file():
        bars = load_bars(path, symbol=symbol, asset_class=cell.asset_class, min_rows=min_rows,
                         on_duplicate=cell.on_duplicate, periods_per_year=cell.periods_per_year, timezone=cell.timezone)
    else:
        bars = load_symbol(symbol, data_dir=cell.data_dir, asset_class=cell.asset_class, min_rows=min_rows,
                           on_duplicate=cell.on_duplicate, periods_per_year=cell.periods_per_year,
                           timezone=cell.timezone)
    # the cell's bars as every backtest prepares them ([data] end: nothing after the period's last settlement bar
    # is read); the store hashes the whole file, as `report` reads it
    cut = prepare([bars], Period.last(cell.config.windows, cell.end), cell.config).bars[0]
    return Loaded(cut, fingerprint(bars))


class ForecastServer:
    """Holds one loaded (and, on CUDA, compiled) forecaster and serves batched forecasts for many symbols.

    A call forecasts every window of several symbols in one batch: ``forecast_windows`` over their (bars, ends)
    jobs, the call ``marketcast backtest SYM1 SYM2 ...`` makes. A window's sample paths depend on the seed and
    the window alone, not on the batch around it (the forecasters' batch-invariance tests), so a symbol forecast
    with others equals its backtest alone. The shape buckets let every call reuse the graphs compiled for the
    first. A model that fails to load does not kill the actor: every call reports the load error, so its cells
    are recorded as failed and the sweep goes on.
    """

    def __init__(self, options: dict) -> None:
        self.forecaster, self.error = None, None
        try:
            self.forecaster = load_forecaster(**options)
        except Exception as exc:  # any load failure becomes the message of this model's cells
            self.error = f"model {options.get('name')!r} failed to load: {describe(exc)}"

    def forecast(self, config: BacktestConfig, *loaded: Loaded | Failed):
        """One result per symbol, in order; a call for one symbol returns its result itself (Ray's
        ``num_returns=1`` hands the whole return value to its one reference, not the items of a list)."""
        out = self._forecast(config, *loaded)
        return out[0] if len(loaded) == 1 else out

    def _forecast(self, config: BacktestConfig, *loaded: Loaded | Failed) -> list[Forecasted | Failed]:
        """One result per symbol, in order. A symbol that could not be loaded stays :class:`Failed`; if the
        batch fails (a non-finite path names its symbol), each symbol is forecast alone so only it fails."""
        if self.forecaster is None:
            raise ModelLoadError(self.error)
        good = [i for i, item in enumerate(loaded) if isinstance(item, Loaded)]
        out: list[Forecasted | Failed] = list(loaded)
        try:
            for i, result in zip(good, self._batch([loaded[i] for i in good], config)):
                out[i] = result
        except MarketcastError as exc:
            if len(good) == 1:
                out[good[0]] = Failed(describe(exc))
                return out
            for i in good:
                try:
                    (out[i],) = self._batch([loaded[i]], config)
                except MarketcastError as exc:
                    out[i] = Failed(describe(exc))
        return out

    def _batch(self, loaded: list[Loaded], config: BacktestConfig) -> list[Forecasted]:
        if not loaded:
            return []
        started = time.perf_counter()
        ends = [decision_ends(len(item.bars), config) for item in loaded]
        forecasts = forecast_windows(self.forecaster, [(item.bars, e) for item, e in zip(loaded, ends)], config)
        fans = [forecast_fans(self.forecaster, item.bars, e[e < len(item.bars) - 1], config)  # settled decisions
                for item, e in zip(loaded, ends)]
        share = (time.perf_counter() - started) / len(loaded)
        return [Forecasted(f, e, share, fan) for f, e, fan in zip(forecasts, ends, fans)]


def settle(ctx: RunContext, loaded: Loaded | Failed, forecasted: Forecasted | Failed, cells: list[tuple[int, Cell]],
           job_cells: int) -> list[list[dict]]:
    """The rows of each cell: simulated on the shared forecast, or its error. ``seconds`` of a cell is its
    own simulation plus an equal share of the job's forecast."""
    if isinstance(forecasted, Failed) or isinstance(loaded, Failed):
        failed = forecasted if isinstance(forecasted, Failed) else loaded
        fp = loaded.fingerprint if isinstance(loaded, Loaded) else None
        return [[error_row(ctx, cell, position, failed.message, data_fingerprint=fp)] for position, cell in cells]
    out = []
    for position, cell in cells:
        started = time.perf_counter()
        try:
            result = simulate(loaded.bars, forecasted.forecast, forecasted.ends, cell.config)
            result.fans = forecasted.fans
            meta = exposure_of(cell.model, cell.weights).meta(cell.symbol, result.decision_times, loaded.bars.frame)
            result.forecast_meta = {**result.forecast_meta, **meta}  # as the backtest labels it (runs show)
            seconds = time.perf_counter() - started + forecasted.seconds / job_cells
            out.append(ok_rows(ctx, cell, position, result, loaded.fingerprint, seconds))
        except Exception as exc:  # one bad cell is recorded and the others go on
            out.append([error_row(ctx, cell, position, describe(exc), data_fingerprint=loaded.fingerprint)])
    return out


def forecast_call(server: ForecastServer, jobs: list) -> list[tuple[Loaded | Failed, Forecasted | Failed]]:
    """Load the symbols of one forecast call (the :class:`~marketcast.sweep.plan.Job` list of one model and forecast
    settings) and forecast them in one batch, as an actor's call does: each job's (loaded, forecasted). A model
    that failed to load fails all of them."""
    loaded = [load(job.symbol, job.path, job.first) for job in jobs]
    try:
        forecasted = server.forecast(jobs[0].config, *loaded)
        forecasted = [forecasted] if len(jobs) == 1 else forecasted
    except Exception as exc:  # the model failed to load: all of its cells, as on Ray
        forecasted = [Failed(describe(exc))] * len(jobs)
    return list(zip(loaded, forecasted))


_SERVED: dict = {}  # this process's loaded forecaster for whole-job tasks: {"key": ..., "server": ...}


def run_whole(ctx: RunContext, server_class: type, options: dict, calls: list[list]) -> list[list[dict]]:
    """Whole jobs in one task: each forecast call of ``calls`` loaded, forecast and settled in this process, the
    rows of every cell in order, equal to the split path's (the same functions on the same forecast batches).
    The forecaster is loaded once per worker process and kept for the next task of the same model (cheap jobs
    come from a cheap model; :mod:`marketcast.sweep.batching`)."""
    key = (server_class.__module__, server_class.__qualname__, repr(sorted(options.items())))
    if _SERVED.get("key") != key:
        _SERVED.clear()  # one loaded model per process
        _SERVED.update(key=key, server=server_class(options))
    out = []
    for jobs in calls:
        for job, (loaded, forecasted) in zip(jobs, forecast_call(_SERVED["server"], jobs)):
            out += settle(ctx, loaded, forecasted, job.cells, len(job.cells))
    return out


def settle_many(ctx: RunContext, pieces: list[tuple[list[tuple[int, Cell]], int]],
                *inputs: Loaded | Failed | Forecasted) -> list[list[dict]]:
    """:func:`settle` for several jobs' chunks in one task (cheap cells batched, :mod:`marketcast.sweep.batching`):
    ``inputs`` are each piece's (loaded, forecasted) in turn, passed flat so Ray resolves their references. The
    rows of every cell, in the pieces' order, equal to settling each piece alone."""
    out = []
    for n, (cells, job_cells) in enumerate(pieces):
        out += settle(ctx, inputs[2 * n], inputs[2 * n + 1], cells, job_cells)
    return out
