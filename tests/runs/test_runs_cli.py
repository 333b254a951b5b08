"""``marketcast backtest`` records its run; ``runs list|show|query|compare`` and ``report`` read it back."""

import json
import os
from pathlib import Path

from marketcast.commands import main

FAST = ["--windows", "12", "--samples", "32", "--context", "64"]


def _backtest(tmp_path, name, *args):
    """The run's own folder under the output root ``tmp_path/name``."""
    out = tmp_path / name
    assert main(["backtest", *FAST, "--output-dir", str(out), *args]) == 0
    return out / "latest"


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
        assert (tmp_path / "again" / "latest" / name).read_bytes() == (out / name).read_bytes(), name
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
    code_runs, by_runs = _json(capsys, "runs", "compare", a, b, "--strict", "--json")
    code_files, by_files = _json(capsys, "compile", "compare", str(_combined(cheap, tmp_path / "a.json")),
                                 str(_combined(dear, tmp_path / "b.json")), "--json")
    assert code_runs == code_files == 1 and by_runs["status"] == by_files["status"] == "FAIL"
    assert by_runs["settings"] == [{"setting": "fee", "a": 0.0, "b": 0.02}] and by_runs["results"] == "FAIL"
    # without --strict the fee is what the runs were meant to differ in: listed, exit 0, the same rows
    code, listed = _json(capsys, "runs", "compare", a, b, "--json")
    assert code == 0 and listed["status"] == "SETTINGS DIFFER" and listed["rows"] == by_runs["rows"]
    assert listed["notes"][0].startswith("settings differ: fee 0.0 vs 0.02")
    assert by_runs["rows"] == by_files["rows"] and by_runs["metric_deltas"] == by_files["metric_deltas"]
    buy_hold = next(r for r in by_runs["rows"] if r["symbol"] == "SP500" and r["strategy"] == "buy_hold")
    assert buy_hold["return_delta"] < -0.05 and buy_hold["status"] == "FAIL"  # 24 round trips at 2 % a side
    assert by_runs["matched_on"] == ["symbol"]
    code, same = _json(capsys, "runs", "compare", a, a, "--json")
    assert code == 0 and same["status"] == "PASS" and all(r["return_delta"] == 0 for r in same["rows"])
    assert main(["runs", "compare", a, b, "--strict"]) == 1  # the table form exits the same way
    assert "overall: FAIL" in capsys.readouterr().out
    assert main(["runs", "compare", a, b]) == 0
    assert "overall: SETTINGS DIFFER" in capsys.readouterr().out


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


