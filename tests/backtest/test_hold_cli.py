"""``--hold`` on ``backtest`` and ``models compare``: the run store records it, every report names it, two runs
that differ in it are "settings differ", and it changes what the walk-forward record earned."""

from __future__ import annotations

import json
import os

from marketcast.commands import main
from marketcast.runs.store import RunStore

from tests.leaderboard.test_models_compare import TINY, _assert_row_is_the_backtest, _backtest, _json

FAST = ["SP500", "--windows", "60", "--samples", "32", "--context", "64", "--exit", "next-open"]


def test_a_held_run_is_recorded_named_in_every_report_and_a_setting_that_differs(tmp_path, capsys):
    docs = {}
    for name, extra in (("churn", []), ("held", ["--hold"])):
        assert main(["backtest", *FAST, *extra, "--output-dir", str(tmp_path / name)]) == 0
        out = tmp_path / name / "latest"
        docs[name] = (json.loads((out / "SP500.json").read_text()), (out / "summary.md").read_text())
    (churn, churn_md), (held, held_md) = docs["churn"], docs["held"]
    assert (churn["config"]["hold"], held["config"]["hold"]) == (False, True)
    assert "Hold: the walk-forward pick's position is held while its decision stays on its side" in held_md
    assert "it leaves at the next bar's open once the decision turns" in held_md and "Hold:" not in churn_md
    # the same strategies (their MC errors share one fitted exponent with the walk-forward record's, so those
    # move); the walk-forward record is what the held position earned
    same = {n: {k: v for k, v in m.items() if not k.startswith("mc_")} for n, m in churn["strategies"].items()}
    assert same == {n: {k: v for k, v in m.items() if not k.startswith("mc_")} for n, m in held["strategies"].items()}
    assert held["walk_forward"]["return"] != churn["walk_forward"]["return"]
    capsys.readouterr()
    assert main(["runs", "query", "SELECT DISTINCT run_id, hold FROM cells", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    a, b = (next(r["run_id"] for r in rows if r["hold"] == flag) for flag in (False, True))
    assert main(["runs", "compare", a, b, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["status"] == "SETTINGS DIFFER"
    assert listed["settings"] == [{"setting": "hold", "a": False, "b": True}]
    # the held record is stored with the run: its reports are remade from the store byte for byte
    assert main(["report", b, "--no-html", "--output-dir", str(tmp_path / "again")]) == 0
    for name in ("SP500.json", "summary.md", "trades.csv"):
        assert (tmp_path / "again" / "latest" / name).read_bytes() == (tmp_path / "held" / "latest" / name).read_bytes()


def test_models_compare_with_hold_equals_the_backtest_with_hold(tmp_path, capsys):
    doc = _json(capsys, "models", "compare", "--symbols", "SP500", "--models", "baseline", "--windows", "40",
                *TINY, "--exit", "next-open", "--hold", "--json")
    assert (doc["exit"], doc["hold"]) == ("next-open", True)
    (row,) = doc["models"]
    held = _backtest(capsys, tmp_path, ["SP500"], "baseline", None, 40, *TINY, "--exit", "next-open", "--hold")
    _assert_row_is_the_backtest(row, held)
    churn = _backtest(capsys, tmp_path, ["SP500"], "baseline", None, 40, *TINY, "--exit", "next-open")
    assert row["symbols"][0]["sharpe"] != churn[0]["walk_forward"]["sharpe"]  # holding reached the leaderboard
    cells = RunStore(os.environ["MARKETCAST_RUN_STORE"]).query("SELECT hold FROM cells", run_ids=[doc["run_id"]])
    assert list(cells["hold"]) == [True]
