"""``marketcast models compare`` on the embedded bars: every model's row holds what a plain ``marketcast backtest
--model X`` over the same windows reports, the table flags random weights, and the run store holds one run of a
cell per model x symbol."""

from __future__ import annotations

import mmap

import io
import json
import os
import time

import numpy as np
import pytest

from marketcast.commands import main
from marketcast.errors import ConfigError
from marketcast.leaderboard.compare import PeakMemory, is_random, parse_models, parse_weights
from marketcast.runs.store import RunStore

TINY = ["--samples", "16", "--context", "64"]


def _json(capsys, *args: str):
    capsys.readouterr()
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def _backtest(capsys, tmp_path, symbols: list[str], model: str, weights: str | None, windows: int) -> list[dict]:
    """The plain backtest of the same windows, as a user runs it."""
    extra = [] if weights is None else ["--weights", weights]
    return _json(capsys, "backtest", *symbols, "--model", model, *extra, "--windows", str(windows), *TINY,
                 "--output-dir", str(tmp_path / f"bt-{model}"), "--json")


def _assert_row_is_the_backtest(row: dict, docs: list[dict]) -> None:
    """Per symbol: the same MASE, CRPS, 80 % coverage, walk-forward Sharpe and CI, DSR, drawdown and trades."""
    assert [s["symbol"] for s in row["symbols"]] == [d["symbol"] for d in docs]
    for s, d in zip(row["symbols"], docs):
        wf = d["walk_forward"]
        cov80 = next(c["rate"] for c in d["calibration"]["fields"]["close"]["coverage"] if c["nominal"] == 0.8)
        assert s["windows"] == d["runs"]
        assert s["crps"] == pytest.approx(d["metrics"]["crps"], rel=1e-12)
        assert s["mase"] == pytest.approx(d["metrics"]["mase"], rel=1e-12)
        assert s["coverage80"] == pytest.approx(cov80, rel=1e-12)
        assert s["sharpe"] == pytest.approx(wf["sharpe"], rel=1e-12, abs=1e-15)
        assert (s["sharpe_ci_low"], s["sharpe_ci_high"]) == (wf["sharpe_ci_low"], wf["sharpe_ci_high"])
        assert s["dsr"] == d["selection"]["dsr_walk_forward"]
        assert s["max_drawdown"] == pytest.approx(wf["max_drawdown"]) and s["max_drawdown"] <= 0
        assert s["trades"] == wf["trades"]
    # the model's row: the mean over symbols, the worst drawdown, the sum of trades
    assert row["skill"]["crps"] == pytest.approx(np.mean([d["metrics"]["crps"] for d in docs]), rel=1e-12)
    assert row["trading"]["sharpe"] == pytest.approx(np.mean([d["walk_forward"]["sharpe"] for d in docs]))
    assert row["trading"]["max_drawdown"] == pytest.approx(min(d["walk_forward"]["max_drawdown"] for d in docs))
    assert row["trading"]["trades"] == sum(d["walk_forward"]["trades"] for d in docs)


def test_baseline_and_random_toto2_equal_their_plain_backtests_and_make_one_run(tmp_path, capsys):
    doc = _json(capsys, "models", "compare", "--symbols", "SP500,NASDAQ", "--models", "baseline,toto2",
                "--weights", "toto2=random:4m", "--windows", "16", *TINY, "--json")
    baseline, toto2 = doc["models"]
    assert (baseline["model"], toto2["model"]) == ("baseline", "toto2")
    assert (baseline["random_weights"], toto2["random_weights"]) == (False, True)
    assert toto2["weights"] == "random:4m" and toto2["weights_source"].startswith("random:4m")
    _assert_row_is_the_backtest(baseline, _backtest(capsys, tmp_path, ["SP500", "NASDAQ"], "baseline", None, 16))
    _assert_row_is_the_backtest(toto2, _backtest(capsys, tmp_path, ["SP500", "NASDAQ"], "toto2", "random:4m", 16))
    assert baseline["skill"]["crps"] != toto2["skill"]["crps"]  # two models, two forecasts
    for row in doc["models"]:
        cost = row["cost"]
        assert cost["windows"] == 32 and cost["windows_per_s"] == pytest.approx(32 / cost["run_s"])
        assert cost["peak_memory_mb"] > 10 and cost["memory_kind"] == "rss" and cost["device"] == "cpu"
    assert toto2["cost"]["load_s"] > baseline["cost"]["load_s"]  # building a transformer beats a few numbers

    # one run of 2 models x 2 symbols, which `runs show` reads as a grid over the models
    runs = RunStore(os.environ["MARKETCAST_RUN_STORE"])
    assert doc["run_id"] in runs.infos() and runs.info(doc["run_id"])["cells_total"] == 4
    cells = runs.query("SELECT model, weights, symbol FROM cells "
                       "ORDER BY cell_index", run_ids=[doc["run_id"]])
    assert list(zip(cells["model"], cells["weights"].fillna(""), cells["symbol"])) == [
        ("baseline", "", "SP500"), ("baseline", "", "NASDAQ"), ("toto2", "random:4m", "SP500"),
        ("toto2", "random:4m", "NASDAQ")]
    shown = _json(capsys, "runs", "show", doc["run_id"], "--json")
    assert shown["run"]["run_id"] == doc["run_id"] and len(shown["records"]) == 4


