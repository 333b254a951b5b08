"""One sign for max drawdown wherever a user reads it: negative, as quantstats prints it (a fall from the peak),
in the terminal tables, summary.md, the JSON and ``runs show``; the metric module keeps the positive size its
Calmar ratio and the trading gates use."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from marketcast.backtest.report import signed_drawdown
from marketcast.backtest.tables import pct
from marketcast.commands import main

FAST = ["SP500", "--windows", "12", "--samples", "16", "--context", "64", "--no-spa"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One short SP500 backtest (buy & hold falls 11.6 % in its last 12 windows of 2018): its terminal output,
    its files and its run id."""
    root = tmp_path_factory.mktemp("dd")
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(buf):
        mp.setenv("MARKETCAST_RUN_STORE", str(root / "store"))
        assert main(["backtest", *FAST, "--output-dir", str(root / "bt")]) == 0
    shown = buf.getvalue()
    return {"shown": shown, "root": root, "run_id": shown.strip().splitlines()[-1].split()[1],
            "json": json.loads((root / "bt" / "latest" / "SP500.json").read_text()),
            "md": (root / "bt" / "latest" / "summary.md").read_text()}


def test_signed_drawdown_is_the_negative_size():
    assert signed_drawdown({"max_drawdown": 0.25, "sharpe": 1.0}) == {"max_drawdown": -0.25, "sharpe": 1.0}
    assert str(signed_drawdown({"max_drawdown": 0.0})["max_drawdown"]) == "0.0"  # never -0.0
    assert signed_drawdown({"max_drawdown": None})["max_drawdown"] is None


def test_json_terminal_and_summary_md_print_it_negative(run):
    doc = run["json"]
    bh, wf = doc["benchmark"]["max_drawdown"], doc["walk_forward"]["max_drawdown"]
    assert bh == pytest.approx(-0.1163146, abs=1e-7) and wf <= 0
    assert all(m["max_drawdown"] <= 0 for m in doc["strategies"].values())
    for label, value in (("buy & hold", bh), ("walk-forward", wf)):
        row = next(line for line in run["shown"].splitlines() if line.strip().startswith(label))
        assert f" {pct(value)} " in row and pct(value).startswith("-" if value < 0 else "+")
        md_row = next(line for line in run["md"].splitlines() if line.startswith(f"| {label} |"))
        assert f"| {pct(value)} |" in md_row
    assert "| -11.63% |" in run["md"] and "-11.63%" in run["shown"]
    lines = run["md"].splitlines()
    head = lines.index("| strategy | annual | Sortino | max DD | Calmar | win rate | exposure | turnover | final bar |")
    rows = lines[head + 2:head + 2 + len(doc["strategies"])]  # summary.md's table of more metrics per strategy
    for row, m in zip(rows, doc["strategies"].values()):
        assert row.split("|")[4].strip() == pct(m["max_drawdown"]), row
