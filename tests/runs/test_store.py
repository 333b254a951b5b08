"""The Parquet store: atomic parts, columns that change between parts, the run lock, run references."""

import os
import signal
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

from marketcast.errors import ConfigError, StateError
from marketcast.runs.store import RunStore, store_root


def test_parts_with_different_columns_union_by_name(tmp_path):
    store = RunStore(tmp_path)
    store.write_info("r1", {"kind": "sweep", "created_at": "2024-01-01T00:00:00+00:00"})
    store.write_rows("r1", [{"run_id": "r1", "cell_id": "a", "strategy": None, "status": "ok", "trades": 3,
                             "fee": None}])
    store.write_rows("r1", [{"run_id": "r1", "cell_id": "b", "strategy": None, "status": "ok", "trades": 2.5,
                             "fee": 0.001, "psr": 0.9, "returns": [0.01, -0.02]}])
    found = store.query("SELECT cell_id, trades, fee, psr, returns FROM rows ORDER BY cell_id")
    assert found["trades"].tolist() == [3.0, 2.5] and found["fee"].isna().tolist() == [True, False]
    assert found["psr"].isna().tolist() == [True, False] and list(found["returns"][1]) == [0.01, -0.02]
    assert store.finished("r1") == {"a", "b"}


def test_a_failed_write_leaves_no_file_and_leftovers_are_ignored(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    store.write_rows("r1", [{"run_id": "r1", "cell_id": "a", "strategy": None, "status": "ok"}])

    def half_then_die(table, where, **kwargs):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", half_then_die)
    with pytest.raises(StateError, match="No space left on device"):
        store.write_rows("r1", [{"run_id": "r1", "cell_id": "b", "strategy": None, "status": "ok"}])
    assert [p.name[:5] for p in store.run_dir("r1").iterdir()] == ["part-"]  # no half file, no temporary
    (store.run_dir("r1") / ".part-x.parquet.1234.tmp").write_bytes(b"PAR1 torn")  # a killed writer's file
    assert store.finished("r1") == {"a"}


def test_mixed_types_in_one_column_are_one_clear_error(tmp_path):
    with pytest.raises(StateError, match="column 'x' mixes float, str"):
        RunStore(tmp_path).write_rows("r1", [{"x": 1.5}, {"x": "a"}])


def test_the_lock_is_exclusive_and_dies_with_its_process(tmp_path):
    store = RunStore(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from marketcast.runs.store import RunStore
        with RunStore({str(tmp_path)!r}).lock("r1"):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StateError, match="being written by another process"):
            with store.lock("r1"):
                pass
        (store.run_dir("r1") / ".part-y.parquet.ab.tmp").write_bytes(b"torn")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with store.lock("r1"):
        assert not list(store.run_dir("r1").glob(".*.tmp"))  # the dead writer's leftovers are gone


def test_run_references_and_the_store_location(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    with pytest.raises(ConfigError, match="holds no runs yet"):
        store.resolve("latest")
    for run, created in (("sweep-a1", "2024-01-02"), ("sweep-a2", "2024-01-03"), ("backtest-b", "2024-01-01")):
        store.write_info(run, {"created_at": created})
    assert store.run_ids() == ["backtest-b", "sweep-a1", "sweep-a2"]
    assert store.resolve("latest") == "sweep-a2" and store.resolve("back") == "backtest-b"
    with pytest.raises(ConfigError, match="ambiguous: sweep-a1, sweep-a2"):
        store.resolve("sweep")
    with pytest.raises(ConfigError, match="no run 'nope'"):
        store.resolve("nope")
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    assert store_root() is None and store_root(tmp_path) == tmp_path
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "x"))
    assert store_root() == tmp_path / "x"
    monkeypatch.delenv("MARKETCAST_RUN_STORE")
    assert str(store_root()) == "out/runs"
