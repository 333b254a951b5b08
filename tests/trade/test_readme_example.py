"""The README's paper example runs as written on a fresh clone: its ``marketcast.toml`` and the command lines
after it, taken from README.md itself, in an empty folder, offline, on the embedded bars."""

from __future__ import annotations

import csv
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from marketcast.trade.ops.monitor import read_records

ROOT = Path(__file__).resolve().parents[2]


def example() -> tuple[str, list[list[str]]]:
    """The TOML block of the README's Trading section and the command lines of the shell block after it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Trading", 1)[1]
    toml = re.search(r"```toml\n(.*?)```", text, flags=re.DOTALL).group(1)
    shell = re.search(r"```sh\n(.*?)```", text[text.index(toml):], flags=re.DOTALL).group(1)
    return toml, [shlex.split(line) for line in shell.splitlines() if line.strip()]


def test_the_readme_paper_example_runs_as_written(tmp_path):
    toml, commands = example()
    assert "[trade]" in toml and [c[:3] for c in commands] == [["marketcast", "trade", "replay"],
                                                               ["marketcast", "trade", "orders"],
                                                               ["marketcast", "trade", "status"]]
    (tmp_path / "marketcast.toml").write_text(toml)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APCA_API_", "MARKETCAST_", "ADD_LATEST"))}
    env.update(PYTHONPATH=str(ROOT / "src"), COLUMNS="200")
    outs = []
    for argv in commands:  # `marketcast` is this checkout's console script
        out = subprocess.run([sys.executable, "-m", "marketcast.commands", *argv[1:]], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600, check=False)
        assert out.returncode == 0, (argv, out.stderr)
        outs.append(out)
    line = " ".join(outs[0].stdout.split())
    assert "replay 2015-01-01 .. 2015-12-31 SP500,NASDAQ: 251 cycles run" in line and "broker refusals 0;" in line
    with open(tmp_path / "out" / "orders-2015.csv", newline="") as fh:
        orders = list(csv.DictReader(fh))
    filled = [o for o in orders if o["filled_at"]]
    assert len(orders) > 0 and {o["symbol"] for o in orders} <= {"SP500", "NASDAQ"}
    assert all(o["filled_at"] > o["submitted_at"] for o in filled if o["kind"] != "on_close")  # one clock: 2015's
    # a cls exit is sent while its entry's bar trades and fills at that bar's close: the same bar
    assert all(o["filled_at"] == o["submitted_at"] for o in filled if o["kind"] == "on_close")
    assert f"{len(orders)} orders: out/orders-2015.csv" in outs[1].stdout
    assert re.search(r"cycles\s*│\s*251", outs[2].stdout), outs[2].stdout
    records = read_records(tmp_path / "out" / "replay-2015")
    assert {r["chosen"]["NASDAQ"]["pinned"] for r in records if r.get("chosen", {}).get("NASDAQ")} == {True}
