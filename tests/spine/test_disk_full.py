"""A full disk (ENOSPC) or a spent quota (EDQUOT) names the file it could not write, exit 3, and leaves no
temporary file. A small tmpfs cannot be mounted here, so the writers meet a fake write that raises the errno."""

from __future__ import annotations

import errno
import os

import pytest

import marketcast.fileio as fileio
from marketcast.errors import ExitCode, StateError
from marketcast.fileio import exclusive, write_atomic
from marketcast.runs.store import RunStore


def _full(code: int = errno.ENOSPC):
    def write(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return write


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_an_atomic_write_on_a_full_disk_names_the_file_and_leaves_nothing(tmp_path, code):
    target = tmp_path / "out" / "trades.csv"
    with pytest.raises(StateError) as caught:
        write_atomic(target, _full(code), StateError)
    line = str(caught.value)
    assert line.startswith(f"{target}: cannot write ({os.strerror(code)})") and "\n" not in line
    assert caught.value.exit_code == ExitCode.STATE
    assert os.listdir(tmp_path / "out") == []  # no temporary file, no half a file


def test_a_lock_file_on_a_full_disk_names_the_lock_and_is_removed(tmp_path, monkeypatch):
    lock = tmp_path / ".lock"
    monkeypatch.setattr(fileio.os, "pwrite", _full())
    with pytest.raises(StateError, match=f"^{lock}: cannot write the lock file \\(No space left on device\\)"):
        with exclusive(lock, "the folder"):
            pytest.fail("the block ran without its lock written")
    assert not lock.exists()


def test_a_run_store_part_on_a_full_disk_names_the_part(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    runs = RunStore(tmp_path / "runs")
    runs.write_info("r", {"kind": "sweep", "created_at": "2030-01-01", "cells_total": 1})
    monkeypatch.setattr(pq, "write_table", _full())
    with pytest.raises(StateError) as caught:
        runs.write_rows("r", [{"run_id": "r", "cell_id": "1", "cell_index": 0, "status": "ok", "strategy": None}])
    line = str(caught.value)
    assert line.startswith(str(tmp_path / "runs" / "r" / "part-")) and ".parquet: cannot write (No space" in line
    assert sorted(os.listdir(tmp_path / "runs" / "r")) == ["run.json"]


def test_a_run_lock_that_cannot_be_created_names_the_lock(tmp_path, monkeypatch):
    import builtins

    runs = RunStore(tmp_path / "runs")
    runs.write_info("r", {"kind": "sweep", "created_at": "2030-01-01", "cells_total": 1})
    real = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: _full()() if str(path).endswith(".lock")
                        else real(path, *a, **k))
    with pytest.raises(StateError, match=r"/r/\.lock: cannot create the lock file \(No space left on device\)"):
        with runs.lock("r"):
            pytest.fail("the block ran without its lock")
