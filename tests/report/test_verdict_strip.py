"""The verdict strip (marketcast.backtest.verdict): one run's strip reads the same on the terminal, in the JSON, on
the tearsheet and in ``runs show``; its statuses follow the thresholds docs/backtest.md#verdict states."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys

import pytest

from marketcast.backtest.glossary import anchors
from marketcast.backtest.verdict import AMBER, GREEN, LINES, MISSING, RED, _band, answer, cells

LABELS = {c.key: c.label for c in cells({
    "answer": "no verdict", "excess_return_points": None, "sharpe_difference": None, "trials": 0, "effective_trials": None, "dsr_pick": None,
    "dsr_walk_forward": None, "pbo": None, "spa_pvalue": None, "coverage80": None, "mc_band_points": None,
    "context": {"asked": 1, "min": None, "max": None}, "pick": None, "pick_reads_forecast": None,
    "walk_forward_blind_share": None,
    "status": dict.fromkeys(("answer", "vs_buy_hold", "mc_error", "trials", "dsr_pick", "dsr_walk_forward", "pbo", "spa_p",
                             "coverage80", "context", "pick"), MISSING)})}


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketcast.commands", *args], capture_output=True, text=True, check=False,
                          env=env, timeout=600)


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """One small backtest with --html and the run store on, and ``runs show`` of it (text and JSON)."""
    root = tmp_path_factory.mktemp("verdict")
    env = {**os.environ, "COLUMNS": "200", "MARKETCAST_RUN_STORE": str(root / "runs")}
    done = cli("backtest", "SP500", "--windows", "40", "--samples", "64", "--html", "--output-dir", str(root / "out"),
               env=env)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1].removeprefix("run ")
    shown = cli("runs", "show", run_id, env=env)
    shown_json = cli("runs", "show", run_id, "--json", env=env)
    assert shown.returncode == 0 and shown_json.returncode == 0, shown.stderr + shown_json.stderr
    return {"stdout": done.stdout, "doc": json.loads((root / "out" / "latest" / "SP500.json").read_text()),
            "page": (root / "out" / "latest" / "report.html").read_text(), "shown": shown.stdout,
            "shown_json": json.loads(shown_json.stdout)}


def strip_texts(text: str, head: str) -> dict[str, str]:
    """key -> figure text of the strip printed under ``head`` (``SP500 verdict``, the answer after it) in terminal
    output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(head + " "))
    out = {"answer": lines[start][len(head) + 1:]}
    for line, keys in zip(lines[start + 1:start + 1 + len(LINES)], LINES):
        parts = line.strip().split(" · ")
        assert len(parts) == len(keys), line
        for key, part in zip(keys, parts):
            assert part.startswith(LABELS[key] + " "), (key, part)
            out[key] = part[len(LABELS[key]) + 1:]
    return out


CELL = r'data-key="([a-z_0-9]+)" data-status="([a-z]+)"><a href="#([a-z0-9-]+)">[^<]*</a> <b[^>]*>([^<]*)</b>'


def page_texts(page: str) -> dict[str, str]:
    block = re.search(r'<div id="verdict" class="verdict-strip".*?<small>', page, re.DOTALL).group(0)
    return {k: html.unescape(v) for k, _, anchor, v in re.findall(CELL, block) if anchor.startswith("g-")}


def strip_rows(page: str) -> dict[str, dict[str, tuple[str, str]]]:
    """Each row of the page's strip: its label -> key -> (status, figure text)."""
    block = re.search(r'<div id="verdict" class="verdict-strip".*?<small>', page, re.DOTALL).group(0)
    return {html.unescape(label): {k: (status, html.unescape(v)) for k, status, _, v in re.findall(CELL, row)}
            for label, row in re.findall(r'<div class="verdict-row" data-symbol="([^"]+)">(.*?)</div>', block)}


def first_in_main(page: str) -> bool:
    """The strip is the first thing in the page's ``<main>``."""
    return page.index("<main>") + len("<main>") == page.index('<div id="verdict"')


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"[+-]?\d+(?:\.\d+)?", text)]


