"""Warnings while a command runs: one ``warning:`` line each on stderr, however often they are raised."""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings

from marketcast.commands import main

# a command that warns the way the code underneath does: a Python warning from a factory called once per mode
# (the warnings registry reset in between, as torch does), and a log record no handler takes, twice
NOISY = '''
import logging, sys, warnings
import typer
from marketcast.commands import runner

app = typer.Typer()

@app.command()
def check() -> None:
    for _ in range(2):
        warnings.warn("toto: weights='random' are meaningless", stacklevel=1)
        warnings.resetwarnings()
        logging.getLogger("marketcast.compile").warning("tiny: torch.compile disabled, running eager")
    print("the table")

sys.exit(runner.run(app, [], debug="--debug" in sys.argv))
'''


def _run(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", NOISY, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_each_warning_is_one_prefixed_line_on_stderr():
    done = _run()
    assert done.stdout == "the table\n"
    assert done.stderr.splitlines() == ["warning: toto: weights='random' are meaningless",
                                        "warning: tiny: torch.compile disabled, running eager"]


def test_debug_leaves_python_s_own_warnings_and_logging():
    done = _run("--debug")
    assert "UserWarning: toto: weights='random' are meaningless" in done.stderr
    assert "warning: " not in done.stderr and "tiny: torch.compile disabled, running eager" in done.stderr


def test_after_a_command_logging_and_warnings_are_python_s_own_again(capsys):
    before = (logging.lastResort, warnings.showwarning)
    assert main(["data", "--help"]) == 0
    assert (logging.lastResort, warnings.showwarning) == before
