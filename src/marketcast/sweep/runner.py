"""``run_sweep``: a new run, or the resumption of one, from a spec to the store.

A new run writes its ``run.json`` first (kind, spec, cells planned, code version) with ``status: planned``,
which becomes ``running`` once cells are computed and ``done`` at the end; a run stopped by a signal or an
error is marked ``interrupted`` on the way out (the store's views read all four). ``--resume`` takes the
latest run of the same spec (or ``--run-id``), interrupted or not, skips every cell the store already holds
(finished or failed) and computes only the rest, under the run's lock, so two processes never write one run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from marketcast.console import err_console
from marketcast.errors import ConfigError, MarketcastError
from marketcast.failures import shielded
from marketcast.runs.record import new_run_id, now_iso
from marketcast.runs.rows import RunContext, code_version
from marketcast.runs.store import RunStore
from marketcast.sweep.execute import Sweep, connect, import_ray, shutdown
from marketcast.sweep.plan import plan_jobs
from marketcast.sweep.progress import cell_progress
from marketcast.sweep.spec import Spec


@dataclass(frozen=True)
class Outcome:
    run_id: str
    planned: int
    skipped: int  # finished before this call (resume)
    ok: int  # finished ok, over the whole run
    failed: int  # failed, over the whole run


def _prior(store: RunStore, run_id: str) -> tuple[set[str], int, int]:
    found = store.query("SELECT cell_id, status FROM cells", run_ids=[run_id])
    ok = int((found["status"] == "ok").sum())
    return set(found["cell_id"]), ok, len(found) - ok


def _to_resume(store: RunStore, spec_hash: str, run_id: str | None) -> str:
    if run_id is not None:
        found = store.info(store.resolve(run_id))
        if found.get("spec_hash") != spec_hash:
            raise ConfigError(f"run {found['run_id']} was made from another spec (hash {found.get('spec_hash')}, "
                              f"this one is {spec_hash}); resume it with its own spec or start a new run")
        return found["run_id"]
    same = [r for r in store.run_ids() if store.info(r).get("spec_hash") == spec_hash]
    if not same:
        raise ConfigError(f"no earlier run of this spec (hash {spec_hash}) in {store.root} to resume; "
                          "run without --resume")
    return same[-1]


def _mark(store: RunStore, run_id: str, status: str) -> None:
    """Set ``status`` in the run's ``run.json``, keeping the rest of it."""
    store.write_info(run_id, {**store.info(run_id), "status": status})


def _start(store: RunStore, spec: Spec, run_id: str | None) -> str:
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_id):
        raise ConfigError(f"--run-id {run_id!r}: use letters, digits, '.', '-' and '_'")
    if run_id is not None and (store.run_dir(run_id) / "run.json").exists():
        raise ConfigError(f"run {run_id} already exists in {store.root}; pass --resume to continue it")
    return run_id or new_run_id(spec.name)


def run_sweep(spec: Spec, store: RunStore, *, resume: bool = False, run_id: str | None = None,
              address: str | None = None, num_cpus: int | None = None) -> Outcome:
    cells = spec.cells()  # the whole spec is checked before anything starts
    ray = import_ray()
    code = code_version()
    run_id = _to_resume(store, spec.spec_hash, run_id) if resume else _start(store, spec, run_id)
    with store.lock(run_id):
        if resume:
            made_by = store.info(run_id).get("code_version")
            if made_by != code:
                err_console.print(f"[yellow]note:[/yellow] run {run_id} was started by code {made_by}; this is "
                                  f"{code} (each row records the version that wrote it)", highlight=False)
        else:
            store.write_info(run_id, {"kind": "sweep", "created_at": now_iso(), "spec_hash": spec.spec_hash,
                                      "code_version": code, "cells_total": len(cells),
                                      "spec_path": str(spec.path.resolve()), "spec": spec.path.read_text(),
                                      "status": "planned"})
        finished = False
        try:
            done, ok, failed = _prior(store, run_id)
            todo = [(i, c) for i, c in enumerate(cells) if c.cell_id not in done]
            if todo:
                ctx = RunContext(run_id=run_id, kind="sweep", spec_hash=spec.spec_hash, code_version=code)
                jobs = plan_jobs(todo, spec.symbol_paths())
                _mark(store, run_id, "running")
                started = connect(ray, address, num_cpus)
                try:
                    with cell_progress(len(cells), ok, failed, f"sweep {run_id}") as advance:
                        counts = Sweep(ray, store, ctx, jobs, spec.ray, advance).run()
                    _mark(store, run_id, "done")  # every cell is stored: done, whatever happens to Ray now
                    finished = True
                finally:
                    if started:
                        shutdown(ray)
                ok, failed = ok + counts["ok"], failed + counts["error"]
            else:
                _mark(store, run_id, "done")
        except BaseException:  # SIGTERM (Terminated), Ctrl-C, an error: the run says it did not finish
            if finished:
                raise
            with shielded():
                try:
                    _mark(store, run_id, "interrupted")
                except (MarketcastError, OSError):
                    pass  # the store cannot be written (a full disk): the first error is the one to show
            raise
    return Outcome(run_id=run_id, planned=len(cells), skipped=len(done), ok=ok, failed=failed)
