"""A run you can find: ``marketcast backtest ... | tail -1`` (and a sweep's last line) names the run, and
``marketcast report`` takes that name; ``--json`` carries the id; with the run store off there is no id to
print."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

from marketcast.commands import main
from marketcast.runs.store import RunStore
from tests.conftest import make_ohlcv

FAST = ["--windows", "12", "--samples", "16", "--context", "64", "--no-spa"]
RUN_LINE = re.compile(r"^run (backtest-\d{8}-\d{6}-[0-9a-f]{4})$")


def _marketcast(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "marketcast.commands", *args])


def test_backtest_piped_to_tail_names_the_run_and_report_remakes_it(tmp_path):
    path = tmp_path / "ABC.csv"
    make_ohlcv(60, seed=2, freq="B").to_csv(path)
    env = {**os.environ, "MARKETCAST_RUN_STORE": str(tmp_path / "store")}
    backtest = _marketcast(["backtest", str(path), *FAST, "--output-dir", str(tmp_path / "bt")])
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{backtest} | tail -1"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run_id = RUN_LINE.match(done.stdout.strip()).group(1)
    assert list(RunStore(tmp_path / "store").infos()) == [run_id]
    report = subprocess.run(shlex.split(_marketcast(["report", run_id, "--no-html", "-o", str(tmp_path / "rep")])),
                            env=env, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "rep" / "latest" / "ABC.json").read_text() == (tmp_path / "bt" / "latest" / "ABC.json").read_text()


def test_the_json_carries_the_run_id_and_a_store_that_is_off_prints_none(tmp_path, capsys, monkeypatch):
    path = tmp_path / "ABC.csv"
    make_ohlcv(60, seed=2, freq="B").to_csv(path)
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "store"))
    capsys.readouterr()
    assert main(["backtest", str(path), *FAST, "--output-dir", str(tmp_path / "a"), "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert list(RunStore(tmp_path / "store").infos()) == [doc["run_id"]]
    assert main(["backtest", str(path), *FAST, "--output-dir", str(tmp_path / "b")]) == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert RUN_LINE.match(last) and last != f"run {doc['run_id']}"
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    assert main(["backtest", str(path), *FAST, "--output-dir", str(tmp_path / "c")]) == 0
    shown = capsys.readouterr().out
    assert not any(line.startswith("run ") for line in shown.splitlines()) and "windows" in shown
    assert main(["backtest", str(path), *FAST, "--output-dir", str(tmp_path / "d"), "--json"]) == 0
    assert "run_id" not in json.loads(capsys.readouterr().out)[0]


def test_a_sweep_names_its_run_last_and_a_dated_cell_is_the_dated_backtest(tmp_path, capsys, monkeypatch):
    from tests.sweep.helpers import write_bars

    write_bars(tmp_path / "bars", ["AAA"], n=90)
    spec = tmp_path / "dated.toml"
    spec.write_text("[data]\ndir = 'bars'\nstart = '2022-03-01'\nend = '2022-03-31'\n"
                    "[options]\nnum_samples = 16\ncontext = 32\nspa = false\n")
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "store"))
    capsys.readouterr()
    assert main(["sweep", str(spec), "--local"]) == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"run dated-\d{8}-\d{6}-[0-9a-f]{4}", last)
    assert main(["runs", "show", last.split()[1], "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)["records"]
    assert main(["backtest", str(tmp_path / "bars" / "AAA.csv"), "--start", "2022-03-01", "--end", "2022-03-31",
                 "--samples", "16", "--context", "32", "--no-spa", "--output-dir", str(tmp_path / "bt"),
                 "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert (cell["windows"], cell["first_decision"], cell["last_settle"]) == (
        23, "2022-03-01T00:00:00+00:00", "2022-04-01T00:00:00+00:00") == (
        doc["runs"], doc["first_decision"], doc["last_settle"])
    assert cell["walk_forward"]["return"] == doc["walk_forward"]["return"]
    assert cell["buy_and_hold"] == {k: doc["benchmark"][k] for k in cell["buy_and_hold"]}
