"""``marketcast models compare`` on the embedded bars: every model's row holds what a plain ``marketcast backtest
--model X --strategies`` (the forecast-driven ones) over the same windows reports, buy and hold is the benchmark
row, two models' trading rows differ or say why not, the table flags random weights, and the run store holds one
run of a cell per model x symbol."""

from __future__ import annotations

import mmap

import io
import json
import re
import os
import time

import numpy as np
import pytest

from marketcast.backtest.strategies import FORECAST_DRIVEN, STRATEGIES
from marketcast.commands import main
from marketcast.errors import ConfigError
from marketcast.leaderboard.compare import PeakMemory, is_random, parse_models, parse_weights
from marketcast.runs.store import RunStore

TINY = ["--samples", "16", "--context", "64"]
FORECAST_DRIVEN_ONLY = ["--strategies", ",".join(FORECAST_DRIVEN)]  # what a leaderboard row trades


def _json(capsys, *args: str):
    capsys.readouterr()
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def _backtest(capsys, tmp_path, symbols: list[str], model: str, weights: str | None, windows: int,
              *options: str) -> list[dict]:
    """The plain backtest of the same windows over the forecast-driven strategies, as a user runs it."""
    extra = [] if weights is None else ["--weights", weights]
    return _json(capsys, "backtest", *symbols, "--model", model, *extra, "--windows", str(windows),
                 *(options or TINY), *FORECAST_DRIVEN_ONLY, "--output-dir", str(tmp_path / f"bt-{model}"), "--json")


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
    if row["trading"]["trades"]:
        assert row["trading"]["sharpe"] == pytest.approx(np.mean([d["walk_forward"]["sharpe"] for d in docs]))
    else:  # no trades: nothing measured, not a Sharpe ratio of 0
        assert row["trading"]["sharpe"] is None and row["trading"]["dsr"] is None
    assert row["trading"]["max_drawdown"] == pytest.approx(min(d["walk_forward"]["max_drawdown"] for d in docs))
    assert row["trading"]["trades"] == sum(d["walk_forward"]["trades"] for d in docs)
    assert not row["most_picked"]["forecast_blind"] and all(s == "flat" or STRATEGIES[s].reads_forecast
                                                     for s in row["most_picked"]["shares"])


def _assert_benchmark_is_the_backtests(benchmark: dict, docs: list[dict]) -> None:
    """Buy and hold's row: each symbol's benchmark of the plain backtest; the means, the worst drawdown, the sum."""
    assert benchmark["name"] == "buy_and_hold" and [s["symbol"] for s in benchmark["symbols"]] == [
        d["symbol"] for d in docs]
    for s, d in zip(benchmark["symbols"], docs):
        b = d["benchmark"]
        assert (s["sharpe"], s["sharpe_ci_low"], s["sharpe_ci_high"]) == (b["sharpe"], b["sharpe_ci_low"],
                                                                         b["sharpe_ci_high"])
        assert s["max_drawdown"] == b["max_drawdown"] < 0 and s["trades"] == b["trades"] == 1 and s["dsr"] is None
    assert benchmark["trading"]["sharpe"] == pytest.approx(np.mean([d["benchmark"]["sharpe"] for d in docs]))
    assert benchmark["trading"]["max_drawdown"] == min(d["benchmark"]["max_drawdown"] for d in docs)
    assert benchmark["trading"]["trades"] == len(docs) and benchmark["trading"]["dsr"] is None


