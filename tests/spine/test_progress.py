"""Progress where no one watches a bar: a piped command says each stage on its own stderr line, with an ETA."""

from __future__ import annotations

import io
import re
import subprocess
import sys

from rich.console import Console

from marketcast import console as consoles

STAGE = re.compile(r"^\[(\d+)/(\d+)\] backtest: (.+?)(?: \(eta (\d+) s\))?$")


def test_a_piped_backtest_prints_each_stage_with_an_eta(tmp_path):
    done = subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", "SP500", "NASDAQ", "-n", "6", "-s",
                           "8", "-c", "32", "--no-spa", "--output-dir", str(tmp_path / "bt")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stages = [STAGE.match(line) for line in done.stderr.splitlines()]
    assert stages and all(stages), done.stderr  # nothing else on stderr: no warnings, no bar drawn
    assert [(int(m[1]), int(m[2])) for m in stages] == [(i, 4) for i in range(1, 5)]
    assert re.fullmatch(r"forecasting \d+ windows with baseline", stages[0][3])
    assert [m[3] for m in stages[1:]] == ["simulating SP500", "simulating NASDAQ", "writing reports"]
    assert stages[0][4] is None and all(m[4] is not None for m in stages[1:])  # an ETA once a stage has run
    assert "backtest:" not in done.stdout  # the tables stay clean


def test_a_terminal_gets_the_live_bar_not_lines(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(consoles, "err_console", Console(file=screen, force_terminal=True, width=100))
    with consoles.progress_steps(2, "replay") as step:
        step("one")
        step("two")
    assert "[1/2]" not in screen.getvalue() and "replay: two" in screen.getvalue()
