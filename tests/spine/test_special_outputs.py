"""Outputs only ever replace regular files (issue 56 item 1): an output path that is a FIFO or a character device
is refused before any work, one line, exit 3, and the node is still there afterwards (``trade orders --csv
/dev/null`` used to rename a regular file over the device node; ``trade replay --png /dev/full`` wrote
``/dev/full.png``). The special files are made in the test's own folder, never under /dev."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.errors import StateError
from marketcast.fileio import write_atomic, write_files
from marketcast.trade.replay import plot_equity

KINDS = ("fifo", "chardev")
PERIOD = ["--start", "2020-01-02", "--end", "2020-02-03"]  # the replay's; refused before its bars are read


def make_special(path: Path, kind: str, numbers: tuple[int, int] = (1, 3)) -> Path:
    """A FIFO, or a character device with the numbers of /dev/null (1, 3; /dev/zero is 1, 5), at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*numbers))
        except PermissionError:
            pytest.skip("this process may not create character devices (mknod needs CAP_MKNOD)")
    return path


def still_special(path: Path, kind: str) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


def one_line(capsys, argv: list[str], code: int) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("kind", KINDS)
def test_trade_orders_csv_on_a_special_file_is_refused_and_the_node_stays(tmp_path, capsys, kind):
    node = make_special(tmp_path / "orders.csv", kind)
    line = one_line(capsys, ["trade", "orders", "--state-dir", str(tmp_path / "state"), "--csv", str(node)], 3)
    assert line.startswith(f"error: --csv {node}: is a ") and "not a regular file" in line
    assert still_special(node, kind) and listing(tmp_path) == ["orders.csv"]


@pytest.mark.parametrize("kind", KINDS)
def test_trade_replay_png_on_a_special_file_is_refused_before_the_replay(tmp_path, capsys, kind):
    node = make_special(tmp_path / "full", kind)  # no suffix: nothing may be written at full.png either
    state = tmp_path / "state"
    line = one_line(capsys, ["trade", "replay", *PERIOD, "--state-dir", str(state), "--png", str(node)], 3)
    assert line.startswith(f"error: --png {node}: is a ") and "not a regular file" in line
    assert still_special(node, kind) and listing(tmp_path) == ["full"]  # no state folder, no full.png


def test_the_equity_png_is_written_exactly_at_the_path_given(tmp_path):
    equity = pd.Series(np.linspace(100.0, 110.0, 5), index=pd.date_range("2024-01-01", periods=5, tz="UTC"))
    written = plot_equity(equity, tmp_path / "equity")
    assert written == tmp_path / "equity" and listing(tmp_path) == ["equity"]  # no "equity.png" beside it
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and stat.S_IMODE(written.stat().st_mode) == 0o600


@pytest.mark.parametrize("kind", KINDS)
def test_a_state_file_that_is_special_is_refused_before_work(tmp_path, capsys, kind):
    state = tmp_path / "state"
    state.mkdir()
    node = make_special(state / "journal.db", kind)
    for argv in (["trade", "status", "--state-dir", str(state)], ["trade", "orders", "--state-dir", str(state)],
                 ["trade", "replay", *PERIOD, "--state-dir", str(state)]):
        line = one_line(capsys, argv, 3)
        assert line.startswith(f"error: --state-dir {state} holds {node}: is a "), (argv, line)
    assert still_special(node, kind) and listing(tmp_path) == ["state", "state/journal.db"]


@pytest.mark.parametrize("kind", KINDS)
def test_plot_output_folder_env_file_and_finetune_out_refuse_special_files(tmp_path, capsys, kind):
    node = make_special(tmp_path / "node", kind)
    fan = make_special(tmp_path / "fan.png", kind)
    assert one_line(capsys, ["forecast", "SP500", "--plot", str(fan)], 3).startswith(f"error: --plot {fan}: is a ")
    out = tmp_path / "out"
    out.mkdir()
    inside = make_special(out / "SP500.json", kind)
    # the symbol does not exist: had the data been read first, this would be exit 2 naming it
    line = one_line(capsys, ["backtest", "NOSUCH", "--output-dir", str(out)], 3)
    assert line.startswith(f"error: --output-dir {out} holds {inside}: is a ")
    line = one_line(capsys, ["compile", "check", "--model", "toto", "--output-dir", str(out)], 3)  # before any model loads
    assert line.startswith(f"error: --output-dir {out} holds {inside}: is a ")
    line = one_line(capsys, ["compile", "enable", "--env-file", str(node)], 3)
    assert line.startswith(f"error: --env-file {node}: is a ")
    line = one_line(capsys, ["finetune", "--until", "2016-12-30", "--out", str(node)], 3)
    assert line.startswith(f"error: --out {node}: is a ")
    assert all(still_special(p, kind) for p in (node, fan, inside))
    assert listing(tmp_path) == ["fan.png", "node", "out", "out/SP500.json"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_atomic_writer_never_renames_over_a_special_file(tmp_path, kind):
    node = make_special(tmp_path / "target", kind)
    with pytest.raises(StateError, match="is a .* not a regular file"):
        write_atomic(node, "text")
    (tmp_path / "a.txt").write_text("old")
    with pytest.raises(StateError, match="not a regular file"):  # all or nothing: a.txt keeps its old text
        write_files(tmp_path, {"a.txt": "new", "target": "x"})
    assert still_special(node, kind) and (tmp_path / "a.txt").read_text() == "old"
    assert listing(tmp_path) == ["a.txt", "target"]  # no temporary file left
