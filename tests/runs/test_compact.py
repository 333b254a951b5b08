"""Compaction: a run's parts merged into a few sorted files behind a manifest, safe to kill at any point."""

import multiprocessing
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marketcast.runs.cells import Cell
from marketcast.runs.remake import cell_results
from marketcast.runs.rows import RunContext, fingerprint, ok_rows
from marketcast.errors import StateError, StoreWarning
from marketcast.runs.compact import buckets
from marketcast.runs.overview import cells, list_runs, summary
from marketcast.runs.read import MANIFEST
from marketcast.runs.store import RunStore

from .conftest import CONFIG

RUN = "big"
SYMBOLS = ("AAA", "BBB", "CCC", "DDD")


def _fill(store: RunStore, results, embedded_bars, start: int, stop: int) -> None:
    """One part per cell ``start..stop-1``: a real cell's rows with the cell's own id, index and symbol."""
    real = [ok_rows(RunContext(RUN, "sweep", "spec", "0.test"), Cell(symbol=r.symbol, config=CONFIG), 0, r,
                    fingerprint(b), 0.1) for r, b in zip(results, embedded_bars)]
    for i in range(start, stop):
        store.write_rows(RUN, [{**row, "cell_id": f"c{i:05d}", "cell_index": i, "symbol": SYMBOLS[i % len(SYMBOLS)]}
                               for row in real[i % len(real)]])


def _check(root: Path, cells_expected: int) -> None:
    """Every view works and every cell is there exactly once."""
    store = RunStore(root)
    counts = store.query("SELECT cell_id, count(*) AS n FROM cells GROUP BY cell_id")
    assert len(counts) == cells_expected and set(counts["n"]) == {1}
    results = store.query("SELECT cell_id, count(DISTINCT strategy) AS s, count(*) AS n FROM results GROUP BY cell_id")
    assert len(results) == cells_expected and (results["s"] == results["n"]).all()
    listing = list_runs(store)
    assert listing["ok"].tolist() == [cells_expected]
    assert len(cells(store, RUN)) == cells_expected
    assert summary(store, RUN)["cells"].sum() == results["n"].sum()
    groups = cell_results(store, RUN, "AAA")  # report RUN AAA
    assert sum(len(g) for g in groups.values()) == len(range(0, cells_expected, len(SYMBOLS)))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, results, embedded_bars):
    """A run compacted once, then resumed: 20 cells in the manifest's files, 200 more in one-cell parts."""
    return _resumed(tmp_path_factory.mktemp("store"), results, embedded_bars, 220)


def _resumed(root: Path, results, embedded_bars, cells_total: int) -> Path:
    """20 cells compacted, then the rest of ``cells_total`` in one-cell parts."""
    store = RunStore(root)
    store.write_info(RUN, {"kind": "sweep", "created_at": "2024-01-01T00:00:00+00:00", "cells_total": cells_total})
    _fill(store, results, embedded_bars, 0, 20)
    store.compact(RUN)
    _fill(store, results, embedded_bars, 20, cells_total)
    return root


def test_compaction_merges_parts_and_later_parts_are_read(tmp_path, pristine, results, embedded_bars):
    root = tmp_path / "s"
    shutil.copytree(pristine, root)
    store = RunStore(root)
    before = store.query("SELECT * EXCLUDE (record) FROM rows ORDER BY cell_id, strategy NULLS FIRST")
    done = store.compact(RUN)
    assert done == {"files_before": 201, "files_after": 1, "rows": len(before)}
    folder = store.run_dir(RUN)
    assert sorted(p.name for p in folder.glob("*.parquet")) == ["compact-000002-000.parquet"]
    after = store.query("SELECT * EXCLUDE (record) FROM rows ORDER BY cell_id, strategy NULLS FIRST")
    assert after.equals(before)
    assert store.compact(RUN)["files_after"] == 1  # nothing new: left as it is
    _fill(store, results, embedded_bars, 220, 223)  # a resume after compaction
    _check(root, 223)
    kept = store.compact(RUN, keep_parts=True)
    assert kept["files_after"] == 1 and len(list(folder.glob("part-*.parquet"))) == 3
    _check(root, 223)
    assert '"generation": 3' in (folder / MANIFEST).read_text()


def test_compacting_sorts_by_symbol_and_strategy(tmp_path, pristine):
    root = tmp_path / "s"
    shutil.copytree(pristine, root)
    store = RunStore(root)
    store.compact(RUN)
    order = store.query(f"SELECT symbol, strategy FROM read_parquet('{store.parts(RUN)[0]}')")
    keys = list(zip(order["symbol"], order["strategy"].fillna("")))
    assert keys == sorted(keys)