def test_one_runs_strip_is_identical_on_every_surface(one_run):
    verdict = one_run["doc"]["verdict"]
    terminal = strip_texts(one_run["stdout"], "SP500 verdict")
    page = page_texts(one_run["page"])
    shown = strip_texts(one_run["shown"], "SP500 verdict")
    assert set(terminal) == set(LABELS) and terminal == page == shown
    assert one_run["shown_json"]["records"][0]["verdict"] == verdict  # the stored run's figures, float for float
    assert terminal["answer"] == verdict["answer"] == answer(verdict)[0]  # the sentence, first, on every surface
    # the printed numbers are the JSON's, rounded as the strip states them
    assert numbers(terminal["vs_buy_hold"]) == [round(verdict["excess_return_points"], 2),
                                                round(verdict["sharpe_difference"], 2)]
    assert numbers(terminal["mc_error"]) == [round(verdict["mc_band_points"], 1)]
    assert numbers(terminal["spa_p"]) == [round(verdict["spa_pvalue"], 3)]
    for key in ("dsr_pick", "dsr_walk_forward", "pbo"):
        assert numbers(terminal[key]) == [round(verdict[key], 2)], key
    assert numbers(terminal["trials"]) == [verdict["trials"], round(verdict["effective_trials"], 1)]
    cov = verdict["coverage80"]
    assert numbers(terminal["coverage80"]) == [round(100 * cov[k]) for k in ("rate", "lo", "hi")]
    assert numbers(terminal["context"]) == [verdict["context"]["asked"]]  # 40 windows of SP500 read full context
    # the figures are the backtest's own: walk-forward minus buy & hold, and the selection statistics
    wf, bh, sel = one_run["doc"]["walk_forward"], one_run["doc"]["benchmark"], one_run["doc"]["selection"]
    assert verdict["excess_return_points"] == pytest.approx(100 * (wf["return"] - bh["return"]), abs=1e-12)
    assert verdict["sharpe_difference"] == pytest.approx(wf["sharpe"] - bh["sharpe"], abs=1e-12)
    assert verdict["mc_band_points"] == pytest.approx(100 * wf["mc_band"], abs=1e-12)
    assert (verdict["dsr_pick"], verdict["pbo"], verdict["spa_pvalue"]) == (sel["dsr_pick"], sel["pbo"],
                                                                            sel["spa_pvalue"])


def test_strip_is_at_the_top_of_the_tearsheet_and_links_to_the_glossary(one_run):
    page = one_run["page"]
    assert first_in_main(page)
    for anchor in set(re.findall(r'href="#(g-[a-z-]+)"', page)):
        assert f'id="{anchor}"' in page, anchor
    assert set(anchors()) <= set(re.findall(r'<dt id="(g-[a-z-]+)"', page))


def reference_status(verdict: dict) -> dict:
    """The thresholds of docs/backtest.md#verdict, applied independently of the module."""
    def high(x):
        return MISSING if x is None else GREEN if x >= 0.95 else AMBER if x >= 0.5 else RED

    def low(x, green, amber):
        return MISSING if x is None else GREEN if x <= green else AMBER if x <= amber else RED

    def not_green_on_a_loss(status):  # a relative figure is never good on a record that made no money
        return AMBER if status == GREEN and verdict["walk_forward_return"] <= 0 else status

    pts, gap, band, cov = (verdict["excess_return_points"], verdict["sharpe_difference"], verdict["mc_band_points"],
                           verdict["coverage80"])
    return {"dsr_pick": high(verdict["dsr_pick"]), "dsr_walk_forward": high(verdict["dsr_walk_forward"]),
            "pbo": low(verdict["pbo"], 0.2, 0.5), "spa_p": not_green_on_a_loss(low(verdict["spa_pvalue"], 0.05, 0.10)),
            "vs_buy_hold": not_green_on_a_loss(GREEN if pts > 0 and gap > 0 else RED if pts <= 0 and gap <= 0
                                               else AMBER),
            "mc_error": (GREEN if 2 * round(100 * band) <= round(100 * abs(pts))  # in basis points
                         else AMBER if round(100 * band) <= round(100 * abs(pts)) else RED),
            "coverage80": (GREEN if cov["lo"] <= 0.8 <= cov["hi"]  # within 10 points, in whole windows
                           else AMBER if abs(10 * cov["covered"] - 8 * cov["n"]) <= cov["n"] else RED),
            "pick": (RED if not verdict["pick_reads_forecast"] or verdict["walk_forward_blind_share"] > 0.5
                     else AMBER if verdict["walk_forward_blind_share"] > 0 else GREEN)}