def test_runs_show_tells_the_record_settings_costs_model_and_selection(tmp_path, capsys):
    from marketcast.backtest.tables import pct

    capsys.readouterr()
    # --exit close: in 12 windows the walk-forward record trades often enough to have every selection figure
    # (under the default next-open every other same-side entry is refused as a wash)
    assert main(["backtest", "SP500", *FAST, "--fee", "0.001", "--half-spread-bps", "2", "--slippage-bps", "3",
                 "--exit", "close", "--output-dir", str(tmp_path / "bt"), "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    code, shown = _json(capsys, "runs", "show", doc["run_id"], "--json")
    assert code == 0
    (cell,) = shown["records"]
    keys = ("return", "annual_return", "sharpe", "sharpe_ci_low", "sharpe_ci_high", "psr", "max_drawdown", "trades",
            "mc_band")
    assert cell["walk_forward"] == {k: doc["walk_forward"][k] for k in keys}
    assert cell["buy_and_hold"] == {k: doc["benchmark"][k] for k in keys[:-1]}  # no forecast, no MC error
    assert cell["buy_and_hold"]["max_drawdown"] < 0 and cell["buy_and_hold"]["trades"] == 1
    assert (cell["windows"], cell["first_decision"], cell["last_settle"]) == (
        12, doc["first_decision"], doc["last_settle"])
    costs = cell["costs"]  # 0.001 a side is 10 bp; the quoted spread is twice the half given
    assert (costs["fee_bps"], costs["half_spread_bps"], costs["slippage_bps"], costs["round_trip_bps"]) == (
        10.0, 2.0, 3.0, 30.0)
    assert cell["settings"]["fee"] == 0.001 and cell["settings"]["spread"] == 0.0004
    assert cell["settings"]["windows"] == 12 and cell["settings"]["num_samples"] == 32
    assert cell["model"] == {"model": "baseline", "weights": None, "device": "cpu", "dtype": "float32",
                             "compile": None, "source": None, "random_weights": False}
    eligible = sum(m["trades"] >= doc["walk_forward"]["min_trades"] for m in doc["strategies"].values())
    assert cell["selection"]["trials"] == doc["selection"]["trials"] == eligible  # those the rule could pick
    assert cell["selection"]["strategies"] == 8
    for key in ("dsr_pick", "dsr_walk_forward", "pbo", "cscv_splits", "spa_pvalue", "verdict", "effective_trials",
                "psr_walk_forward", "walk_forward_rules", "spa_intraday_pvalue", "spa_cash_pvalue"):
        assert cell["selection"][key] == doc["selection"][key], key
    assert all(row["max_drawdown"] <= 0 for row in shown["summary"])
    simple = next(r for r in shown["summary"] if r["strategy"] == "simple")
    assert simple["max_drawdown"] == doc["strategies"]["simple"]["max_drawdown"]
    assert main(["runs", "show", doc["run_id"]]) == 0
    text = capsys.readouterr().out
    bh = next(line for line in text.splitlines() if "│ buy & hold" in line)  # its row of the record table
    assert pct(cell["buy_and_hold"]["max_drawdown"]) in bh and pct(cell["buy_and_hold"]["return"]) in bh
    assert f"12 {doc['first_decision'][:10]} → {doc['last_settle'][:10]}" in text and "walk-forward" in text
    assert "costs fee 10 bp + half-spread 2 bp + slippage 3 bp a side" in text
    assert "model baseline, no learned weights, cpu float32" in text and "RANDOM" not in text
    sel = doc["selection"]
    assert (f"selection over its strategies: {eligible} trials (eligible of 8 strategies, "
            f"{sel['effective_trials']:.1f} effective: eigenvalues, Li & Ji 2005), DSR pick") in text
    assert (f"walk-forward rule PSR {sel['psr_walk_forward']:.2f} DSR {sel['dsr_walk_forward']:.2f}, PBO" in text
            and f"SPA p c→c {sel['spa_pvalue']:.3f} o→c {sel['spa_intraday_pvalue']:.3f} cash" in text)
    assert "settings: windows=12, context=64, num_samples=32, seed=0" in text and "fee=0.001" in text
    assert "{" not in text.split("settings:")[1].splitlines()[0]  # no Python repr of the selection rule


def test_random_weights_are_flagged_however_the_model_names_them():
    from marketcast.runs.overview import random_weights

    assert random_weights("random", {"model": "toto"})
    assert random_weights(None, {"model": "toto", "source": "random(seed=0)"})  # Toto's checkpoint name
    assert random_weights(None, {"model": "kronos-small-random"})  # Kronos's label
    assert not random_weights("Datadog/Toto-Open-Base-1.0", {"model": "toto", "source": "Datadog/Toto-Open-Base-1.0"})
    assert not random_weights(None, {"model": "baseline"})


def test_two_exit_rules_are_settings_that_differ_and_every_report_names_the_rule(tmp_path, capsys):
    closed = _backtest(tmp_path, "close", "SP500", "--exit", "close")
    opened = _backtest(tmp_path, "open", "SP500")  # the default rule
    assert json.loads((closed / "SP500.json").read_text())["config"]["exit"] == "close"
    assert json.loads((opened / "SP500.json").read_text())["config"]["exit"] == "next-open"
    assert "exit `next-open`: each decision at bar t enters on bar t+1 and exits at bar t+2's open" in (
        opened / "summary.md").read_text()
    assert "refused_wash" in (opened / "trades.csv").read_text()  # simple goes long day after day
    code, rules = _json(capsys, "runs", "query", "SELECT DISTINCT run_id, exit FROM cells", "--json")
    a, b = (next(r["run_id"] for r in rules if r["exit"] == rule) for rule in ("close", "next-open"))
    code, listed = _json(capsys, "runs", "compare", a, b, "--json")
    assert code == 0 and listed["status"] == "SETTINGS DIFFER"
    assert listed["settings"] == [{"setting": "exit", "a": "close", "b": "next-open"}]
    assert listed["notes"][0].startswith("settings differ: exit close vs next-open")
    assert main(["runs", "show", b]) == 0
    shown = capsys.readouterr().out
    assert "exit=next-open" in shown and "  exit next-open · vs buy & hold" in shown  # its settings and its strip
    assert "exit `close`: each decision at bar t is settled on bar t+1" in (closed / "summary.md").read_text()
    assert main(["backtest", "--exit", "open", "--output-dir", str(tmp_path / "bad")]) == 2
    assert "'open' is not one of 'close', 'next-open'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_a_run_recorded_before_exit_existed_reads_as_a_close_run(tmp_path, capsys):
    """A run recorded before ``--exit`` existed holds no exit (no column, none in its records' config); it settled
    at the close, so the store reads "close" for it, not today's default: against a ``--exit close`` run of the
    same cells it is the same settings and the same figures (PASS), against a default run "settings differ"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _backtest(tmp_path, "old", "SP500", "--exit", "close")
    _, listed = _json(capsys, "runs", "list", "--json")
    old = listed[0]["run_id"]
    folder = Path(os.environ["MARKETCAST_RUN_STORE"]) / old
    summary = json.loads((folder / "summary.json").read_text())
    for entry in summary["files"]:  # the part as a marketcast before --exit wrote it
        part = folder / entry[0]
        table = pq.read_table(part)
        records = table.column("record").to_pylist()
        assert all(r is None or r.count(',"exit":"close"') == 1 for r in records)
        table = table.drop_columns(["exit"]).set_column(
            table.schema.get_field_index("record") - (table.schema.get_field_index("exit") <
                                                      table.schema.get_field_index("record")),
            "record", pa.array([None if r is None else r.replace(',"exit":"close"', "") for r in records]))
        pq.write_table(table, part)
        entry[1] = part.stat().st_size
    (folder / "summary.json").write_text(json.dumps(summary))
    _backtest(tmp_path, "close", "SP500", "--exit", "close")
    _backtest(tmp_path, "default", "SP500")
    _, rules = _json(capsys, "runs", "query", "SELECT DISTINCT run_id, exit FROM cells ORDER BY run_id", "--json")
    closed, opened = (next(r["run_id"] for r in rules if r["exit"] == rule and r["run_id"] != old)
                      for rule in ("close", "next-open"))
    assert {r["run_id"]: r["exit"] for r in rules} == {old: "close", closed: "close", opened: "next-open"}
    code, same = _json(capsys, "runs", "compare", old, closed, "--json")
    assert code == 0 and same["status"] == "PASS" and same["settings"] == []
    assert all(r["return_delta"] == 0 for r in same["rows"])
    code, differ = _json(capsys, "runs", "compare", old, opened, "--json")
    assert code == 0 and differ["status"] == "SETTINGS DIFFER"
    assert differ["settings"] == [{"setting": "exit", "a": "close", "b": "next-open"}]
    assert main(["runs", "show", old]) == 0
    shown = capsys.readouterr().out
    assert "  exit close · vs buy & hold" in shown and "next-open" not in shown  # the strip of the decoded record