def test_baseline_and_random_toto_table_flags_random_weights_and_ends_with_the_run(tmp_path, capsys,
                                                                                  monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    doc = _json(capsys, "models", "compare", "--symbols", "SP500", "--models", "toto,baseline",
                "--weights", "toto=random", "--windows", "20", "--samples", "8", "--context", "32", "--json")
    assert [m["model"] for m in doc["models"]] == ["toto", "baseline"]
    toto = doc["models"][0]
    assert toto["random_weights"] is True and toto["weights_source"].startswith("random")
    plain = _json(capsys, "backtest", "SP500", "--model", "toto", "--weights", "random", "--windows", "20",
                  "--samples", "8", "--context", "32", "--output-dir", str(tmp_path / "bt"), "--json")
    assert toto["symbols"][0]["sharpe"] == pytest.approx(plain[0]["walk_forward"]["sharpe"], rel=1e-12, abs=1e-15)
    assert toto["symbols"][0]["crps"] == pytest.approx(plain[0]["metrics"]["crps"], rel=1e-12)

    capsys.readouterr()
    assert main(["models", "compare", "--symbols", "SP500", "--models", "baseline", "--windows", "12", *TINY]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    run_id = lines[-1].removeprefix("run ")
    assert lines[-1].startswith("run ") and run_id in RunStore(os.environ["MARKETCAST_RUN_STORE"]).infos()
    assert any(line.lstrip("│┃ ").startswith("baseline") for line in lines)


def test_random_weights_are_red_in_the_table():
    from rich.console import Console

    from marketcast.commands.compare import leaderboard_table

    num = {"mase": 1.0, "crps": 0.01, "coverage80": 0.8}
    trading = {"sharpe": 0.5, "sharpe_ci_low": -1.0, "sharpe_ci_high": 2.0, "dsr": 0.3, "max_drawdown": -0.1,
               "trades": 4}
    cost = {"windows_per_s": 10.0, "peak_memory_mb": 100.0, "memory_kind": "rss", "load_s": 1.0, "device": "cpu"}
    rows = [{"model": m, "weights_source": w, "random_weights": r, "skill": num, "trading": trading, "cost": cost}
            for m, w, r in (("baseline", "none", False), ("toto2", "random:4m(seed=0)", True))]
    out = Console(record=True, width=250, color_system="truecolor", file=io.StringIO())
    out.print(leaderboard_table(rows, "t"))
    styled, plain = out.export_text(styles=True, clear=False), out.export_text()
    red = [line for line in styled.splitlines() if "\x1b[1;31m" in line]
    assert len(red) == 1 and "toto2" in red[0] and "random:4m(seed=0) (random)" in red[0]
    assert "-10.0%" in plain and "+0.50 [-1.00, +2.00]" in plain and "100 (rss)" in plain


@pytest.mark.parametrize("args,message", [
    (["--models", "baseline,chronos9"], "unknown model 'chronos9'"),
    (["--models", "baseline,baseline"], "names a model twice"),
    (["--models", "baseline", "--weights", "toto2=random:4m"], "'toto2' is not in --models"),
    (["--models", "toto2", "--weights", "toto2"], "give MODEL=WEIGHTS"),
    (["--symbols", "SP500,sp500"], "repeats a symbol"),
])
def test_bad_input_is_one_line_exit_2_and_no_run(args, message, capsys):
    capsys.readouterr()
    assert main(["models", "compare", "--windows", "5", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert RunStore(os.environ["MARKETCAST_RUN_STORE"]).infos() == {}


def test_parsers_and_random_flag():
    assert parse_models(" Baseline , toto2 ") == ["baseline", "toto2"]
    with pytest.raises(ConfigError, match="empty"):
        parse_models(" , ")
    assert parse_weights(["toto2=random:4m", "toto=/w/t"], ["toto", "toto2"]) == {"toto2": "random:4m",
                                                                                   "toto": "/w/t"}
    assert is_random("random:4m", None) and is_random(None, "random(seed=0)") and not is_random(None, "auto")
    assert not is_random("Datadog/Toto-2.0-22m", "/hf/cache/Datadog/Toto-2.0-22m")


def test_peak_memory_sees_an_array_allocated_and_freed_inside_it():
    size = 200 * 2**20
    with PeakMemory("cpu", interval=0.001) as memory:
        start = memory.peak  # the resident memory on entry
        block = mmap.mmap(-1, size)  # fresh anonymous pages (malloc may reuse pages already resident)
        block.write(b"\x01" * size)  # touched, so resident
        deadline = time.monotonic() + 10  # however busy the machine, until the sampler has run once
        while memory.peak < start + 0.9 * size and time.monotonic() < deadline:
            time.sleep(0.01)
        block.close()
    assert memory.kind == "rss" and memory.peak >= start + 0.9 * size


def test_a_model_without_a_source_shows_its_weights_and_is_flagged_random():
    """Kronos keeps no ``source``: the row falls back to --weights, and ``random`` still flags it."""
    from marketcast.leaderboard.compare import ModelRun, model_row

    def row(model, weights):
        return model_row(ModelRun(model=model, weights=weights, source=None, device="cpu", dtype="float32",
                                  results=[], load_s=0.5, run_s=2.0, peak_memory=3 * 2**20, memory_kind="rss"))

    kronos = row("kronos", "random")
    assert (kronos["weights_source"], kronos["random_weights"]) == ("random", True)
    assert (row("kronos", None)["weights_source"], row("baseline", None)["weights_source"]) == ("auto", "none")
    assert kronos["cost"]["peak_memory_mb"] == 3.0 and kronos["cost"]["windows_per_s"] == 0.0


def test_a_leaderboard_run_is_its_own_kind_and_its_tearsheet_opens_with_the_table(tmp_path, capsys):
    """Kind ``leaderboard``: `runs show` counts the models as trials of one selection, and `report RUN` puts the
    leaderboard's stored rows (the numbers `models compare` printed) at the top of every page, random weights red."""
    doc = _json(capsys, "models", "compare", "--symbols", "SP500", "--models", "baseline,toto2",
                "--weights", "toto2=random:4m", "--windows", "12", *TINY, "--json")
    runs = RunStore(os.environ["MARKETCAST_RUN_STORE"])
    info = runs.info(doc["run_id"])
    assert info["kind"] == "leaderboard"
    assert [r["model"] for r in info["spec"]["leaderboard"]] == ["baseline", "toto2"]
    assert info["spec"]["leaderboard"][1]["skill"]["crps"] == doc["models"][1]["skill"]["crps"]
    shown = _json(capsys, "runs", "show", doc["run_id"], "--json")
    assert shown["run"]["kind"] == "leaderboard" and shown["selection"][0]["trials"] == 2

    assert main(["report", doc["run_id"], "-o", str(tmp_path / "rep")]) == 0
    pages = sorted((tmp_path / "rep").rglob("report.html"))
    assert len(pages) == 2  # one per model, each opening with the same leaderboard
    for page in pages:
        text = page.read_text()
        board = text[text.index('<section id="leaderboard">'):]
        board = board[:board.index("</section>")]
        assert text.index('<section id="leaderboard">') < text.index('id="s0-SP500"')
        rows = board.split("<tr")[2:]
        assert len(rows) == 2 and ">baseline<" in rows[0] and ">toto2<" in rows[1]
        assert 'class="random"' in rows[1] and 'class="random"' not in rows[0]
        assert f"{doc['models'][1]['skill']['crps']:.5f}" in rows[1]
        assert "RANDOM WEIGHTS: toto2" in board
