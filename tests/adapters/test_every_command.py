"""An adapter is a model like the others: `--model tirex` (the fastest of the three, random tiny weights) runs
through `forecast`, a `sweep` cell and `trade replay`, the commands beside `backtest` and `models compare` (tested
in test_tirex.py and tests/leaderboard), and each records which model it ran."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from marketcast.commands import main
from marketcast.runs.store import RunStore

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the random-weights warning


def test_forecast_with_tirex_prints_the_models_own_quantiles(capsys):
    """`forecast`'s p10/p50/p90 are TiRex's own knots (the forecast reads a quantile model's quantiles, not its
    samples), for the window of the last 512 bars."""
    from marketcast.data import load_symbol
    from marketcast.forecast.base import make_batch
    from marketcast.forecast.registry import load_forecaster

    capsys.readouterr()
    assert main(["forecast", "SP500", "--model", "tirex", "--weights", "random", "--samples", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["symbol"] == "SP500" and doc["model"] == "tirex" and len(doc["steps"]) == doc["horizon"]
    frame = load_symbol("SP500").frame
    knots = load_forecaster("tirex", weights="random").quantiles(make_batch(frame, [len(frame) - 1], 512),
                                                                 doc["horizon"])[0, 0]  # close: [9, H]
    for k, step in enumerate(doc["steps"]):
        got = [step["close_p10"], step["close_p50"], step["close_p90"]]
        np.testing.assert_allclose(got, knots[[0, 4, 8], k], rtol=1e-6)
        assert step["close_p10"] < step["close_p25"] < step["close_p50"] < step["close_p75"] < step["close_p90"]


def test_a_sweep_cell_of_tirex_equals_its_backtest(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text("name = 'adapters'\n[data]\nsymbols = ['SP500']\n[options]\nwindows = 4\nnum_samples = 32\n"
                    "[grid]\nmodel = ['tirex']\n[models.tirex]\nweights = 'random'\n")
    store = tmp_path / "runs"
    assert main(["sweep", str(spec), "--local", "--store", str(store)]) == 0
    runs = RunStore(store)
    (run_id,) = runs.infos()
    cells = runs.query("SELECT model, weights, symbol FROM cells", run_ids=[run_id])
    assert list(zip(cells["model"], cells["weights"], cells["symbol"])) == [("tirex", "random", "SP500")]
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--store", str(store), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert main(["backtest", "SP500", "--model", "tirex", "--weights", "random", "--windows", "4", "--samples", "32",
                 "--output-dir", str(tmp_path / "bt"), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)[0]
    (record,) = shown["records"]
    assert record["model"]["model"] == "tirex" and record["model"]["random_weights"] is True
    assert record["walk_forward"]["sharpe"] == pytest.approx(plain["walk_forward"]["sharpe"], rel=1e-12, abs=1e-15)


def test_trade_replay_with_tirex(tmp_path):
    state = tmp_path / "state"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["trade", "replay", "--from", "2017-03-01", "--to", "2017-03-03", "--symbols", "SP500",
                     "--model", "tirex", "--weights", "random", "--state-dir", str(state)]) == 0
    records = [json.loads(line) for line in (state / "records.jsonl").read_text().splitlines()]
    assert records and all(set(r["forecast_latency_s"]) == {"tirex"} for r in records)
