"""From cells to work: one forecast job per (model, symbol, forecast settings), shared by its cells.

A cell's forecast depends on the loaded model and on the settings that :func:`decision_ends` and
:func:`forecast_windows` read (:data:`FORECAST_FIELDS`); fill modes and strategy settings only change
:func:`simulate`. So the cells of one symbol that differ only in those share one forecast call, exactly the
call ``marketcast backtest`` makes for that symbol, and each is then settled on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from marketcast.backtest.config import BacktestConfig
from marketcast.runs.cells import Cell

FORECAST_FIELDS = ("windows", "context", "num_samples", "seed", "include_latest", "min_context")


@dataclass
class Job:
    """The bars of one symbol, forecast once, settled for each of ``cells`` (``(position, cell)`` pairs)."""

    symbol: str
    path: Path | None  # the symbol's file; None = embedded, or look it up in the cells' data_dir
    cells: list[tuple[int, Cell]]

    @property
    def first(self) -> Cell:
        return self.cells[0][1]

    @property
    def config(self) -> BacktestConfig:
        """The forecast settings (every cell of the job has the same :data:`FORECAST_FIELDS`)."""
        return self.first.config

    @property
    def model_key(self) -> tuple:
        return self.first.model_key

    @property
    def pool_key(self) -> tuple:
        return pool_key(self.first)

    def chunks(self, size: int) -> list[list[tuple[int, Cell]]]:
        return [self.cells[i:i + size] for i in range(0, len(self.cells), size)]


def pool_key(cell: Cell) -> tuple:
    """The actor pool serving ``cell``: the loaded model, device and dtype. The seed reaches each forecast
    call in its config; it picks the weights themselves only for ``weights = "random"``."""
    name, weights, device, dtype, compile_mode = (cell.model, cell.weights, cell.device, cell.dtype, cell.compile)
    return (name, weights, device, dtype, compile_mode, cell.config.seed if weights == "random" else None)


def forecast_key(cell: Cell) -> tuple:
    return (cell.model_key, cell.symbol, cell.asset_class, cell.data_dir,
            *(getattr(cell.config, name) for name in FORECAST_FIELDS))


def plan_jobs(cells: list[tuple[int, Cell]], paths: dict[str, Path | None]) -> list[Job]:
    """Jobs grouped by actor pool (so a model's actors can be released once its jobs are done), then in plan
    order."""
    jobs: dict[tuple, Job] = {}
    for position, cell in cells:
        key = forecast_key(cell)
        if key not in jobs:
            jobs[key] = Job(cell.symbol, paths.get(cell.symbol), [])
        jobs[key].cells.append((position, cell))
    pools = list(dict.fromkeys(job.pool_key for job in jobs.values()))
    return sorted(jobs.values(), key=lambda job: (pools.index(job.pool_key), job.cells[0][0]))
