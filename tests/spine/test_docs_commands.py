"""Docs that cannot drift: every fenced block of README.md and docs/*.md marked ``<!-- runnable -->`` (an HTML
comment, invisible on GitHub, on the line just before a ```sh or ```bash fence) is run line by line, in order,
through the installed CLI in an empty folder with its own run store, offline, and each line must exit 0."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_ohlcv

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
BLOCK = re.compile(r"^<!-- runnable -->\n```(?:sh|bash)\n(.*?)^```$", flags=re.MULTILINE | re.DOTALL)


def runnable_commands(text: str) -> list[list[str]]:
    """The marked blocks' command lines, split as a shell would (comments dropped, blank lines skipped)."""
    return [words for block in BLOCK.findall(text) for line in block.splitlines()
            if (words := shlex.split(line, comments=True))]


def test_only_marked_sh_blocks_are_read():
    text = ("```sh\nmarketcast backtest\n```\n<!-- runnable -->\n```sh\nmarketcast runs list   # the store\n\n"
            "marketcast schema 'back test'\n```\n<!-- runnable -->\n```toml\n[trade]\n```\n")
    assert runnable_commands(text) == [["marketcast", "runs", "list"], ["marketcast", "schema", "back test"]]


def test_every_marker_opens_a_shell_block():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        markers = re.findall(rf"^{MARKER}$", text, flags=re.MULTILINE)
        assert len(markers) == len(BLOCK.findall(text)), f"{doc.name}: a {MARKER} line not just before a ```sh block"


def test_every_runnable_command_in_the_docs_exits_0(tmp_path):
    commands = [(doc.relative_to(ROOT), words) for doc in DOCS
                for words in runnable_commands(doc.read_text(encoding="utf-8"))]
    (tmp_path / "data").mkdir()
    # the docs' stand-in for the user's own bars: 600 hourly bars, every day of the week (crypto)
    make_ohlcv(600, start="2024-01-01", freq="h").to_csv(tmp_path / "data" / "BTCUSD.csv")
    env = {**os.environ, "MARKETCAST_RUN_STORE": str(tmp_path / "runs"), "HF_HUB_OFFLINE": "1"}
    for doc, words in commands:
        assert words[0] == "marketcast", f"{doc}: a runnable line must be a marketcast command: {shlex.join(words)}"
        done = subprocess.run([sys.executable, "-m", "marketcast.commands", *words[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{doc}: `{shlex.join(words)}` exited {done.returncode}:\n{done.stderr}"
    print(f"ran {len(commands)} documented commands")
    assert len(commands) >= 5
