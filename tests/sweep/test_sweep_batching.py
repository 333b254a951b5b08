"""Cheap cells batched per Ray task (marketcast.sweep.batching): the sizing rule, the partition, and a sweep whose
tasks mix several jobs' cells recording exactly the rows of ``--local``; cheap jobs run whole (load, forecast and
settle in one task, several jobs a task), every job exactly once, with the rows of ``--local``, and a job whose
task's worker dies three times is poison."""

from __future__ import annotations

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.runs.store import RunStore
from marketcast.sweep import tasks
from marketcast.sweep.batching import MOST_CELLS, CellCost, partition, task_cells, whole_jobs, whole_task_cells
from marketcast.sweep.runner import latest, run_sweep
from marketcast.sweep.spec import load_spec

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
    """4 cells per symbol in chunks of 3, jobs split: the tasks are [A:3], [A:1, B:3], [B:1, C:3], [C:1] (one
    forecast call, submitted before any cell's seconds are known), so every task but the first and last settles
    two jobs."""
    write_bars(tmp_path / "bars", ["AAA", "BBB", "CCC"])
    spec = tmp_path / "grid.toml"
    spec.write_text(small_spec(grid='point = ["median", "mean"]',
                               tail="[ray]\ncells_per_task = 3\nwhole_jobs = false\n"))
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


@pytest.mark.parametrize(("overhead", "cell", "cells", "whole"), [
    (0.002, 0.040, 1, True),  # a 40 ms job against 20 x 3 round trips of 2 ms = 120 ms: too cheap to split
    (0.002, 0.050, 3, False),  # 150 ms against 120 ms: split
    (0.001, 0.040, 2, False),  # 80 ms against 60 ms
    (0.010, 0.100, 5, True),  # 500 ms against 600 ms
])
def test_a_job_under_twenty_times_its_three_round_trips_runs_whole(overhead, cell, cells, whole):
    assert whole_jobs(overhead, cell, cells) is whole


@pytest.mark.parametrize(("overhead", "cell", "left", "cpus", "cells"), [
    (0.002, 0.010, 1000, 2, 4),  # task_cells: 40 ms of 10 ms cells
    (0.002, 0.001, 100, 2, 25),  # task_cells wants 40; an equal share of 2 tasks per CPU is 100 / 4
    (0.002, 0.001, 3, 4, 1),  # fewer cells than tasks wanted: one a task
    (0.002, 0.0, 10, 1, 5),  # cells' seconds unknown: the share decides
])
def test_a_whole_task_is_sized_by_the_overhead_and_leaves_two_tasks_a_cpu(overhead, cell, left, cpus, cells):
    assert whole_task_cells(overhead, cell, left, cpus) == cells


def _whole_spec(tmp_path, symbols) -> object:
    """Two cells (fill modes) a symbol, one symbol a forecast call, jobs forced whole. Five symbols on 2 CPUs go,
    before any cell's seconds are in, as whole tasks of [1st, 2nd] (10 cells left: 3 wanted), [3rd] (6 left: 2),
    [4th], [5th] (1 each)."""
    write_bars(tmp_path / "bars", [s for s in symbols if s != "MISSING"])
    spec = tmp_path / "spec.toml"
    spec.write_text(small_spec(data=f"symbols = {list(symbols)!r}".replace("'", '"'),
                               tail="[ray]\nsymbols_per_call = 1\nwhole_jobs = true\n"))
    return load_spec(spec)


@pytest.mark.usefixtures("ray_address")
def test_whole_job_tasks_record_every_job_once_with_the_rows_of_local(tmp_path):
    spec = _whole_spec(tmp_path, ["AAA", "BBB", "CCC", "DDD", "MISSING"])
    stores = {way: RunStore(tmp_path / way) for way in ("ray", "local")}
    on_ray = run_sweep(spec, stores["ray"])
    assert (on_ray.ok, on_ray.failed) == (8, 2) and run_sweep(spec, stores["local"], local=True).ok == 8

    every = stores["ray"].query("SELECT cell_id, count(*) AS n FROM all_rows WHERE strategy IS NULL GROUP BY cell_id")
    assert len(every) == 10 and (every["n"] == 1).all()  # every cell once: no job sent twice, none left out

    def rows(store: RunStore) -> pd.DataFrame:
        found = store.query("SELECT * FROM rows").drop(columns=VOLATILE)
        found["strategy"] = found["strategy"].fillna("")
        return found.sort_values(["cell_id", "strategy"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(rows(stores["ray"]), rows(stores["local"]))
    errors = stores["ray"].query("SELECT symbol, error FROM cells WHERE status = 'error'")
    assert set(errors["symbol"]) == {"MISSING"} and errors["error"].str.contains("no MISSING.csv").all()


@pytest.mark.usefixtures("ray_address")
def test_a_job_whose_whole_task_kills_its_worker_three_times_is_poison(tmp_path, monkeypatch):
    class Deadly(tasks.ForecastServer):
        """Ends its worker process when asked to forecast BOOM (defined here: Ray ships it by value)."""

        def forecast(self, config, *loaded):
            import os as _os

            if any(getattr(item, "bars", None) is not None and item.bars.symbol == "BOOM" for item in loaded):
                _os._exit(3)
            return super().forecast(config, *loaded)

    monkeypatch.setattr(tasks, "ForecastServer", Deadly)
    spec = _whole_spec(tmp_path, ["AAA", "BOOM", "CCC"])
    store = RunStore(tmp_path / "store")
    outcome = run_sweep(spec, store)
    assert (outcome.ok, outcome.poison) == (4, 2)
    (run,) = store.run_ids()
    found = latest(store, run)
    cells = store.query("SELECT cell_id, symbol, error FROM cells", run_ids=[run])
    by_symbol = {s: sorted({found[c][0] for c in cells.cell_id[cells.symbol == s]}) for s in ("AAA", "BOOM", "CCC")}
    assert by_symbol == {"AAA": ["ok"], "BOOM": ["poison"], "CCC": ["ok"]}
    assert set(cells.error[cells.symbol == "BOOM"]) == {
        "poison: its model's process died 3 times forecasting it; not retried"}