def test_statuses_follow_the_documented_thresholds(one_run):
    verdict = one_run["doc"]["verdict"]
    expected = reference_status(verdict)
    assert {k: verdict["status"][k] for k in expected} == expected


@pytest.mark.parametrize("value,kind,status", [
    (0.95, "dsr", GREEN), (0.9499, "dsr", AMBER), (0.5, "dsr", AMBER), (0.4999, "dsr", RED), (None, "dsr", MISSING),
    (0.2, "pbo", GREEN), (0.2001, "pbo", AMBER), (0.5, "pbo", AMBER), (0.5001, "pbo", RED),
    (0.05, "spa", GREEN), (0.0501, "spa", AMBER), (0.10, "spa", AMBER), (0.1001, "spa", RED),
])
def test_threshold_edges(value, kind, status):
    args = {"dsr": (0.95, 0.5, False), "pbo": (0.2, 0.5, True), "spa": (0.05, 0.10, True)}[kind]
    assert _band(value, args[0], args[1], low_is_good=args[2]) == status


def test_docs_state_every_threshold_and_glossary_term():
    from pathlib import Path

    from marketcast.backtest.glossary import GLOSSARY

    doc = (Path(__file__).resolve().parents[2] / "docs" / "backtest.md").read_text()
    verdict = doc[doc.index("## Verdict"):]
    for needle in (">= 0.95", "<= 0.20", "> 0.50", "<= 0.05", "Wilson", "forecast-blind"):
        assert needle in verdict, needle
    glossary = doc[doc.index("## Glossary"):]
    for _, term, _ in GLOSSARY:
        assert f"**{term}**" in glossary, term


def test_the_leaderboard_prints_the_backtests_strip(tmp_path):
    """models compare's strip of a model on a symbol is the backtest's over the same windows and strategies."""
    from marketcast.backtest.strategies import FORECAST_DRIVEN

    env = {**os.environ, "COLUMNS": "200", "MARKETCAST_RUN_STORE": "off"}
    fast = ("--windows", "30", "--samples", "32")
    board = cli("models", "compare", "--symbols", "SP500", "--models", "baseline", *fast, "--json", env=env)
    alone = cli("backtest", "SP500", *fast, "--strategies", ",".join(FORECAST_DRIVEN), "--json", "--output-dir",
                str(tmp_path / "out"), env=env)
    assert board.returncode == 0 and alone.returncode == 0, board.stderr + alone.stderr
    (entry,) = json.loads(board.stdout)["verdicts"]
    assert (entry["model"], entry["symbol"]) == ("baseline", "SP500")
    assert entry["verdict"] == json.loads(alone.stdout)[0]["verdict"]
    text = cli("models", "compare", "--symbols", "SP500", "--models", "baseline", *fast, env=env).stdout
    line = next(x for x in text.splitlines() if x.startswith("baseline SP500  "))
    assert [part.split(" ", 1)[0] for part in line.split("  ", 1)[1].split(" · ")][:3] == ["verdict", "vs", "MC"]
    assert all(c.text in line for c in cells(entry["verdict"]))
    assert line.split("  ", 1)[1].startswith(f"verdict {entry['verdict']['answer']} · ")  # the answer first


def test_a_forecast_blind_pick_is_flagged_red(tmp_path):
    env = {**os.environ, "COLUMNS": "200", "MARKETCAST_RUN_STORE": "off"}
    done = cli("backtest", "SP500", "--windows", "30", "--samples", "32", "--strategies", "buy_hold", "--exit", "close",
               "--output-dir", str(tmp_path / "out"), env=env)  # every window trades (no wash refusal)
    assert done.returncode == 0, done.stderr
    verdict = json.loads((tmp_path / "out" / "latest" / "SP500.json").read_text())["verdict"]
    assert verdict["pick"] == "buy_hold" and verdict["pick_reads_forecast"] is False
    assert verdict["status"]["pick"] == RED and verdict["walk_forward_blind_share"] > 0.5
    share = round(100 * verdict["walk_forward_blind_share"])
    assert strip_texts(done.stdout, "SP500 verdict")["pick"] == (f"buy_hold IGNORES THE FORECAST; walk-forward "
                                                                 f"blind {share}%")


