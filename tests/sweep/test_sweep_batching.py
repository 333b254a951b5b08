"""Cheap cells batched per Ray task (marketcast.sweep.batching): the sizing rule, the partition, and a sweep whose
tasks mix several jobs' cells recording exactly the rows of ``--local``."""

from __future__ import annotations

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.runs.store import RunStore
from marketcast.sweep.batching import MOST_CELLS, CellCost, partition, task_cells

from .helpers import small_spec, write_bars

VOLATILE = ["run_id", "finished_at", "seconds", "record"]


@pytest.mark.parametrize(("overhead", "cell", "cells"), [
    (0.002, 0.010, 4),  # 20 x 2 ms = 40 ms of work: 4 cells of 10 ms
    (0.002, 0.003, 14),  # 40 / 3 = 13.3, rounded up
    (0.002, 1.0, 1),  # an expensive cell runs alone
    (0.5, 0.001, MOST_CELLS),  # 10,000 wanted: capped
    (0.002, 0.0, MOST_CELLS),  # a cell that costs nothing measurable
])
def test_a_task_runs_at_least_twenty_times_its_overhead(overhead, cell, cells):
    assert task_cells(overhead, cell) == cells


def test_partition_keeps_every_piece_once_in_order_and_never_splits_one():
    pieces = [["a"] * 3, ["b"], ["c"] * 3, ["d"], ["e"] * 5, ["f"]]
    assert partition(pieces, 3) == [[0], [1, 2], [3, 4], [5]]
    assert partition(pieces, 1) == [[0], [1], [2], [3], [4], [5]]
    assert partition(pieces, 100) == [[0, 1, 2, 3, 4, 5]]
    assert partition([], 4) == []
    for size in range(1, 16):
        groups = partition(pieces, size)
        assert [i for group in groups for i in group] == list(range(len(pieces)))
        assert all(sum(len(pieces[i]) for i in group) >= size for group in groups[:-1])


def test_the_measured_cost_replaces_the_default_after_four_cells():
    cost = CellCost()
    for seconds in (0.004, 0.006, None, 0.004):
        cost.add(seconds)
    assert cost.cells_per_task(0.002, default=8) == 8  # three cells measured
    cost.add(0.006)
    assert cost.cells_per_task(0.002, default=3) == 8  # mean 5 ms: 40 / 5
    cost.add(0.0)
    assert cost.cells_per_task(0.002, default=8) == 10  # mean 4 ms
    assert cost.cells_per_task(None, default=8) == 8  # --local measures no overhead


@pytest.mark.usefixtures("ray_address")
def test_tasks_mixing_jobs_record_the_rows_of_local(tmp_path, capsys):
    """4 cells per symbol in chunks of 3: the tasks are [A:3], [A:1, B:3], [B:1, C:3], [C:1] (one forecast call,
    submitted before any cell's seconds are known), so every task but the first and last settles two jobs."""
    write_bars(tmp_path / "bars", ["AAA", "BBB", "CCC"])
    spec = tmp_path / "grid.toml"
    spec.write_text(small_spec(grid='point = ["median", "mean"]', tail="[ray]\ncells_per_task = 3\n"))
    stores = {way: RunStore(tmp_path / way) for way in ("ray", "local")}
    assert main(["sweep", str(spec), "--store", str(stores["ray"].root)]) == 0
    assert main(["sweep", str(spec), "--store", str(stores["local"].root), "--local"]) == 0
    assert "12 cells, 12 ok, 0 failed" in capsys.readouterr().out

    def rows(store: RunStore) -> pd.DataFrame:
        found = store.query("SELECT * FROM rows").drop(columns=VOLATILE)
        found["strategy"] = found["strategy"].fillna("")
        return found.sort_values(["cell_id", "strategy"]).reset_index(drop=True)

    ray_rows, local_rows = rows(stores["ray"]), rows(stores["local"])
    assert ray_rows["cell_id"].nunique() == 12 and (ray_rows["status"] == "ok").all()
    pd.testing.assert_frame_equal(ray_rows, local_rows)