def test_baseline_and_random_toto2_equal_their_plain_backtests_and_make_one_run(tmp_path, capsys):
    doc = _json(capsys, "models", "compare", "--symbols", "SP500,NASDAQ", "--models", "baseline,toto2",
                "--weights", "toto2=random:4m", "--windows", "16", *TINY, "--json")
    baseline, toto2 = doc["models"]
    assert (baseline["model"], toto2["model"]) == ("baseline", "toto2")
    assert (baseline["random_weights"], toto2["random_weights"]) == (False, True)
    assert (baseline["paths"], toto2["paths"]) == ("joint", "copula")  # quantiles joined by a copula
    assert toto2["weights"] == "random:4m" and toto2["weights_source"].startswith("random:4m")
    plain = _backtest(capsys, tmp_path, ["SP500", "NASDAQ"], "baseline", None, 16)
    _assert_row_is_the_backtest(baseline, plain)
    _assert_benchmark_is_the_backtests(doc["benchmark"], plain)
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
                  "--samples", "8", "--context", "32", *FORECAST_DRIVEN_ONLY, "--output-dir", str(tmp_path / "bt"),
                  "--json")
    assert toto["symbols"][0]["sharpe"] == pytest.approx(plain[0]["walk_forward"]["sharpe"], rel=1e-12, abs=1e-15)
    assert toto["symbols"][0]["crps"] == pytest.approx(plain[0]["metrics"]["crps"], rel=1e-12)

    capsys.readouterr()
    assert main(["models", "compare", "--symbols", "SP500", "--models", "baseline", "--windows", "12", *TINY]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    run_id = lines[-1].removeprefix("run ")
    assert lines[-1].startswith("run ") and run_id in RunStore(os.environ["MARKETCAST_RUN_STORE"]).infos()
    assert any(line.lstrip("│┃ ").startswith("baseline") for line in lines)
    benchmark = [line for line in lines if line.lstrip("│┃ ").startswith("buy & hold")]
    assert len(benchmark) == 1 and "benchmark" in benchmark[0]


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
    leaderboard's stored rows (the numbers `models compare` printed) at the top of every page, under the strip and
    before the symbols, random weights red; each page, in a folder named by its model, has a title of its own."""
    doc = _json(capsys, "models", "compare", "--symbols", "SP500", "--models", "baseline,toto2",
                "--weights", "toto2=random:4m", "--windows", "12", *TINY, "--json")
    runs = RunStore(os.environ["MARKETCAST_RUN_STORE"])
    info = runs.info(doc["run_id"])
    assert info["kind"] == "leaderboard"
    assert [r["model"] for r in info["spec"]["leaderboard"]] == ["baseline", "toto2"]
    assert info["spec"]["leaderboard"][1]["skill"]["crps"] == doc["models"][1]["skill"]["crps"]
    assert info["spec"]["benchmark"] == doc["benchmark"]
    shown = _json(capsys, "runs", "show", doc["run_id"], "--json")
    assert shown["run"]["kind"] == "leaderboard" and shown["selection"][0]["trials"] == 2

    assert main(["report", doc["run_id"], "-o", str(tmp_path / "rep")]) == 0
    pages = sorted((tmp_path / "rep").rglob("report.html"))
    assert [p.parent.name for p in pages] == ["baseline", "toto2"]  # a folder per model, named by it
    # each opening with the same strip (a row per model), then the models' table, then the symbol
    for page in pages:
        text = page.read_text()
        board = text[text.index('<section id="leaderboard">'):]
        board = board[:board.index("</section>")]
        strip = text[text.index('<div id="verdict"'):text.index('<section id="leaderboard">')]
        assert re.findall(r'data-symbol="([^"]+)"', strip) == ["baseline SP500", "toto2 SP500"]
        assert "RANDOM WEIGHTS: toto2" in strip
        assert text.index('<section id="leaderboard">') < text.index('id="s0-SP500"')  # the models first
        rows = board.split("<tr")[2:]
        assert len(rows) == 3 and ">baseline<" in rows[0] and ">toto2<" in rows[1]
        assert 'class="random"' in rows[1] and 'class="random"' not in rows[0]
        assert rows[2].startswith(' class="benchmark"') and ">buy &amp; hold<" in rows[2]
        assert f"{doc['benchmark']['trading']['sharpe']:+.2f}" in rows[2]
        pick = doc["models"][0]["most_picked"]
        assert pick["strategy"] is None or f">{pick['strategy']} {pick['share']:.0%}<" in rows[0]
        assert f"{doc['models'][1]['skill']['crps']:.5f}" in rows[1]
        assert "RANDOM WEIGHTS: toto2" in board
        assert "Paths: toto2 predict quantiles, joined into paths by a Gaussian copula" in board
        assert "; joint samples: baseline." in board
        title = re.search(r"<title>(.*?)</title>", text).group(1)
        assert title == f"marketcast models compare: baseline vs toto2 on SP500 ({page.parent.name}&#x27;s page)"
    assert sum("Paths: the model&#x27;s marginal quantiles" in p.read_text() for p in pages) == 1  # toto2's page


# the identical rows, small, under the exit rule it measured (the close; next-open's washes thin the trades)
REPRODUCER = ["--windows", "13", "--samples", "16", "--context", "256", "--exit", "close"]


def test_baseline_and_random_toto_trade_apart_where_buy_hold_made_their_records_one(tmp_path, capsys):
    """Issue 42's reproducer, small: on NASDAQ's last 13 windows the plain backtest's walk-forward rule (all eight
    strategies) picks ``buy_hold`` for the baseline, and its record is the random-weight Toto's to the last digit
    although their forecasts are far apart. The leaderboard ranks the forecast-driven strategies only: the two
    trading rows differ, and each names a pick that reads the forecast."""
    plain = {}
    for model, weights in (("baseline", []), ("toto", ["--weights", "random"])):
        plain[model] = _json(capsys, "backtest", "NASDAQ", "--model", model, *weights, *REPRODUCER,
                             "--output-dir", str(tmp_path / model), "--json")[0]
    base, toto = plain["baseline"], plain["toto"]
    assert base["metrics"]["mase"] < 2 and 5 < toto["metrics"]["mase"]  # far apart
    assert base["metrics"]["walk_forward_picks"] == [None] * 10 + ["buy_hold"] * 3  # blind to the forecast
    assert "buy_hold" not in toto["metrics"]["walk_forward_picks"]
    for key in ("return", "sharpe", "max_drawdown", "trades"):  # before: one trading row for both
        assert base["walk_forward"][key] == toto["walk_forward"][key]

    doc = _json(capsys, "models", "compare", "--symbols", "NASDAQ", "--models", "baseline,toto",
                "--weights", "toto=random", *REPRODUCER, "--json")
    baseline, random_toto = doc["models"]
    assert baseline["trading"] != random_toto["trading"]
    assert baseline["trading"]["sharpe"] != pytest.approx(random_toto["trading"]["sharpe"])
    for row in (baseline, random_toto):
        assert row["most_picked"]["strategy"] in FORECAST_DRIVEN and row["most_picked"]["forecast_blind"] is False
        assert row["most_picked"]["note"] is None and "buy_hold" not in row["most_picked"]["shares"]
        assert row["most_picked"]["shares"]["flat"] == pytest.approx(10 / 13)  # nothing has 10 trades before window 11
    _assert_row_is_the_backtest(baseline, _backtest(capsys, tmp_path, ["NASDAQ"], "baseline", None, 13,
                                                    *REPRODUCER[2:]))
    _assert_benchmark_is_the_backtests(doc["benchmark"], [base])


def test_trading_rows_that_cannot_tell_two_forecasts_apart_say_why(capsys, monkeypatch):
    """SP500's last 12 windows: the baseline and random Toto both pick ``simple`` and both go long, so their
    records are one; each row names the other. Over 10 windows nothing is ever eligible: each row says it was
    flat throughout. Both tables print the reason under the table."""
    import marketcast.console

    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(marketcast.console.console, "width", 250)  # the console's width is fixed at its import
    compare = ["models", "compare", "--symbols", "SP500", "--models", "baseline,toto", "--weights", "toto=random",
               "--samples", "16", "--context", "256", "--exit", "close"]  # every window trades: no wash
    doc = _json(capsys, *compare, "--windows", "12", "--json")
    baseline, toto = doc["models"]
    assert baseline["skill"]["mase"] < 2 and 5 < toto["skill"]["mase"]
    for key in ("sharpe", "max_drawdown", "trades"):
        assert baseline["trading"][key] == toto["trading"][key]
    assert baseline["most_picked"]["shares"] == toto["most_picked"]["shares"] == {"flat": 10 / 12, "simple": 2 / 12}
    assert baseline["most_picked"]["note"].startswith("the same trades as toto in every window")
    assert toto["most_picked"]["note"].startswith("the same trades as baseline in every window")
    capsys.readouterr()
    assert main([*compare, "--windows", "12", "--store", "off"]) == 0
    out = capsys.readouterr().out
    assert "baseline: the same trades as toto in every window" in out and "simple 17%" in out

    doc = _json(capsys, *compare, "--windows", "10", "--json")
    for row in doc["models"]:
        assert row["trading"]["trades"] == 0 and row["most_picked"]["shares"] == {"flat": 1.0}
        assert row["most_picked"]["strategy"] is None and row["most_picked"]["share"] is None
        assert row["most_picked"]["note"] == "flat in every window: no forecast-driven strategy had 10 trades in its last " \
                                      "70 windows"


def test_the_tables_most_picked_and_the_strips_in_sample_pick_have_names_of_their_own():
    """The table's column is the walk-forward rule's most picked strategy ("most picked", JSON ``most_picked``);
    ``pick`` is left to the verdict strip's in-sample pick. A leaderboard stored before the rename (its rows say
    ``pick``) still shows the column and its note."""
    from marketcast.backtest.glossary import GLOSSARY
    from marketcast.report.leaderboard import PICK_NOTE, cells, headers, notes

    assert "most picked" in headers() and "pick" not in headers()
    num = {"mase": 1.0, "crps": 0.01, "coverage80": 0.8}
    trading = {"sharpe": 0.5, "sharpe_ci_low": -1.0, "sharpe_ci_high": 2.0, "dsr": 0.3, "max_drawdown": -0.1,
               "trades": 4}
    cost = {"windows_per_s": 10.0, "peak_memory_mb": 100.0, "memory_kind": "rss", "load_s": 1.0, "device": "cpu"}
    picked = {"strategy": "maxdiff", "share": 0.45, "shares": {"maxdiff": 0.45, "flat": 0.55},
              "forecast_blind": False, "note": "the same trades as toto in every window"}
    row = {"model": "baseline", "weights_source": "none", "skill": num, "trading": trading, "cost": cost}
    new, old = {**row, "most_picked": picked}, {**row, "pick": picked}
    column = headers().index("most picked")
    assert cells(new)[column] == cells(old)[column] == "maxdiff 45%"
    assert notes([new]) == notes([old]) == ["baseline: the same trades as toto in every window"]
    assert "most picked: the strategy it picked in most windows" in PICK_NOTE and "in-sample pick" in PICK_NOTE
    pick = next(text for anchor, term, text in GLOSSARY if term == "pick")
    assert pick.startswith("The in-sample best strategy") and "'most picked'" in pick


def test_models_compare_under_next_open_equals_the_backtest_under_next_open(tmp_path, capsys):
    doc = _json(capsys, "models", "compare", "--symbols", "SP500", "--models", "baseline", "--windows", "30",
                *TINY, "--exit", "next-open", "--json")
    assert doc["exit"] == "next-open"
    (row,) = doc["models"]
    opened = _backtest(capsys, tmp_path, ["SP500"], "baseline", None, 30, *TINY, "--exit", "next-open")
    _assert_row_is_the_backtest(row, opened)
    closed = _backtest(capsys, tmp_path, ["SP500"], "baseline", None, 30, *TINY, "--exit", "close")
    assert row["symbols"][0]["sharpe"] != closed[0]["walk_forward"]["sharpe"]  # the rule reached the leaderboard
    cells = RunStore(os.environ["MARKETCAST_RUN_STORE"]).query("SELECT exit FROM cells", run_ids=[doc["run_id"]])
    assert list(cells["exit"]) == ["next-open"]
