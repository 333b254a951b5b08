"""``marketcast backtest`` records its run; ``runs list|show|query|compare`` and ``report`` read it back."""

import json
import os
from pathlib import Path

from marketcast.cli import main

FAST = ["--windows", "12", "--samples", "32", "--context", "64"]


def _backtest(tmp_path, name, *args):
    out = tmp_path / name
    assert main(["backtest", *FAST, "--output-dir", str(out), *args]) == 0
    return out


def _json(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    return code, json.loads(capsys.readouterr().out)


def test_a_backtest_is_recorded_and_its_reports_are_remade_byte_for_byte(tmp_path, capsys):
    out = _backtest(tmp_path, "bt", "--plots")
    code, runs = _json(capsys, "runs", "list", "--json")
    assert code == 0 and len(runs) == 1
    run = runs[0]
    assert run["kind"] == "backtest" and run["ok"] == 2 and run["failed"] == 0 and run["planned"] == 2
    assert run["symbols"] == 2 and run["models"] == "baseline" and run["code_version"].startswith("0.")
    code, shown = _json(capsys, "runs", "show", run["run_id"][:18], "--json")
    sp500 = json.loads((out / "SP500.json").read_text())
    simple = next(r for r in shown["summary"] if r["symbol"] == "SP500" and r["strategy"] == "simple")
    assert simple["cells"] == 1 and simple["return"] == sp500["strategies"]["simple"]["return"]
    code, rows = _json(capsys, "runs", "query", "SELECT symbol, count(*) AS n FROM results GROUP BY symbol "
                                                 "ORDER BY symbol", "--json")
    assert rows == [{"symbol": "NASDAQ", "n": 8}, {"symbol": "SP500", "n": 8}]
    assert main(["report", "latest", "--no-html", "--plots", "--output-dir", str(tmp_path / "again")]) == 0
    for name in ("SP500.json", "NASDAQ.json", "summary.md", "trades.csv", "SP500_equity.png", "NASDAQ_equity.png"):
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name
    capsys.readouterr()
    assert main(["runs", "list"]) == 0 and run["run_id"] in capsys.readouterr().out
    assert main(["runs", "show", "latest"]) == 0
    table = capsys.readouterr().out
    assert "2 cells ok, 0 failed, 2 planned" in table and "maxdiff" in table


def _combined(folder: Path, target: Path) -> Path:
    target.write_text(json.dumps([json.loads((folder / f"{s}.json").read_text()) for s in ("SP500", "NASDAQ")]))
    return target


def test_runs_compare_judges_like_compile_compare(tmp_path, capsys):
    cheap = _backtest(tmp_path, "cheap", "--fee", "0")
    dear = _backtest(tmp_path, "dear", "--fee", "0.02")
    capsys.readouterr()
    # by fee, not by list order: two runs started in the same second sort by their random suffix
    code, fees = _json(capsys, "runs", "query", "SELECT DISTINCT run_id, fee FROM cells", "--json")
    a, b = (next(r["run_id"] for r in fees if r["fee"] == fee) for fee in (0, 0.02))
    code_runs, by_runs = _json(capsys, "runs", "compare", a, b, "--json")
    code_files, by_files = _json(capsys, "compile", "compare", str(_combined(cheap, tmp_path / "a.json")),
                                 str(_combined(dear, tmp_path / "b.json")), "--json")
    assert code_runs == code_files == 1 and by_runs["status"] == by_files["status"] == "FAIL"
    assert by_runs["rows"] == by_files["rows"] and by_runs["metric_deltas"] == by_files["metric_deltas"]
    buy_hold = next(r for r in by_runs["rows"] if r["symbol"] == "SP500" and r["strategy"] == "buy_hold")
    assert buy_hold["return_delta"] < -0.05 and buy_hold["status"] == "FAIL"  # 24 round trips at 2 % a side
    assert by_runs["matched_on"] == ["symbol"]
    code, same = _json(capsys, "runs", "compare", a, a, "--json")
    assert code == 0 and same["status"] == "PASS" and all(r["return_delta"] == 0 for r in same["rows"])
    assert main(["runs", "compare", a, b]) == 1  # the table form exits the same way
    assert "overall: FAIL" in capsys.readouterr().out


def test_the_store_can_be_off_and_bad_references_are_one_line(tmp_path, capsys, monkeypatch):
    store = Path(os.environ["MARKETCAST_RUN_STORE"])
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    _backtest(tmp_path, "bt")
    assert not store.exists() or not any(store.iterdir())
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(store))
    assert main(["runs", "show", "latest"]) == 2
    assert "holds no runs yet" in capsys.readouterr().err
    _backtest(tmp_path, "bt2")
    capsys.readouterr()  # the backtest's own output
    assert main(["runs", "show", "latest", "--by", "colour"]) == 2
    err = capsys.readouterr().err
    assert "has no column colour" in err and len(err.strip().splitlines()) == 1
    assert main(["runs", "query", "SELECT nonsense FROM rows"]) == 2
    assert "query failed" in capsys.readouterr().err