def test_a_10k_cell_run_compacts_to_at_most_5_files(tmp_path):
    store = RunStore(tmp_path)
    store.write_info(RUN, {"kind": "sweep", "created_at": "2024-01-01T00:00:00+00:00"})
    for start in range(0, 10_000, 64):
        store.write_rows(RUN, [{"run_id": RUN, "cell_id": f"c{i}", "cell_index": i, "symbol": f"S{i // 10}",
                                "status": "ok", "strategy": None} for i in range(start, min(10_000, start + 64))])
    assert store.compact(RUN)["files_after"] <= 5
    assert len(list(store.run_dir(RUN).glob("*.parquet"))) <= 5
    assert store.query("SELECT count(DISTINCT cell_id) AS n FROM cells")["n"][0] == 10_000


def test_buckets_split_symbols_into_runs_of_about_equal_rows():
    counts = [("A", 5), ("B", 5), ("C", 5), ("D", 5), (None, 1)]
    assert buckets(counts, 2) == ["symbol BETWEEN 'A' AND 'C'", "(symbol >= 'D' OR symbol IS NULL)"]
    assert buckets([("A", 9)], 3) == ["symbol BETWEEN 'A' AND 'A'"]


def test_a_damaged_manifest_is_named_and_compaction_refuses(tmp_path, pristine):
    root = tmp_path / "s"
    shutil.copytree(pristine, root)
    (root / RUN / MANIFEST).write_text("{not json")
    store = RunStore(root)
    with pytest.warns(StoreWarning, match="manifest.json"):
        assert len(store.query("SELECT cell_id FROM cells")) == 200  # the parts after it still read
    with pytest.raises(StateError, match="manifest.json is damaged"):
        store.compact(RUN)


MARKETCAST = str(Path(sys.executable).with_name("marketcast"))
POINTS = 20
# Killed compactions run in children forked from one process that imported the compaction's code once (a fresh
# interpreter per kill spent most of each run importing, where a kill tests nothing): the kills land in the
# compaction itself. The first run is the real `marketcast runs compact` command, from a fresh interpreter.
PRELOAD = ["marketcast.commands.runs", "marketcast.runs.compact", "duckdb", "pandas", "pyarrow.parquet"]


@pytest.fixture(scope="module")
def small(tmp_path_factory, results, embedded_bars):
    """:func:`pristine`'s shape at a quarter of its size (20 cells compacted, 40 in parts): each of the kill test's
    runs compacts it in about a second, through the same steps."""
    return _resumed(tmp_path_factory.mktemp("small"), results, embedded_bars, 60)


def _compact_child(context, root: Path):
    from marketcast.commands.runs import compact

    child = context.Process(target=compact, args=(RUN, False, root, False))  # the command's own function
    child.start()
    return child


def test_sigkill_at_20_random_points_leaves_every_cell_once(tmp_path, small):
    """SIGKILL at 20 seeded random moments of a compaction, one in each twentieth of its length (so every step,
    from the lock to the manifest swap and the clean-up after it, is hit): every cell stays readable exactly once,
    and the next compaction finishes the run into one file."""
    cli = shutil.copytree(small, tmp_path / "cli")
    whole = subprocess.run([MARKETCAST, "runs", "compact", RUN, "--store", str(cli)], capture_output=True, text=True,
                           timeout=300)
    assert whole.returncode == 0, whole.stderr
    _check(tmp_path / "cli", 60)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    warm = context.Process(target=time.sleep, args=(0,))  # the fork server starts (and imports) outside the timing
    warm.start()
    warm.join(timeout=120)
    spans = []  # the shorter of two (a busy moment of the machine lengthens one)
    for k in range(2):
        root = shutil.copytree(small, tmp_path / f"timing{k}")
        started = time.monotonic()
        timing = _compact_child(context, root)
        timing.join(timeout=120)
        spans.append(time.monotonic() - started)
        assert timing.exitcode == 0
    span = min(spans)
    rng = random.Random(20)
    killed = 0
    for point in range(POINTS):
        root = shutil.copytree(small, tmp_path / f"k{point}")
        proc = _compact_child(context, root)
        time.sleep(rng.uniform(point, point + 1) * span / POINTS)
        killed += proc.exitcode is None
        proc.kill()
        proc.join(timeout=60)
        _check(root, 60)
        RunStore(root).compact(RUN)
        assert len(RunStore(root).query("SELECT DISTINCT cell_id FROM cells")) == 60
        assert [p.name for p in root.joinpath(RUN).glob("*.parquet")] == ["compact-000002-000.parquet"]
        shutil.rmtree(root)
    assert killed >= POINTS // 4, killed  # the kills land inside the compaction (not after it ended), most of them
