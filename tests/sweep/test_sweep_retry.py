"""``sweep --resume --retry-failed N`` finishes a run whose cells failed; a cell whose forecast kills its model's
actor 3 times is poison; ``sweep --local`` stores the cells a sweep on Ray stores."""

from __future__ import annotations

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.runs.codec import decode
from marketcast.runs.store import RunStore
from marketcast.sweep import tasks
from marketcast.sweep.plan import pool_key
from marketcast.sweep.runner import latest, run_sweep
from marketcast.sweep.spec import load_spec

from .helpers import small_spec, write_bars

pytestmark = pytest.mark.usefixtures("ray_address")

SPEC = small_spec(data="symbols = [{symbols}]", grid="{grid}")
VOLATILE = ["run_id", "finished_at", "seconds", "record"]


def _spec(tmp_path, symbols, grid: str = "") -> str:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(symbols=", ".join(f'"{s}"' for s in symbols), grid=grid))
    return str(path)


def test_a_resume_retries_the_failed_cells_and_keeps_their_errors(tmp_path, capsys):
    write_bars(tmp_path / "bars", ["AAA", "BBB"])
    spec = _spec(tmp_path, ["AAA", "BBB", "LATE"])  # LATE's bars appear after the first run
    store = RunStore(tmp_path / "store")
    assert main(["sweep", spec, "--store", str(store.root)]) == 1
    assert "6 cells, 4 ok, 2 failed" in capsys.readouterr().out

    write_bars(tmp_path / "late", ["LATE"])
    (tmp_path / "late" / "LATE.csv").rename(tmp_path / "bars" / "LATE.csv")
    assert main(["sweep", spec, "--store", str(store.root), "--resume", "--retry-failed", "1"]) == 0
    out = capsys.readouterr().out
    assert "6 cells, 6 ok, 0 failed, 4 from before the resume, 2 failed attempts retried" in out

    (run,) = store.run_ids()
    assert {status for status, _ in latest(store, run).values()} == {"ok"}
    # the views show each cell's latest attempt; all_rows keeps every attempt (the error history)
    shown = store.query("SELECT status, count(*) AS n FROM cells GROUP BY status", run_ids=[run])
    assert dict(zip(shown["status"], shown["n"])) == {"ok": 6}
    history = store.query("SELECT symbol, fill_mode, status, error, attempt FROM all_rows WHERE symbol = 'LATE' "
                          "AND strategy IS NULL ORDER BY fill_mode, coalesce(attempt, 0)", run_ids=[run])
    assert list(history["status"]) == ["error", "ok", "error", "ok"]
    assert list(history["attempt"].fillna(0).astype(int)) == [0, 1, 0, 1]
    assert "no LATE.csv or LATE.parquet" in history["error"].iloc[0]
    again = run_sweep(load_spec(tmp_path / "spec.toml"), store, resume=True)  # nothing failed: nothing to do
    assert (again.ok, again.failed, again.retried, again.skipped) == (6, 0, 0, 6)


def test_a_resume_retries_each_failed_cell_at_most_n_times(tmp_path):
    write_bars(tmp_path / "bars", ["AAA"])
    spec = load_spec(_spec(tmp_path, ["AAA", "NEVER"]))
    store = RunStore(tmp_path / "store")
    assert run_sweep(spec, store).failed == 2
    resumed = run_sweep(spec, store, resume=True, retry_failed=3)
    assert (resumed.ok, resumed.failed, resumed.retried) == (2, 2, 6)  # 2 cells x 3 attempts
    (run,) = store.run_ids()
    attempts = store.query("SELECT coalesce(attempt, 0) AS n FROM all_rows WHERE symbol = 'NEVER' "
                           "AND strategy IS NULL", run_ids=[run])
    assert sorted(attempts["n"]) == [0, 0, 1, 1, 2, 2, 3, 3]  # every failed attempt's error is kept
    assert run_sweep(spec, store, resume=True, retry_failed=0).retried == 0


def test_a_cell_that_kills_its_actor_three_times_is_poison(tmp_path, monkeypatch, capsys):
    class Deadly(tasks.ForecastServer):
        """Ends its worker process when asked to forecast the symbol BOOM (defined here, so Ray ships it by
        value to the actors' processes)."""

        def forecast(self, config, *loaded):
            import os as _os

            if any(getattr(item, "bars", None) is not None and item.bars.symbol == "BOOM" for item in loaded):
                _os._exit(3)
            return super().forecast(config, *loaded)

    monkeypatch.setattr(tasks, "ForecastServer", Deadly)
    write_bars(tmp_path / "bars", ["AAA", "BOOM", "CCC"])
    spec = _spec(tmp_path, ["AAA", "BOOM", "CCC"])
    with open(spec, "a") as file:  # split jobs, forecast on the model's actor (whole jobs: test_sweep_batching)
        file.write("[ray]\nwhole_jobs = false\n")
    store = RunStore(tmp_path / "store")
    assert main(["sweep", spec, "--store", str(store.root)]) == 1
    out, err = capsys.readouterr()
    assert "6 cells, 4 ok, 2 failed (2 poison)" in out
    assert "poison: BOOM fill_mode=touch: poison: its model's process died 3 times forecasting it; not retried" in err
    (run,) = store.run_ids()
    found = latest(store, run)
    cells = store.query("SELECT cell_id, symbol FROM cells", run_ids=[run])
    by_symbol = {s: sorted({found[c][0] for c in cells.cell_id[cells.symbol == s]}) for s in ("AAA", "BOOM", "CCC")}
    assert by_symbol == {"AAA": ["ok"], "BOOM": ["poison"], "CCC": ["ok"]}

    resumed = run_sweep(load_spec(spec), store, resume=True, retry_failed=2)  # poison is not tried again
    assert (resumed.ok, resumed.poison, resumed.retried) == (4, 2, 0)


def test_the_actor_pool_is_keyed_by_the_model_not_the_seed(tmp_path):
    write_bars(tmp_path / "bars", ["AAA"])
    cells = load_spec(_spec(tmp_path, ["AAA"], "seed = [1, 2]\nweights = [\"auto\", \"random\"]")).cells()
    keys = {(c.config.seed, c.weights): pool_key(c) for c in cells}
    assert keys[(1, "auto")] == keys[(2, "auto")]  # the seed goes with each forecast call
    assert keys[(1, "random")] != keys[(2, "random")]  # random weights are drawn from the seed


def test_a_local_sweep_stores_the_cells_a_sweep_on_ray_stores(tmp_path):
    write_bars(tmp_path / "bars", ["AAA", "BBB", "CCC"])
    spec = load_spec(_spec(tmp_path, ["AAA", "BBB", "CCC", "MISSING"], 'point = ["median", "mean"]\nseed = [0, 7]'))
    on_ray, local = RunStore(tmp_path / "ray"), RunStore(tmp_path / "local")
    assert (run_sweep(spec, on_ray).ok, run_sweep(spec, local, local=True).ok) == (24, 24)

    def rows(store: RunStore) -> pd.DataFrame:
        found = store.query("SELECT * FROM rows").drop(columns=VOLATILE)
        found["strategy"] = found["strategy"].fillna("")
        return found.sort_values(["cell_index", "strategy"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(rows(local), rows(on_ray))
    records = [s.query("SELECT cell_id, record FROM cells WHERE status = 'ok' ORDER BY cell_id") for s in (on_ray,
                                                                                                       local)]
    for ray_record, local_record in zip(records[0]["record"], records[1]["record"]):  # the trades too
        pd.testing.assert_frame_equal(decode(ray_record).trades(), decode(local_record).trades())
