"""Sweeps on a local Ray: every cell equals ``marketcast backtest`` of that cell; failures are recorded."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.runs.codec import decode
from marketcast.runs.store import RunStore
from marketcast.sweep.execute import actor_resources

from .helpers import write_bars

pytestmark = pytest.mark.usefixtures("ray_address")

VOLATILE = ["run_id", "kind", "spec_hash", "finished_at", "seconds", "cell_index", "record"]
SETTINGS = {  # the spec's [[settings]] bundles and the same settings as backtest flags
    "plain": ({}, []),
    "mean-wide": ({"point": '"mean"', "ci_band": "[0.3, 0.7]"}, ["--point", "mean", "--ci-low", "0.3",
                                                                  "--ci-high", "0.7"]),
    "p40-costly": ({"point": '"p40"', "ci_multiplier": "1.5", "spread": "0.001"},
                   ["--point", "p40", "--ci-multiplier", "1.5", "--spread", "0.001"]),
}
FAST = {"windows": 15, "context": 48, "num_samples": 32}
FAST_FLAGS = ["--windows", "15", "--context", "48", "--samples", "32"]


def _spec(path: Path, data: str, grid: str, extra: str = "") -> Path:
    options = "\n".join(f"{k} = {v}" for k, v in FAST.items())
    path.write_text(f"[data]\n{data}\n\n[options]\n{options}\n\n[grid]\n{grid}\n{extra}")
    return path


def _rows(store: RunStore, run_id: str) -> pd.DataFrame:
    rows = store.query("SELECT * FROM rows", run_ids=[run_id]).drop(columns=VOLATILE)
    rows["strategy"] = rows["strategy"].fillna("")
    return rows.sort_values(["cell_id", "strategy"]).reset_index(drop=True)


def test_every_cell_equals_the_backtest_of_that_cell(tmp_path, capsys):
    data = write_bars(tmp_path / "bars", ["AAA", "BBB", "CCC"])
    bundles = "".join(f'\n[[settings]]\nname = "{name}"\n' + "".join(f"{k} = {v}\n" for k, v in opts.items())
                      for name, (opts, _) in SETTINGS.items())
    spec = _spec(tmp_path / "grid.toml", 'dir = "bars"', 'fill_mode = ["touch", "penetrate"]', bundles)
    store = RunStore(os.environ["MARKETCAST_RUN_STORE"])
    assert main(["sweep", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "18 cells, 18 ok, 0 failed" in out
    assert "run: 18 trials (cells); best cell " in out and "AAA: 6 trials (cells)" in out  # every cell a trial
    (sweep_run,) = store.run_ids()
    swept = _rows(store, sweep_run)
    assert len(swept) == 18 * 9 and (swept["status"] == "ok").all()

    for fill in ("touch", "penetrate"):
        for name, (_, flags) in SETTINGS.items():
            assert main(["backtest", "AAA", "BBB", "CCC", "--data-dir", str(data), "--fill-mode", fill, *FAST_FLAGS,
                         *flags, "--output-dir", str(tmp_path / "bt" / f"{fill}-{name}")]) == 0
    capsys.readouterr()
    backtests = [r for r in store.run_ids() if r != sweep_run]
    assert len(backtests) == 6
    recorded = pd.concat([_rows(store, r) for r in backtests]).sort_values(["cell_id", "strategy"])
    recorded = recorded.reset_index(drop=True)[swept.columns]
    pd.testing.assert_frame_equal(recorded, swept)  # same cells (ids), same metrics, returns and records' times

    by_cell = store.query("SELECT cell_id, run_id, record FROM cells")
    for cell_id, group in by_cell.groupby("cell_id"):
        trades = [decode(record).trades() for record in group["record"]]
        assert len(trades) == 2
        pd.testing.assert_frame_equal(trades[0], trades[1])


def test_bad_data_and_a_model_that_fails_to_load_fail_their_cells_only(tmp_path, capsys):
    data = write_bars(tmp_path / "bars", ["GOOD", "BAD", "SHORT"])
    bad = pd.read_csv(data / "BAD.csv")
    bad.loc[40, "high"] = bad.loc[40, "low"] * 0.5
    bad.to_csv(data / "BAD.csv", index=False)
    pd.read_csv(data / "SHORT.csv").head(10).to_csv(data / "SHORT.csv", index=False)
    spec = _spec(tmp_path / "faults.toml", 'dir = "bars"\nsymbols = ["GOOD", "BAD", "SHORT", "MISSING"]',
                 'model = ["baseline", "kronos"]\nweights = ["auto", "/no/such/weights"]',
                 '\n[models.kronos]\ndevice = "cuda"\n')
    store = RunStore(tmp_path / "store")
    assert main(["sweep", str(spec), "--store", str(store.root)]) == 1
    out, err = capsys.readouterr()
    assert "16 cells, 1 ok, 15 failed" in out and "failed: BAD model=baseline weights=auto" in err
    cells = store.query("SELECT symbol, model, weights, status, error FROM cells ORDER BY cell_index")
    assert len(cells) == 16
    ok = cells[cells.status == "ok"]
    assert list(zip(ok.symbol, ok.model, ok.weights)) == [("GOOD", "baseline", "auto")]
    errors = {(r.symbol, r.model, r.weights): r.error for r in cells[cells.status == "error"].itertuples()}
    assert "row 41 (line 42), column 'high'" in errors[("BAD", "baseline", "auto")]
    assert "has 10 rows but 17 are needed" in errors[("SHORT", "baseline", "auto")]
    assert "no MISSING.csv or MISSING.parquet" in errors[("MISSING", "baseline", "auto")]
    # the actor of a model that cannot load stays up and fails each of its cells with the reason
    assert errors[("GOOD", "baseline", "/no/such/weights")] == (
        "model 'baseline' failed to load: the baseline forecaster has no weights (got --weights /no/such/weights); "
        "drop the option")
    # a CUDA model on a cluster without a GPU fails at once instead of waiting for a GPU forever
    assert errors[("GOOD", "kronos", "auto")] == "device 'cuda' needs a GPU and the Ray cluster has none"


def test_model_actors_ask_for_a_core_and_a_gpu_only_for_cuda():
    assert actor_resources("cuda") == actor_resources("cuda:1") == {"num_cpus": 1, "num_gpus": 1}
    assert actor_resources("cpu") == {"num_cpus": 1, "num_gpus": 0}


def test_a_tiny_toto_is_served_by_an_actor_and_equals_its_backtest(tmp_path, capsys):
    from marketcast.forecast.toto import TotoConfig
    from marketcast.forecast.toto.loading import save_checkpoint
    from marketcast.forecast.toto.model import TotoModel, init_weights

    weights = tmp_path / "tiny-toto"
    save_checkpoint(init_weights(TotoModel(TotoConfig.tiny()), seed=3), TotoConfig.tiny(), weights)
    data = write_bars(tmp_path / "bars", ["LOWA", "LOWB"], n=100, vol=0.002)  # calm bars: no negative draws
    spec = _spec(tmp_path / "toto.toml", 'dir = "bars"', 'fill_mode = ["touch", "penetrate"]',
                 f'\n[models.toto]\nweights = "{weights}"\n\n[ray]\nwhole_jobs = false\n'  # two symbols a call
                 ).read_text().replace("[grid]", '[grid]\nmodel = ["toto"]')
    (tmp_path / "toto.toml").write_text(spec)
    store = RunStore(os.environ["MARKETCAST_RUN_STORE"])
    assert main(["sweep", str(tmp_path / "toto.toml")]) == 0
    (sweep_run,) = store.run_ids()
    for symbol in ("LOWA", "LOWB"):  # one symbol per backtest: the forecast call the actor makes
        assert main(["backtest", symbol, "--model", "toto", "--weights", str(weights), "--data-dir", str(data),
                     *FAST_FLAGS, "--output-dir", str(tmp_path / symbol)]) == 0
    capsys.readouterr()
    swept = _rows(store, sweep_run)
    swept = swept[swept.fill_mode == "touch"].reset_index(drop=True)
    recorded = pd.concat([_rows(store, r) for r in store.run_ids() if r != sweep_run])
    recorded = recorded.sort_values(["cell_id", "strategy"]).reset_index(drop=True)[swept.columns]
    assert (swept.model == "toto").all() and len(swept) == 2 * 9
    pd.testing.assert_frame_equal(recorded, swept)
