"""``run_sweep``: a new run, or the resumption of one, from a spec to the store.

Ray is joined (or started) first, so a refused connection leaves no run. A new run then writes its ``run.json``
(kind, spec, cells planned, code version) with ``status: planned``, which becomes ``running`` once cells are
computed and ``done`` at the end (the store's views read all four). A run stopped by a signal once its cells
started, or by an error once a cell is recorded, is marked ``interrupted`` on the way out; a new run that fails
before that (a full disk under ``run.json`` or its first part, bars that cannot be planned) is removed whole, no
run and no lock left (:func:`_kept`). One killed outright (SIGKILL) is read as ``interrupted`` because no
process holds its lock (:func:`marketcast.runs.listing.run_status`). ``--resume`` takes the latest run of the same
spec (or ``--run-id``), interrupted or not, skips every cell the store already holds
(finished or failed) and computes only the rest, under the run's lock, so two processes never write one run.
A finished run is compacted (after the lock is released, by :meth:`RunStore.compact`, which takes it again).
A resume also retries the failed cells, up to ``retry_failed`` more attempts each: a retry's rows carry
``attempt`` (1, 2, ...; none on the first attempt), the failed attempts' rows stay, and the latest attempt of
a cell is its result. ``poison`` cells (their forecast killed the model's actor 3 times) are not retried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from marketcast.console import err_console
from marketcast.errors import ConfigError, MarketcastError
from marketcast.runs.record import new_run_id, now_iso
from marketcast.runs.rows import RunContext, code_version
from marketcast.runs.store import RunStore
from marketcast.signals import Terminated, shielded
from marketcast.sweep.execute import Local, Sweep, connect, import_ray, shutdown
from marketcast.sweep.plan import plan_jobs
from marketcast.sweep.progress import cell_progress
from marketcast.sweep.spec import Spec


@dataclass(frozen=True)
class Outcome:
    run_id: str
    planned: int
    skipped: int  # finished before this call (resume)
    ok: int  # finished ok, over the whole run
    failed: int  # failed (error or poison), over the whole run
    retried: int = 0  # failed attempts tried again in this call
    poison: int = 0  # of ``failed``: cells that killed their model's actor 3 times


def latest(store: RunStore, run_id: str) -> dict[str, tuple[str, int]]:
    """cell_id -> (status, attempt) of the latest attempt of each recorded cell (attempt 0: the first)."""
    has_attempt = "attempt" in store.columns(run_ids=[run_id])
    attempt = "coalesce(attempt, 0)" if has_attempt else "0"
    found = store.query(f"SELECT cell_id, status, {attempt} AS attempt FROM cells", run_ids=[run_id])
    out: dict[str, tuple[str, int]] = {}
    for cell_id, status, n in zip(found["cell_id"], found["status"], found["attempt"]):
        if cell_id not in out or int(n) >= out[cell_id][1]:
            out[cell_id] = (status, int(n))
    return out


def _counts(found: dict[str, tuple[str, int]]) -> tuple[int, int, int]:
    statuses = [status for status, _ in found.values()]
    return statuses.count("ok"), len(statuses) - statuses.count("ok"), statuses.count("poison")


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


def _kept(store: RunStore, run_id: str, resume: bool, began: bool, exc: BaseException) -> bool:
    """Whether a run that did not finish stays in the store (marked interrupted): a resumed one, one with a cell
    recorded, or one whose cells a signal stopped (resumable, as the user left it). A new run that failed before
    its first cell, or whose first part met an error (a full disk), is removed: nothing of it could be resumed."""
    if resume or began and isinstance(exc, (KeyboardInterrupt, Terminated)):
        return True
    try:
        return bool(store.parts(run_id))
    except (MarketcastError, OSError):
        return False


def _compact(store: RunStore, run_id: str) -> None:
    """Merge the finished run's parts into a few files (``runs compact``), after the sweep let go of its lock: a
    run of 100k cells is read from at most 5 files, not 1,500 parts. Crash-safe (a kill leaves every cell
    readable, and ``--resume`` adds parts beside the compacted files); a store that cannot be written keeps
    its parts, with a note."""
    try:
        store.compact(run_id)
    except (MarketcastError, OSError) as exc:
        err_console.print(f"note: run {run_id} is recorded but not compacted ({exc}); 'marketcast runs compact "
                          f"{run_id}' merges its parts", markup=False, highlight=False, soft_wrap=True)


def _start(store: RunStore, spec: Spec, run_id: str | None) -> str:
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_id):
        raise ConfigError(f"--run-id {run_id!r}: use letters, digits, '.', '-' and '_'")
    if run_id is not None and (store.run_dir(run_id) / "run.json").exists():
        raise ConfigError(f"run {run_id} already exists in {store.root}; pass --resume to continue it")
    return run_id or new_run_id(spec.name)


def run_sweep(spec: Spec, store: RunStore, *, resume: bool = False, run_id: str | None = None,
              address: str | None = None, num_cpus: int | None = None, retry_failed: int = 1,
              local: bool = False) -> Outcome:
    """Run (or, with ``resume``, finish) the sweep of ``spec`` into ``store``; ``local`` computes in this
    process without Ray."""
    cells = spec.cells()  # the whole spec is checked before anything starts
    if retry_failed < 0:
        raise ConfigError(f"--retry-failed must be >= 0, got {retry_failed}")
    ray = None if local else import_ray()
    code = code_version()
    run_id = _to_resume(store, spec.spec_hash, run_id) if resume else _start(store, spec, run_id)
    retried = 0
    # Ray is joined (or started) before the run is made: a refused connection leaves no run behind
    started = False if local else connect(ray, address, num_cpus)
    try:
        with store.lock(run_id):
            finished = began = False  # began: the first cell is under way (the run is marked running)
            try:
                if resume:
                    made_by = store.info(run_id).get("code_version")
                    if made_by != code:
                        err_console.print(f"[yellow]note:[/yellow] run {run_id} was started by code {made_by}; "
                                          f"this is {code} (each row records the version that wrote it)",
                                          highlight=False)
                else:
                    store.write_info(run_id, {"kind": "sweep", "created_at": now_iso(), "spec_hash": spec.spec_hash,
                                              "code_version": code, "cells_total": len(cells),
                                              "spec_path": str(spec.path.resolve()), "spec": spec.path.read_text(),
                                              "status": "planned"})
                found = latest(store, run_id)
                left = retry_failed if resume else 0
                todo = [(i, c) for i, c in enumerate(cells) if c.cell_id not in found or (
                    left and found[c.cell_id][0] == "error")]
                tries = {c.cell_id: 0 for _, c in todo}  # retries this call
                while todo:
                    ctx = RunContext(run_id=run_id, kind="sweep", spec_hash=spec.spec_hash, code_version=code)
                    attempts = {c.cell_id: found[c.cell_id][1] + 1 for _, c in todo if c.cell_id in found}
                    retried += len(attempts)
                    for cell_id in attempts:
                        tries[cell_id] += 1
                    jobs = plan_jobs(todo, spec.symbol_paths())
                    with shielded():  # marked running and begun together: a signal comes after both or before
                        _mark(store, run_id, "running")
                        began = True
                    ok, failed, _ = _counts({k: v for k, v in found.items() if k not in attempts})
                    with cell_progress(len(cells), ok, failed, f"sweep {run_id}") as advance:
                        if local:
                            Local(store, ctx, jobs, spec.ray, advance, attempts).run()
                        else:
                            Sweep(ray, store, ctx, jobs, spec.ray, advance, attempts).run()
                    found = latest(store, run_id)
                    todo = [(i, c) for i, c in todo if found[c.cell_id][0] == "error" and tries[c.cell_id] < left]
                _mark(store, run_id, "done")  # every cell is stored: done, whatever happens to Ray now
                finished = True
            except BaseException as exc:  # SIGTERM (Terminated), Ctrl-C, an error: the run says it did not finish
                if finished:
                    raise
                with shielded():
                    if not _kept(store, run_id, resume, began, exc):  # no run, no lock, no part
                        store.discard(run_id)
                    else:
                        try:
                            _mark(store, run_id, "interrupted")
                        except (MarketcastError, OSError):
                            pass  # the store cannot be written (a full disk): the first error is the one to show
                raise
    finally:
        if started:
            shutdown(ray)
    _compact(store, run_id)
    ok, failed, poison = _counts(found)
    return Outcome(run_id=run_id, planned=len(cells), skipped=len(found) - len(tries) if resume else 0, ok=ok,
                   failed=failed, retried=retried, poison=poison)

