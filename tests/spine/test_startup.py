"""What a command imports: ``--help`` nothing heavy; a default baseline backtest, every statistic on (the SPA
p-values included: numpy, not arch), no torch, scipy, statsmodels, matplotlib, plotly, arch or pydantic, and,
once the calendar is cached, not exchange_calendars either. Checked in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import typer

from marketcast.commands import COMMANDS, app
from marketcast.data.cache import ENV as CACHE_ENV

PROBE = """
import json, sys
from marketcast.commands import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted({m.split('.')[0] for m in sys.modules})}))
"""


def imported(*args: str, env: dict | None = None) -> tuple[int, set[str]]:
    """Exit code and top-level packages imported by ``marketcast ARGS`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COLUMNS": "120", **(env or {})})
    last = json.loads(out.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"])


def test_help_imports_no_subcommand_and_nothing_heavy():
    code, modules = imported("--help")
    assert code == 0
    assert not modules & {"torch", "matplotlib", "scipy", "pandas", "numpy", "exchange_calendars", "arch"}


def test_a_baseline_backtest_imports_no_torch_and_a_cached_calendar_no_exchange_calendars(tmp_path):
    env = {CACHE_ENV: str(tmp_path / "cache")}
    args = ("backtest", "--windows", "40", "--samples", "32", "--context", "32", "--min-trades", "3",
            "--output-dir", str(tmp_path / "o"))  # every statistic on: SPA, CSCV, Monte Carlo batches
    code, first = imported(*args, env=env)
    assert code == 0 and "exchange_calendars" in first  # the first run builds the calendar and caches it
    code, again = imported(*args, env=env)
    assert code == 0
    assert not again & {"torch", "matplotlib", "scipy", "statsmodels", "arch", "plotly", "exchange_calendars",
                         "pydantic"}  # plain option values skip typer's pydantic adapters
    assert {"numpy", "pandas"} <= again
    selection = json.loads((tmp_path / "o" / "latest" / "SP500.json").read_text())["selection"]
    assert selection["spa_pvalue"] is not None and selection["spa_cash_mc_error"] is not None  # the SPA ran


def test_the_help_listing_is_each_commands_own_summary():
    group = typer.main.get_command(app)
    for name, (_, summary) in COMMANDS.items():
        command = group.load(name)
        assert command.name == name
        assert command.help.strip().splitlines()[0] == summary, name
    assert group.list_commands(None) == list(COMMANDS)


def test_loading_a_command_restores_the_collector_and_freezes_once_per_process():
    """The cyclic GC pauses while a command imports (marketcast.commands.lazy.imports_untraced) and is on again
    afterwards; what the imports made is frozen the first time only, so a process that loads commands again
    and again (the tests) never freezes the garbage made between two loads. Checked in a fresh interpreter."""
    probe = """
import gc, json
from marketcast.commands import app
import typer
group = typer.main.get_command(app)
seen = [gc.isenabled(), gc.get_freeze_count()]
group.load("backtest")
seen += [gc.isenabled(), gc.get_freeze_count()]
junk = [[] for _ in range(1000)]
for a, b in zip(junk, junk[1:]):
    a.append(b); b.append(a)  # cyclic garbage made between two loads
del junk, a, b
group.load("schema")
seen += [gc.isenabled(), gc.get_freeze_count()]
gc.disable()
group.load("data")
seen += [gc.isenabled()]
print(json.dumps(seen))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    enabled_before, frozen_before, enabled_after, frozen_after, enabled_again, frozen_again, left_off = json.loads(
        out.stdout.strip().splitlines()[-1])
    assert enabled_before and enabled_after and enabled_again
    assert frozen_before == 0 and frozen_after > 10_000  # numpy, pandas and the backtest's modules
    assert frozen_again <= frozen_after  # the second load froze nothing more (not the 1,000 lists of garbage)
    assert left_off is False  # a caller that had turned the collector off finds it off
