"""A store being written is read without a false refusal: ``runs show`` while a writer adds parts and folds
them (a sweep's compaction deletes the parts a reader may just have listed) answers every time, exit 0."""

from __future__ import annotations

import threading

import duckdb  # noqa: F401 - imported once here, not by two threads at once

from marketcast.commands import main
from marketcast.runs.store import RunStore

READS = 20


def _cell(run: str, i: int) -> dict:
    return {"run_id": run, "cell_id": f"c{i}", "cell_index": i, "status": "ok", "strategy": None, "symbol": "X",
            "model": "baseline", "error": None}


def test_runs_show_while_parts_are_written_and_folded_never_refuses(tmp_path, capsys):
    root, run = tmp_path / "runs", "sweep-1"
    runs = RunStore(root)
    runs.write_info(run, {"kind": "sweep", "created_at": "2030-01-01", "cells_total": 100_000, "status": "running"})
    runs.write_rows(run, [_cell(run, 0)])
    stop, written, failed = threading.Event(), [1], []

    def writer() -> None:  # parts appear, and every eighth one a fold removes the parts it absorbed
        try:
            while not stop.is_set():
                runs.write_rows(run, [_cell(run, written[0])])
                written[0] += 1
                if written[0] % 8 == 0:
                    with runs.lock(run):
                        runs.fold(run)
                stop.wait(0.01)  # a sweep's cells take seconds; this writer is still many times faster
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failed.append(exc)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        for _ in range(READS):
            capsys.readouterr()
            code = main(["runs", "show", "latest", "--store", str(root), "--json"])
            err = capsys.readouterr().err
            assert code == 0 and "refused" not in err, err
    finally:
        stop.set()
        thread.join(30)
    assert not failed, failed
    assert written[0] > 3  # the writer ran (and folded) while the reads went on
    assert len(runs.finished(run)) == written[0]  # every part the writer wrote is read once it is done
