"""How many cells one Ray settle task carries. A task costs a fixed overhead (scheduling, argument transfer,
the result's return: measured at the sweep's start with a few no-op tasks) on top of its cells' own seconds;
a task that runs at least :data:`FACTOR` times that overhead loses at most 1/FACTOR (5 %) to it, so a cluster
stays within the 10 % of one process that issue 48 asks for even on the cheapest cells. Until the first cells'
seconds are known, the spec's ``cells_per_task`` is used.

The same rule decides when a job is too cheap to split at all. Split, a job costs :data:`SPLIT_ROUND_TRIPS`
task round trips (its load task, its forecast call, its settle task) plus the object store's copies of its bars
and forecasts between them; when its cells' seconds are under :data:`FACTOR` times that, one task loads,
forecasts and settles whole jobs instead (:func:`whole_jobs`), as many jobs per task as :func:`task_cells` asks
for, but never so many that the cluster's CPUs run out of tasks to share (:func:`whole_task_cells`).
"""

from __future__ import annotations

import math
import statistics
import time

FACTOR = 20  # a task runs >= FACTOR x the per-task overhead: <= 5 % lost to it
MOST_CELLS = 512  # a cap, so a killed task never takes more than this many cells' work with it
MEASURED_AFTER = 4  # cells' seconds needed before the estimate replaces cells_per_task
SPLIT_ROUND_TRIPS = 3  # a split job's tasks: load, forecast call, settle
TASKS_PER_CPU = 2  # whole-job tasks left per CPU at least, so no CPU idles while another finishes a long one


def _noop() -> None:
    return None


def task_overhead(ray, tries: int = 5) -> float:
    """Median seconds of a no-op task's round trip on this cluster (the first is a warm-up and is dropped)."""
    noop = ray.remote(num_cpus=1)(_noop)
    ray.get(noop.remote())
    seconds = []
    for _ in range(tries):
        started = time.perf_counter()
        ray.get(noop.remote())
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def task_cells(overhead: float, cell_seconds: float, factor: int = FACTOR, most: int = MOST_CELLS) -> int:
    """Cells per task so that ``cells x cell_seconds >= factor x overhead``: at least 1, at most ``most``."""
    if cell_seconds <= 0:
        return most
    return max(1, min(most, math.ceil(factor * overhead / cell_seconds)))


def whole_jobs(overhead: float, cell_seconds: float, cells_per_job: float, factor: int = FACTOR) -> bool:
    """Whether a job of ``cells_per_job`` cells of ``cell_seconds`` each costs less than ``factor`` times the
    :data:`SPLIT_ROUND_TRIPS` round trips that splitting it adds: then it is run whole, in one task."""
    return cells_per_job * cell_seconds < factor * SPLIT_ROUND_TRIPS * overhead


def whole_task_cells(overhead: float, cell_seconds: float, cells_left: int, cpus: int) -> int:
    """Cells per whole-job task: :func:`task_cells`, but at most an equal share of :data:`TASKS_PER_CPU` tasks per
    CPU of the ``cells_left`` still to send (at least 1)."""
    share = math.ceil(cells_left / (TASKS_PER_CPU * max(1, cpus)))
    return max(1, min(task_cells(overhead, cell_seconds), share))


def partition(pieces: list[list], size: int) -> list[list[int]]:
    """Consecutive pieces (each a list of cells, never split) grouped so each group holds >= ``size`` cells
    (the last may hold fewer): the indices of the pieces in each group, every piece exactly once, in order."""
    groups, group, cells = [], [], 0
    for index, piece in enumerate(pieces):
        group.append(index)
        cells += len(piece)
        if cells >= size:
            groups.append(group)
            group, cells = [], 0
    if group:
        groups.append(group)
    return groups


class CellCost:
    """Running mean of the finished cells' seconds (a cell's own simulation plus its share of its job's
    forecast: an over-estimate of the settle work, so batches err small, never large)."""

    def __init__(self) -> None:
        self.total, self.count = 0.0, 0

    def add(self, seconds: float | None) -> None:
        if seconds is not None and seconds >= 0:
            self.total += seconds
            self.count += 1

    @property
    def mean(self) -> float | None:
        """Mean seconds of a cell, once :data:`MEASURED_AFTER` cells are in."""
        return self.total / self.count if self.count >= MEASURED_AFTER else None

    def cells_per_task(self, overhead: float | None, default: int) -> int:
        if overhead is None or self.count < MEASURED_AFTER:
            return default
        return task_cells(overhead, self.total / self.count)
