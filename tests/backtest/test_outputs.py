"""A backtest writes its own folder under the output root (named by its run id): written beside it, put in place
only after the run store holds the run, never a mix of two runs, ``latest`` linking the newest, one Plotly file
for every page under the root, and a full disk is exit 3 with nothing half-written."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

from marketcast.commands import main
from marketcast.report.page import bundle_name

FAST = ["SP500", "--windows", "6", "--samples", "16", "--context", "64", "--no-spa"]
OUTPUTS = ["SP500.json", "summary.md", "trades.csv"]


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _said(err: str) -> str:
    """stderr without the progress steps (``[1/3] backtest: ...``), which a non-terminal stderr gets as lines."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("["))


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links followed) with its bytes and its change time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*")
            if p.is_file()}


def test_two_runs_into_one_root_get_a_folder_each(tmp_path, monkeypatch, capsys):
    """Issue 57: the second run's folder holds its files only, the first's is untouched, latest names the second,
    the Plotly file is there once and every page reaches it by a relative path, and the terminal names the folder."""
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))
    root = tmp_path / "out"
    assert main(["backtest", "SP500", "NASDAQ", *FAST[1:], "--html", "--output-dir", str(root)]) == 0
    first_lines = capsys.readouterr().out.splitlines()
    (first,) = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    assert first_lines[-1] == f"run {first.name}" and re.fullmatch(r"backtest-\d{8}-\d{6}-[0-9a-f]{4}", first.name)
    before = _tree(first)
    assert sorted(before) == ["NASDAQ.json", "SP500.json", "report.html", "summary.md", "trades.csv"]

    assert main(["backtest", *FAST, "--output-dir", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (second,) = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p != first]
    assert _names(second) == OUTPUTS  # nothing of the first run (NASDAQ.json, report.html) in the second's folder
    assert json.loads((second / "SP500.json").read_text())["runs"] == 6
    assert _tree(first) == before  # the first run's folder is untouched
    assert os.readlink(root / "latest") == second.name  # relative: the root can be moved
    assert _names(root) == sorted([first.name, second.name, "latest", bundle_name()])  # no temporary, no lock
    assert lines[-2:] == [f"wrote 3 files to {second}/ ({root / 'latest'} links it)", f"run {second.name}"]

    assert main(["backtest", *FAST, "--html", "--output-dir", str(root)]) == 0  # a third page, the same Plotly
    capsys.readouterr()
    bundles = [p for p in tmp_path.rglob("plotly-*.js")]
    assert bundles == [root / bundle_name()] and bundles[0].stat().st_size > 1_000_000
    pages = sorted(p for p in root.glob("backtest-*/report.html"))
    assert len(pages) == 2
    for page in pages:
        (src,) = re.findall(r'<script src="([^"]+)"', page.read_text())
        assert src == f"../{bundle_name()}" and (page.parent / src).resolve() == bundles[0].resolve()


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

    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))  # a store that works: the outputs appear
    assert main(["backtest", *FAST, "--html", "--output-dir", str(tmp_path / "old")]) == 0
    (run,) = os.listdir(tmp_path / "runs")
    assert _names(tmp_path / "old") == sorted(["SP500.json", run, "latest", bundle_name()])
    assert _names(tmp_path / "old" / run) == sorted([*OUTPUTS, "report.html"])
    assert json.loads((tmp_path / "old" / "SP500.json").read_text()) == {"old": True}  # not ours: left alone
    assert json.loads((tmp_path / "old" / "latest" / "SP500.json").read_text())["runs"] == 6


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
    assert line.startswith(f"error: {tmp_path / 'out' / 'backtest-'}") and line.endswith(
        "cannot write (File too large); free space or fix the permissions and run again")
    assert _names(tmp_path) == ["out"] and _names(tmp_path / "out") == ["SP500.json"]  # no run recorded either
    assert (tmp_path / "out" / "SP500.json").read_text() == "{}"


def test_a_root_holding_other_things_keeps_them_and_a_latest_not_ours_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print(1)\n")
    assert main(["backtest", *FAST, "--output-dir", str(root)]) == 0  # no store: the folder still has a run id
    (run,) = [n for n in _names(root) if n.startswith("backtest-")]
    assert _names(root) == sorted(["src", run, "latest"]) and _names(root / run) == OUTPUTS
    assert (root / "src" / "main.py").read_text() == "print(1)\n"
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote 3 files to {root / run}/ ({root / 'latest'} links it)"

    (root / "latest").unlink()
    (root / "latest").mkdir()  # a folder of the user's that happens to be called latest: never replaced
    assert main(["backtest", *FAST, "--output-dir", str(root)]) == 3
    assert _said(capsys.readouterr().err) == (f"error: --output-dir {root}: holds latest, which is not the link "
                                              "marketcast keeps to the newest run folder; move it away or choose "
                                              "another folder\n")
    assert _names(root) == sorted(["src", run, "latest"]) and _names(root / "latest") == []