def test_a_models_compare_page_opens_with_a_strip_row_per_model(tmp_path):
    """``report RUN`` of a ``models compare`` run: every model's page opens with the same strip, a row per model
    and symbol holding the figures ``models compare --json`` and ``runs show`` print for it."""
    env = {**os.environ, "COLUMNS": "400", "MARKETCAST_RUN_STORE": str(tmp_path / "runs")}
    done = cli("models", "compare", "--symbols", "SP500", "--models", "baseline,toto2", "--weights", "toto2=random:4m",
               "--windows", "30", "--samples", "32", "--context", "64", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert cli("report", doc["run_id"], "-o", str(tmp_path / "rep"), env=env).returncode == 0
    shown = cli("runs", "show", doc["run_id"], env=env).stdout
    expected = {f"{v['model']} {v['symbol']}": {c.key: (c.status, c.text) for c in cells(v["verdict"])}
                for v in doc["verdicts"]}
    assert list(expected) == ["baseline SP500", "toto2 SP500"]
    pages = sorted((tmp_path / "rep").rglob("report.html"))
    assert len(pages) == 2
    for path in pages:
        page = path.read_text()
        assert first_in_main(page) and strip_rows(page) == expected
        assert page.index('<section id="leaderboard">') < page.index('id="s0-SP500"')  # the table before the symbol
    strip_lines = [line for line in shown.splitlines() if " · " in line and "vs buy & hold" in line]
    assert len(strip_lines) == 2
    for line, row in zip(strip_lines, expected.values()):
        assert [part.split(" ", 1)[0] for part in line.split("  ", 1)[1].split(" · ")][:3] == ["verdict", "vs", "MC"]
        assert all(text in line for _, text in row.values())


OPEN_GATES_SYMBOLS = ("SP500", "NASDAQ")


@pytest.fixture(scope="module")
def live_state(tmp_path_factory):
    """Six weeks of a paper replay of two symbols, gates open so that it trades."""
    from marketcast.data import load_symbol
    from marketcast.forecast import load_forecaster
    from marketcast.trade.loop.cycle import LoopConfig
    from marketcast.trade.loop.planner import BacktestPlanner
    from marketcast.trade.replay import replay
    from marketcast.trade.risk.gates import GateConfig

    folder = tmp_path_factory.mktemp("live")
    replay({s: load_symbol(s) for s in OPEN_GATES_SYMBOLS}, BacktestPlanner(load_forecaster("baseline")), folder,
           "2017-06-01", "2017-07-15",
           LoopConfig(OPEN_GATES_SYMBOLS, gates=GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)))
    return folder


