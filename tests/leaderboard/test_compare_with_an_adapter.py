"""The issue's "Done when" for the leaderboard: ``models compare`` on the embedded bars with the baseline, random-
weight toto/toto2/kronos and one optional adapter (chronos2) prints the table, writes the JSON and records one
run; without the extra, choosing chronos2 is one line and exit 2 before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from marketcast.commands import main
from marketcast.runs.store import RunStore
from tests.leaderboard.test_models_compare import FORECAST_DRIVEN_ONLY, _assert_row_is_the_backtest

pytest.importorskip("chronos.chronos2", reason="the chronos extra: pip install 'marketcast[chronos]'")

MODELS = ("baseline", "toto", "toto2", "kronos", "chronos2")
RANDOM = ["--weights", "toto=random", "--weights", "toto2=random:4m", "--weights", "kronos=random",
          "--weights", "chronos2=random"]
SMALL = ["--windows", "5", "--samples", "8", "--context", "32"]


def test_five_models_one_table_one_json_one_run(tmp_path, capsys, monkeypatch):
    from marketcast.console import console

    monkeypatch.setattr(console, "width", 260)  # made at import: another test file may have imported it first
    capsys.readouterr()
    assert main(["models", "compare", "--symbols", "SP500", "--models", ",".join(MODELS), *RANDOM, *SMALL]) == 0
    lines = capsys.readouterr().out.strip().splitlines()

    # the table: one row per model in the order asked, every random-weight model flagged, buy & hold last
    rows = {line.strip("│┃ ").split()[0]: line for line in lines if line.startswith("│")}
    assert list(rows) == [*MODELS, "buy"] and "benchmark" in rows.pop("buy")
    assert "(random)" not in rows["baseline"] and all("(random)" in rows[m] for m in MODELS[1:])
    assert "random:tiny(seed=0)" in rows["chronos2"] and rows["chronos2"].rstrip("│ ").endswith("cpu")

    # the stored run: kind leaderboard, one cell per model, the rows the table printed
    run_id = lines[-1].removeprefix("run ")
    runs = RunStore(os.environ["MARKETCAST_RUN_STORE"])
    info = runs.info(run_id)
    assert info["kind"] == "leaderboard" and info["cells_total"] == len(MODELS)
    stored = info["spec"]["leaderboard"]
    assert [r["model"] for r in stored] == list(MODELS)
    cells = runs.query("SELECT model, weights FROM cells ORDER BY cell_index", run_ids=[run_id])
    assert list(cells["model"]) == list(MODELS)
    assert list(cells["weights"].fillna("")) == ["", "random", "random:4m", "random", "random"]
    for row in stored:
        assert row["symbols"][0]["windows"] == 5 and np.isfinite(row["skill"]["crps"]) and row["skill"]["crps"] > 0
        assert row["cost"]["device"] == "cpu" and row["cost"]["windows_per_s"] > 0
        assert f"{row['skill']['crps']:.5f}" in rows[row["model"]]  # the table shows the stored number
    crps = [r["skill"]["crps"] for r in stored]
    assert len(set(crps)) == len(crps)  # five models, five forecasts

    # the JSON of the same windows: chronos2's row is the stored one, and a plain backtest's
    capsys.readouterr()
    assert main(["models", "compare", "--symbols", "SP500", "--models", "baseline,chronos2",
                 "--weights", "chronos2=random", *SMALL, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    chronos2 = doc["models"][1]
    assert chronos2["model"] == "chronos2" and chronos2["random_weights"] is True
    assert chronos2["weights_source"] == "random:tiny(seed=0)"
    assert chronos2["skill"] == stored[-1]["skill"] and chronos2["trading"] == stored[-1]["trading"]
    capsys.readouterr()
    assert main(["backtest", "SP500", "--model", "chronos2", "--weights", "random", *SMALL, *FORECAST_DRIVEN_ONLY,
                 "--output-dir", str(tmp_path / "bt"), "--json"]) == 0
    _assert_row_is_the_backtest(chronos2, json.loads(capsys.readouterr().out))


def test_without_the_extra_choosing_chronos2_is_one_line_and_no_run(tmp_path):
    code = (
        "import sys; sys.modules['chronos'] = None\n"
        "from marketcast.commands import main\n"
        "assert main(['models', 'compare', '--help']) == 0\n"
        "from marketcast.leaderboard.compare import default_models\n"
        "default = default_models().split(',')\n"
        "assert 'chronos2' not in default and {'baseline', 'toto', 'toto2', 'kronos'} <= set(default), default\n"
        "sys.exit(main(['models', 'compare', '--symbols', 'SP500', '--models', 'baseline,chronos2', "
        "'--windows', '3']))\n"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MARKETCAST_RUN_STORE": str(tmp_path / "runs")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "needs the optional package chronos-forecasting" in err[0]
    assert "pip install 'marketcast[chronos]'" in err[0]
    assert RunStore(str(tmp_path / "runs")).infos() == {}
