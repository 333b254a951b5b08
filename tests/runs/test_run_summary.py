"""``summary.json``: ``runs list`` reads a run's counts from it while the run's live files are the ones it was
counted from, and counts the parts again otherwise (a part added since, a damaged or missing summary, a store
written before summaries): the listing is the same either way."""

from __future__ import annotations

import json

import pandas as pd

from marketcast.runs.overview import list_runs
from marketcast.runs.read import SUMMARY
from marketcast.runs.store import RunStore


def _rows(run: str, start: int, specs: list[tuple]) -> list[dict]:
    """A cell row and one strategy row per ``(symbol, model, status)``."""
    rows = []
    for i, (symbol, model, status) in enumerate(specs, start):
        cell = {"run_id": run, "cell_id": f"{run}-{i}", "cell_index": i, "symbol": symbol, "model": model,
                "status": status, "error": None if status == "ok" else "boom"}
        rows.append({**cell, "strategy": None})
        if status == "ok":
            rows.append({**cell, "strategy": "simple", "return": 0.01 * i, "sharpe": 0.1})
    return rows


SPECS = [("SP500", "toto", "ok"), ("SP500", "baseline", "ok"), ("NASDAQ", None, "error"), ("DOW", "toto", "poison"),
         ("NASDAQ", "baseline", "ok")]


def _store(tmp_path) -> RunStore:
    store = RunStore(tmp_path)
    for run in ("run-a", "run-b"):
        store.write_info(run, {"kind": "sweep", "created_at": f"2030-01-01T00:00:0{run[-1] == 'b':d}",
                               "cells_total": 8, "status": "done"})
    rows = _rows("run-a", 0, SPECS)
    store.write_rows("run-a", rows)
    store.write_summary("run-a", rows)  # counted in Python, as a recorded backtest is
    store.write_rows("run-b", _rows("run-b", 0, SPECS[:2]))
    store.write_rows("run-b", _rows("run-b", 2, SPECS[2:]))
    store.write_summary("run-b")  # two parts: counted in DuckDB
    return store


def _counted_from_parts(store: RunStore) -> pd.DataFrame:
    for path in store.root.glob(f"*/{SUMMARY}"):
        path.unlink()
    return list_runs(RunStore(store.root))


def test_the_summary_gives_the_counts_the_parts_give(tmp_path):
    store = _store(tmp_path)
    assert store.summaries(["run-a", "run-b"]) == {
        run: {"ok": 3, "failed": 2, "symbols": 3, "models": "baseline,toto"} for run in ("run-a", "run-b")}
    listed = list_runs(store)
    assert listed[["ok", "failed", "symbols", "models"]].values.tolist() == [[3, 2, 3, "baseline,toto"]] * 2
    pd.testing.assert_frame_equal(listed, _counted_from_parts(store))


def test_a_stale_or_damaged_summary_is_counted_again(tmp_path):
    store = _store(tmp_path)
    store.write_rows("run-a", _rows("run-a", 5, [("GOLD", "kronos", "ok")]))  # a part the summary has not seen
    (store.run_dir("run-b") / SUMMARY).write_text('{"files": [], "ok": "three"')
    assert store.summaries(["run-a", "run-b"]) == {}
    listed = list_runs(store).set_index("run_id")
    assert listed.loc["run-a", ["ok", "failed", "symbols", "models"]].tolist() == [4, 2, 4, "baseline,kronos,toto"]
    assert listed.loc["run-b", ["ok", "failed"]].tolist() == [3, 2]


def test_compaction_writes_a_summary_valid_for_the_compacted_files(tmp_path):
    store = _store(tmp_path)
    before = list_runs(store)
    store.compact("run-b")
    summary = json.loads((store.run_dir("run-b") / SUMMARY).read_text())
    assert [name for name, _ in summary["files"]] == ["compact-000001-000.parquet"]
    assert store.summaries(["run-b"]) == {"run-b": {"ok": 3, "failed": 2, "symbols": 3, "models": "baseline,toto"}}
    pd.testing.assert_frame_equal(list_runs(store), before)


def test_a_long_listing_prints_plain_columns_with_every_run(tmp_path, capsys):
    from marketcast.commands import main

    store = _store(tmp_path)
    for r in range(205):  # planned runs: a run.json, no part
        store.write_info(f"p{r:03d}", {"kind": "sweep", "created_at": f"2031-01-01T00:00:00.{r:06d}",
                                       "cells_total": 4, "status": "planned"})
    capsys.readouterr()
    assert main(["runs", "list", "--store", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"runs in {tmp_path}"
    assert lines[1].split()[:5] == ["run_id", "kind", "status", "created_at", "ok"]
    assert len(lines) == 3 + 207 and set(lines[2]) == {"-", " "}
    assert lines[3].split()[:9] == ["run-a", "sweep", "done", "2030-01-01T00:00:00", "3", "2", "8", "3",
                                    "baseline,toto"]
    assert lines[-1].split()[:8] == ["p204", "sweep", "planned", "2031-01-01T00:00:00", "0", "0", "4", "0"]
    assert main(["runs", "list", "--store", str(tmp_path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 207
