"""A config or sweep spec nested thousands of levels deep is one line and exit 2, naming the file, before any
work: no state folder, no run store (it used to be a ``RecursionError`` traceback in ``sweep`` and ``trade
replay``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from marketcast.errors import ConfigError
from marketcast.settings import MAX_TOML_DEPTH, read_toml

DEPTH = 3000
DEEP = {
    "dotted headers": "[" + ".".join(["a"] * DEPTH) + "]\nx = 1\n",
    "arrays": "x = " + "[" * DEPTH + "]" * DEPTH + "\n",
    "inline tables": "x = " + "{ a = " * DEPTH + "1" + " }" * DEPTH + "\n",
    "under [trade]": "[trade." + ".".join(["a"] * DEPTH) + "]\nx = 1\n",
}


def marketcast(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketcast.commands", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.parametrize("shape", DEEP)
def test_sweep_and_replay_refuse_a_deep_file_in_one_line_and_leave_nothing(tmp_path, shape):
    path = tmp_path / "deep.toml"
    path.write_text(DEEP[shape])
    runs = [marketcast("sweep", str(path), "--local", "--store", str(tmp_path / "store"), cwd=tmp_path),
            marketcast("trade", "replay", "--config", str(path), "--start", "2015-01-01", "--end", "2015-01-10",
                       "--state-dir", str(tmp_path / "state"), cwd=tmp_path)]
    for done in runs:
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr[-2000:]
        assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert "deep" in lines[0] and len(lines[0]) < 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.toml"]


def _nested(levels: int) -> str:
    """``levels`` dotted header keys then ``x = 1``: the value sits at depth ``levels + 1``."""
    return "[" + ".".join(["k"] * levels) + "]\nx = 1\n"


def test_the_limit_is_exact(tmp_path):
    ok, deep = tmp_path / "ok.toml", tmp_path / "deep.toml"
    ok.write_text(_nested(MAX_TOML_DEPTH - 1))
    deep.write_text(_nested(MAX_TOML_DEPTH))
    node = read_toml(ok, "a file")
    for _ in range(MAX_TOML_DEPTH - 1):
        node = node["k"]
    assert node == {"x": 1}
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_TOML_DEPTH} levels at k.k"):
        read_toml(deep, "a file")
    wide = tmp_path / "wide.toml"  # breadth is not depth: 5,000 keys at one level read fine
    wide.write_text("".join(f"k{i} = [{i}]\n" for i in range(5000)))
    assert read_toml(wide, "a file")["k4999"] == [4999]
