"""A backtest's output folder is one transaction: written beside the destination, put in place only after the run
store holds the run, never shared by two commands at once, and a full disk is exit 3 with nothing half-written."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from marketcast.commands import main
from marketcast.fileio import output_folder
from marketcast.report.page import bundle_name

FAST = ["SP500", "--windows", "6", "--samples", "16", "--context", "64", "--no-spa"]
OUTPUTS = ["SP500.json", "summary.md", "trades.csv"]


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _said(err: str) -> str:
    """stderr without the progress steps (``[1/3] backtest: ...``), which a non-terminal stderr gets as lines."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("["))


def test_a_run_store_that_cannot_be_written_leaves_no_output(tmp_path, monkeypatch, capsys):
    store = tmp_path / "store"
    store.write_text("a file where the run store folder should be")
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(store))
    assert main(["backtest", *FAST, "--html", "--output-dir", str(tmp_path / "new")]) == 3
    err = _said(capsys.readouterr().err)
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {store}") and "cannot create" in err
    assert _names(tmp_path) == ["store"]  # no output folder, no temporary folder, no lock file

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "SP500.json").write_text('{"old": true}')
    assert main(["backtest", *FAST, "--output-dir", str(tmp_path / "old")]) == 3
    assert _names(tmp_path) == ["old", "store"] and _names(tmp_path / "old") == ["SP500.json"]
    assert json.loads((tmp_path / "old" / "SP500.json").read_text()) == {"old": True}

    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))  # a store that works: the outputs appear
    assert main(["backtest", *FAST, "--html", "--output-dir", str(tmp_path / "old")]) == 0
    assert _names(tmp_path / "old") == sorted([*OUTPUTS, "report.html", bundle_name()])  # the page and its Plotly
    assert json.loads((tmp_path / "old" / "SP500.json").read_text())["runs"] == 6
    assert _names(tmp_path) == ["old", "runs", "store"]


def test_a_second_command_on_the_same_output_folder_is_refused(tmp_path, capsys):
    dest = tmp_path / "out"
    with output_folder(dest):  # the first command, half-way through its write
        assert main(["backtest", *FAST, "--output-dir", str(dest)]) == 3
        assert _said(capsys.readouterr().err) == (f"error: {dest} is being written by another marketcast process "
                                           f"(pid {os.getpid()}); wait for it to finish or choose another folder\n")
        assert not dest.exists()
    assert main(["backtest", *FAST, "--output-dir", str(dest)]) == 0  # once it is done, the next one runs
    assert _names(dest) == OUTPUTS and _names(tmp_path) == ["out"]


def test_a_full_disk_is_exit_3_and_leaves_nothing_half_written(tmp_path):
    """The kernel refuses writes past RLIMIT_FSIZE (EFBIG) as it refuses them on a full disk (ENOSPC)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "SP500.json").write_text("{}")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (12_000, 12_000))

    done = subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", *FAST, "--output-dir",
                           str(tmp_path / "out")], preexec_fn=limit, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MARKETCAST_RUN_STORE": str(tmp_path / "runs")})
    assert done.returncode == 3, done.stderr
    (line,) = _said(done.stderr).splitlines()
    assert line.startswith(f"error: {tmp_path / 'out'}") and line.endswith(
        "cannot write (File too large); free space or fix the permissions and run again")
    assert _names(tmp_path) == ["out"] and _names(tmp_path / "out") == ["SP500.json"]  # no run recorded either
    assert (tmp_path / "out" / "SP500.json").read_text() == "{}"


@pytest.mark.parametrize("inside", ["sub", "link"])
def test_a_folder_that_is_not_only_outputs_is_refused_before_anything_is_written(tmp_path, capsys, inside):
    dest = tmp_path / "project"
    (dest / "src").mkdir(parents=True)
    if inside == "link":
        (dest / "src").rmdir()
        (dest / "src").symlink_to(tmp_path)
    assert main(["backtest", *FAST, "--output-dir", str(dest)]) == 2
    assert _said(capsys.readouterr().err) == (f"error: {dest} holds src, which is not a plain file; write the "
                                              "outputs to a folder of their own (a new or an earlier output "
                                              "folder)\n")
    assert _names(dest) == ["src"] and _names(tmp_path) == ["project"]
