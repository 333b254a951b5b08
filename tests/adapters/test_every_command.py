"""An adapter is a model like the others: `--model tirex` (the fastest of the three, random tiny weights) runs
through `forecast`, a `sweep` cell and `trade replay`, the commands beside `backtest` and `models compare` (tested
in test_tirex.py and tests/leaderboard), and each records which model it ran."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from marketcast.cli import main
from marketcast.runs.store import RunStore

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the random-weights warning


def test_forecast_with_tirex(capsys):
    capsys.readouterr()
    assert main(["forecast", "SP500", "--model", "tirex", "--weights", "random", "--samples", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["symbol"] == "SP500" and doc["model"] == "tirex"
    numbers = [v for v in _numbers(doc) if v is not None]
    assert numbers and np.isfinite(numbers).all()


def _numbers(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)
    elif isinstance(node, float):
        yield node


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