def test_the_status_pages_strip_opens_main_and_holds_trade_status_numbers(live_state, capsys):
    import numpy as np

    from marketcast.commands import main
    from marketcast.trade.ops.monitor import read_records
    from marketcast.trade.ops.status import status_rows

    assert main(["trade", "status", "--state-dir", str(live_state), "--html", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    page = (live_state / "status.html").read_text()
    assert first_in_main(page)
    (label, row), = strip_rows(page).items()
    texts = {k: text for k, (_, text) in row.items()}
    rec, journal = data["records"], data["journal"]
    equity = np.array([r["equity"] for r in read_records(live_state)])
    # the drawdown is the records' own equity against its running peak, and the replay did lose from a peak
    assert rec["max_drawdown"] == pytest.approx(-np.max(1 - equity / np.maximum.accumulate(equity)), abs=1e-15)
    assert rec["max_drawdown"] < 0 and journal["fills"] > 0  # a fall reads negative, as in the backtest's JSON
    assert texts["net"] == (f"{rec['equity_last'] / rec['equity_first'] - 1:+.2%} ({rec['equity_first']:,.2f} → "
                            f"{rec['equity_last']:,.2f})")
    assert texts["max_dd"] == f"{rec['max_drawdown']:.2%}"
    assert texts["cycles"] == f"{journal['cycles']:,} ({journal['first_bar'][:10]} → {journal['last_bar'][:10]})"
    assert texts["refusals"] == str(journal["orders_rejected"] + journal["orders_refused"])
    assert texts["fallbacks"] == str(rec["fallbacks_to_eager"]) and texts["halted"] == "no" and not data["halts"]
    assert texts["picks"] == "; ".join(f"{s} {c['strategy']}" for s, c in data["strategies"].items())
    # the terminal's rows (what `trade status` prints) say the same
    terminal = dict(status_rows(live_state))
    assert terminal["max_drawdown"] == texts["max_dd"]
    # the baseline compiles nothing: null in the JSON, "eager" in the terminal and on the page, never "-"
    assert rec["compile_mode"] is None and terminal["compile_mode"] == "eager" and "<td>mode eager," in page
    assert (terminal["equity_first"], terminal["equity_last"]) == (f"{rec['equity_first']:,.2f}",
                                                                   f"{rec['equity_last']:,.2f}")
    assert terminal["cycles"] == f"{journal['cycles']}" and terminal["halted"] == "no"
    # the headline and the equity chart follow the strip, before any other section
    assert page.index('data-check="headline"') < page.index('id="live-equity"') < page.index('id="positions"')


@pytest.mark.parametrize("equity,expected", [
    ([100.0, 110.0, 99.0, 120.0, 90.0, None, 130.0], -0.25),  # 120 -> 90; the missing cycle is skipped
    ([100.0, 100.0, 101.0], 0.0), ([], None), ([None], None), ([100.0, 80.0], -0.2),
])
def test_max_drawdown_of_the_recorded_equity(equity, expected):
    from marketcast.trade.ops.monitor import max_drawdown

    assert max_drawdown(equity) == (None if expected is None else pytest.approx(expected, abs=1e-15))
    assert str(max_drawdown([100.0, 100.0, 101.0])) == "0.0"  # never below a peak: 0.0, not -0.0


def _status_data(halts=0, rejected=0, refused=0, fallbacks=0, picks=None) -> dict:
    journal = {"cycles": 3, "first_bar": "2017-06-01T00:00:00+00:00", "last_bar": "2017-06-05T00:00:00+00:00",
               "orders_rejected": rejected, "orders_refused": refused}
    return {"records": {"equity_first": 100.0, "equity_last": 99.0, "max_drawdown": -0.02,
                        "fallbacks_to_eager": fallbacks},
            "journal": journal, "halts": [{"message": "halt"}] * halts,
            "strategies": {s: {"strategy": p} for s, p in ({"SP500": "maxdiff"} if picks is None else picks).items()}}


@pytest.mark.parametrize("given,key,status", [
    ({}, "halted", GREEN), ({"halts": 1}, "halted", RED),
    ({}, "refusals", GREEN), ({"rejected": 1}, "refusals", AMBER), ({"refused": 2}, "refusals", AMBER),
    ({}, "fallbacks", GREEN), ({"fallbacks": 1}, "fallbacks", AMBER),
    ({}, "picks", GREEN), ({"picks": {"SP500": "maxdiff", "NASDAQ": "buy_hold"}}, "picks", AMBER),
    ({"picks": {"SP500": "buy_hold"}}, "picks", RED), ({"picks": {}}, "picks", MISSING),
    ({}, "net", "info"), ({}, "max_dd", "info"),
])
def test_the_live_strips_statuses_follow_its_documented_thresholds(given, key, status):
    from marketcast.trade.ops.live_verdict import build

    assert build(_status_data(**given))["status"][key] == status


def test_the_live_strip_flags_a_forecast_blind_strategy_and_says_net_and_drawdown():
    from marketcast.trade.ops.live_verdict import build
    from marketcast.trade.ops.live_verdict import cells as live_cells

    texts = {c.key: c.text for c in live_cells(build(_status_data(picks={"SP500": "maxdiff", "NASDAQ": "buy_hold"})))}
    assert texts["picks"] == "SP500 maxdiff; NASDAQ buy_hold IGNORES THE FORECAST"
    assert texts["net"] == "-1.00% (100.00 → 99.00)" and texts["max_dd"] == "-2.00%"
    assert texts["cycles"] == "3 (2017-06-01 → 2017-06-05)"
