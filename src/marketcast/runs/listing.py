"""``runs list``: one row per run, and each run's status as it truly stands. It imports neither pandas nor the
backtest (a listing of 1,000 runs answers in well under a second), so it stands apart from
:mod:`marketcast.runs.overview`, whose views need both.

A run's ``run.json`` says ``running`` from its first cell to its end; a sweep stopped without its cleanup
(SIGKILL, a power cut) leaves it so. The lock a writer holds is released by the OS when its process dies, so
a ``running`` run whose lock is free reads as ``interrupted`` (:func:`run_status`), as one stopped by a
signal does, and ``sweep SPEC --resume`` finishes it.
"""

from __future__ import annotations

from marketcast.runs.read import RUN_COUNTS_SQL
from marketcast.runs.store import RunStore

COLUMNS = ("run_id", "kind", "status", "created_at", "ok", "failed", "planned", "symbols", "models", "code_version",
           "spec_hash")


def run_status(info: dict, recorded: int, writing: bool) -> str:
    """The run's ``status`` from its ``run.json`` (``running`` while no process holds its lock, ``writing``
    False: interrupted); for a run written before runs carried one: planned with no cell recorded, done with
    every planned cell recorded, else partial."""
    status = info.get("status")
    if status == "running" and not writing:
        return "interrupted"
    if status:
        return status
    total = info.get("cells_total")
    if recorded == 0:
        return "planned"
    return "done" if total is None or recorded >= total else "partial"


def resume_hint(info: dict, status: str) -> str | None:
    """The command that finishes an interrupted sweep; None for any other run."""
    if status != "interrupted" or info.get("kind") != "sweep":
        return None
    return f"marketcast sweep {info.get('spec_path') or 'SPEC'} --resume --run-id {info['run_id']}"


def list_rows(store: RunStore) -> list[dict]:
    """One dict per run (:data:`COLUMNS`), oldest first: id, kind, status, start, cells ok / failed / planned,
    symbols, models, code version. A planned run (a ``run.json``, no part yet) is a row with no cells. The
    counts come from each run's ``summary.json`` while it is valid (written when the run is recorded or
    compacted), else from its parts."""
    infos = store.infos()
    summed = store.summaries(list(infos))  # counted when recorded or compacted, still valid
    rest = [run for run in infos if run not in summed]
    counted = {row["run_id"]: row for row in store.reader.records(RUN_COUNTS_SQL, run_ids=rest)} if rest else {}
    rows = []
    for run, info in infos.items():
        got = summed.get(run) or counted.get(run)
        ok, failed = (int(got["ok"]), int(got["failed"])) if got is not None else (0, 0)
        status = run_status(info, ok + failed, info.get("status") == "running" and store.reader.writing(run))
        rows.append({"run_id": run, "kind": info.get("kind"), "status": status, "created_at": info.get("created_at"),
                     "ok": ok, "failed": failed, "planned": info.get("cells_total"),
                     "symbols": int(got["symbols"]) if got is not None else 0,
                     "models": (got["models"] or "") if got is not None else "",
                     "code_version": info.get("code_version"), "spec_hash": info.get("spec_hash")})
    return rows
