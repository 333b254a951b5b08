"""Running a sweep on Ray: an embedded local Ray by default, or an existing cluster (``--address`` or
``RAY_ADDRESS``); or, with ``--local``, the same steps in this process (:class:`Local`).

Per forecast job (:mod:`marketcast.sweep.plan`) a CPU task loads the symbol; a model actor forecasts up to
``symbols_per_call`` symbols of the same model and settings in one batch; CPU tasks settle the call's cells,
as many per task as make its overhead small (:mod:`marketcast.sweep.batching`: ``cells_per_task`` until the
first cells' seconds are in, then sized from them and the measured per-task overhead). A CPU model's first
job goes whole, as a probe: one CPU task loads, forecasts and settles it
(:func:`marketcast.sweep.tasks.run_whole`); if its cells' seconds show jobs too cheap to split into three tasks
each (:func:`marketcast.sweep.batching.whole_jobs`), the model's other jobs go whole too, several forecast calls a
task on every CPU of the cluster, and no actor is started; else they are split as above.
Model actors hold a loaded forecaster for the whole sweep (``num_cpus=1``, plus ``num_gpus=1`` when the
cells ask for CUDA), are replaced with a backoff when they die, and are released as soon as the last
forecast of their model is in, so their CPU or GPU goes back to the pool. The driver alone writes the
store: finished cells are flushed in parts (every ``flush_cells`` cells or ``flush_seconds``), so a killed
sweep loses at most the cells since the last part, and ``--resume`` recomputes exactly those. Every ``fold_parts``
parts the driver folds them into one compacted file (:func:`marketcast.runs.compact.fold`), so a running or
interrupted run is read from a few files however many cells it holds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

from marketcast.errors import ConfigError, UnavailableError
from marketcast.runs.compact import FOLD_PARTS
from marketcast.runs.rows import RunContext, error_row
from marketcast.runs.store import RunStore
from marketcast.signals import Terminated, shielded
from marketcast.sweep import batching, tasks
from marketcast.sweep.plan import FORECAST_FIELDS, Job

RAY_HINT = "marketcast sweep needs Ray, an optional extra: pip install 'marketcast[ray]'"
DEFAULTS = {"actors": None, "max_in_flight": None, "flush_cells": 64, "flush_seconds": 10.0, "cells_per_task": 8,
            "symbols_per_call": 8, "fold_parts": FOLD_PARTS,
            "whole_jobs": None}  # None: whole jobs when the probe finds them cheap; True/False: always/never
POISON_AFTER = 3  # a job whose forecast call killed this many model processes (actors or task workers) is poison
BACKOFF_SECONDS = 0.5


def import_ray():
    """Ray, imported with SIGTERM and SIGINT deferred (:func:`~marketcast.signals.shielded`) and raised once it is
    in: an import a signal cuts short leaves ``ray`` half-made with its atexit ``shutdown`` already registered,
    and that shutdown then fails at exit with a traceback (``module 'ray' has no attribute 'actor'``, a sweep
    stopped 0.8 s in, seen in test_sweep_interrupts) where the command ends with one line."""
    try:
        with shielded():
            import ray
    except ImportError:
        raise ConfigError(RAY_HINT) from None
    return ray


@contextmanager
def _signals_held(ray):
    """SIGTERM and SIGINT deferred (:func:`~marketcast.signals.shielded`) while the body runs, then raised:
    ``ray.init(address=...)`` stopped inside its connect leaves a half-made GCS client whose destructor never
    returns, a sweep hung for good (seen in test_sweep_interrupts). ``ray.init`` first installs a SIGTERM
    handler of its own that calls sys.exit wherever it lands; it is not installed meanwhile (Ray's
    ``_private.utils.set_sigterm_handler``; without it, Ray's handler stays and SystemExit is caught below)."""
    utils = getattr(getattr(ray, "_private", None), "utils", None)
    original = getattr(utils, "set_sigterm_handler", None)
    if original is not None:
        utils.set_sigterm_handler = lambda handler: None
    try:
        with shielded():
            yield
    finally:
        if original is not None:
            utils.set_sigterm_handler = original


def connect(ray, address: str | None, num_cpus: int | None) -> bool:
    """Join ``address`` (or ``RAY_ADDRESS``; a token-authenticated cluster reads Ray's own ``RAY_AUTH_MODE=token``
    and ``RAY_AUTH_TOKEN``/``RAY_AUTH_TOKEN_PATH``), else start a local Ray on this machine's cores (at least two
    logical CPUs: a GPU model's actor holds one, the tasks need another). Returns whether this call started
    Ray."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    ours = signal.getsignal(signal.SIGTERM)
    try:
        try:
            if address:
                with _signals_held(ray):
                    ray.init(address=address, **quiet)
            else:
                ray.init(num_cpus=num_cpus or max(2, os.cpu_count() or 1), include_dashboard=False, **quiet)
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            hint = ("; if the cluster uses token authentication, set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
                    "RAY_AUTH_TOKEN_PATH) as on its nodes" if address and not os.environ.get("RAY_AUTH_MODE") else "")
            raise UnavailableError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}{hint}") from None
        except SystemExit as exc:  # Ray's own SIGTERM handler (below) ran: the same stop as ours
            if exc.code != signal.SIGTERM:
                raise
            raise Terminated() from None
        finally:
            # ray.init installs a SIGTERM handler that calls sys.exit; ours goes back, so SIGTERM still ends the
            # sweep through its cleanup (run marked interrupted, exit 143)
            if ours is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, ours)
    except BaseException:  # stopped half-way: the caller never learns that Ray was started
        if ray.is_initialized():
            shutdown(ray)
        raise
    return True


def shutdown(ray) -> None:
    """``ray.shutdown()``, then our SIGTERM handler again: Ray's core resets SIGTERM to the default action on its
    way out, which would end the rest of the command by the signal, without its cleanup or exit code. (A SIGTERM
    during a local Ray's own shutdown, after that reset, still ends the process at once: the run is complete.)"""
    ours = signal.getsignal(signal.SIGTERM)
    try:
        ray.shutdown()
    finally:
        if ours is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, ours)


def actor_resources(device: str) -> dict:
    """What a model actor asks Ray for: a CPU to compute on (or to drive its GPU) and, for a CUDA model, a whole
    GPU. Ray then never places more actors on a node than it has cores for."""
    cuda = device.startswith("cuda")
    return {"num_cpus": 1, "num_gpus": 1 if cuda else 0}


def backoff(deaths: int) -> float:
    """Seconds to wait before replacing an actor that died for the ``deaths``-th time: 0.5 s, doubled each
    time, at most 30 s."""
    return min(BACKOFF_SECONDS * 2 ** (deaths - 1), 30.0)


@dataclass
class Call:
    """One forecast call: its jobs, the actor slot and generation that ran it, its forecast refs."""

    jobs: list[Job]
    slot: int
    generation: int
    forecasts: list
    chunks: int = 0  # settle tasks still in flight
    dead: bool = False
    whole: bool = False  # one task ran its jobs whole (no actor: slot -1)


@dataclass
class Pool:
    """The actors serving one model, used round-robin. An actor runs its calls in order, so its last
    forecast being in means all of its forecasts are (``last`` holds only that one reference, so earlier
    forecasts are freed once their cells are settled). A dead actor's slot is refilled by :meth:`revive`
    after a backoff that doubles with each death in the pool."""

    actors: list
    make: object = None
    options: dict = field(default_factory=dict)
    error: str | None = None
    turn: int = 0
    last: dict = field(default_factory=dict)
    generation: list = field(default_factory=list)
    revive_at: dict = field(default_factory=dict)
    deaths: int = 0

    def __post_init__(self) -> None:
        self.generation = [0] * len(self.actors)

    def ready(self) -> bool:
        """Whether a call can be submitted now (a live actor, or a dead one whose backoff is over)."""
        now = time.monotonic()
        return any(a is not None or self.revive_at.get(i, 0) <= now for i, a in enumerate(self.actors))

    def died(self, slot: int, generation: int) -> bool:
        """Mark the actor in ``slot`` dead (once per generation); True the first time."""
        if self.generation[slot] != generation or self.actors[slot] is None:
            return False
        self.deaths += 1
        self.actors[slot] = None
        self.revive_at[slot] = time.monotonic() + backoff(self.deaths)
        self.last.pop(slot, None)
        return True

    def submit(self, method: str, returns: int, *args) -> tuple[int, int, list]:
        """(slot, generation, ``returns`` object refs, one per result of the call: Ray's ``num_returns``)."""
        now = time.monotonic()
        while True:
            index = self.turn % len(self.actors)
            self.turn += 1
            if self.actors[index] is None and self.revive_at.get(index, 0) <= now:
                self.actors[index] = self.make.remote(self.options)
                self.generation[index] += 1
            if self.actors[index] is not None:
                break
        refs = getattr(self.actors[index], method).options(num_returns=returns).remote(*args)
        refs = [refs] if returns == 1 else list(refs)
        self.last[index] = refs[-1]
        return index, self.generation[index], refs


class Collector:
    """What both executors share: counting and recording finished cells, writing them to the store in parts."""

    def __init__(self, store: RunStore, ctx: RunContext, jobs: list[Job], options: dict, advance,
                 attempts: dict[str, int] | None = None) -> None:
        self.store, self.ctx, self.jobs, self.advance = store, ctx, jobs, advance
        self.options = {**DEFAULTS, **options}
        self.attempts = attempts or {}
        self.buffer: list[dict] = []
        self.buffered_cells = 0
        self.last_flush = time.monotonic()
        self.unfolded = 0  # parts written since the last fold
        self.counts = {"ok": 0, "error": 0, "poison": 0}
        self.cost = batching.CellCost()

    def _calls(self) -> list[list[Job]]:
        """Jobs of one model and the same forecast settings, ``symbols_per_call`` at a time, in plan order: the
        symbols an actor forecasts in one batch."""
        size, groups = self.options["symbols_per_call"], {}
        for job in self.jobs:
            groups.setdefault((job.pool_key, *(getattr(job.config, f) for f in FORECAST_FIELDS)), []).append(job)
        calls = [g[i:i + size] for g in groups.values() for i in range(0, len(g), size)]
        order = {id(job): n for n, job in enumerate(self.jobs)}
        return sorted(calls, key=lambda call: order[id(call[0])])

    def _record(self, per_cell: list[list[dict]]) -> None:
        for rows in per_cell:
            status = rows[0]["status"]
            attempt = self.attempts.get(rows[0]["cell_id"])
            if attempt:  # a retry: the first attempt's rows carry no attempt (read as 0)
                rows = [{**row, "attempt": attempt} for row in rows]
            self.counts[status if status in self.counts else "error"] += 1
            if status == "ok":
                self.cost.add(rows[0].get("seconds"))
            self.buffer += rows
            self.buffered_cells += 1
            self.advance(status)

    def _flush(self, force: bool = False) -> None:
        due = (self.buffered_cells >= self.options["flush_cells"]
               or time.monotonic() - self.last_flush >= self.options["flush_seconds"])
        if self.buffer and (force or due):
            self.store.write_rows(self.ctx.run_id, self.buffer)
            self.buffer, self.buffered_cells = [], 0
            self.last_flush = time.monotonic()
            self.unfolded += 1
            if self.unfolded >= self.options["fold_parts"]:  # the run never holds more than this many parts
                self.store.fold(self.ctx.run_id)
                self.unfolded = 0


class Local(Collector):
    """The same steps in this process, without Ray (``sweep --local``): the same task functions on the same
    batches, so the same rows bit for bit. A model that ends the process ends the sweep; ``--resume`` on Ray
    then marks it poison."""

    def run(self) -> dict:
        servers: dict[tuple, tasks.ForecastServer] = {}
        try:
            for call in self._calls():
                key = call[0].pool_key
                if key not in servers:
                    servers.clear()  # one loaded model at a time, as the actors are released per model
                    servers[key] = tasks.ForecastServer(call[0].first.model_options())
                for job, (one_loaded, one_forecast) in zip(call, tasks.forecast_call(servers[key], call)):
                    for chunk in job.chunks(self.options["cells_per_task"]):
                        self._record(tasks.settle(self.ctx, one_loaded, one_forecast, chunk, len(job.cells)))
                        self._flush()
        finally:
            self._flush(force=True)
        return self.counts


class Sweep(Collector):
    """Submits the jobs with a bounded number of settle tasks in flight and collects their rows. A forecast
    call whose actor died is sent again, each of its symbols alone, to a replacement actor (after a backoff);
    a job whose call killed :data:`POISON_AFTER` actors is recorded ``poison`` and not tried again. The same
    holds for a whole-job task whose worker died."""

    def __init__(self, ray, store: RunStore, ctx: RunContext, jobs: list[Job], options: dict, advance,
                 attempts: dict[str, int] | None = None) -> None:
        super().__init__(store, ctx, jobs, options, advance, attempts)
        self.ray = ray
        resources = ray.cluster_resources()
        self.cpus, self.gpus = int(resources.get("CPU", 1)), int(resources.get("GPU", 0))
        self.max_in_flight = self.options["max_in_flight"] or 2 * self.cpus + 2
        self.load = ray.remote(num_cpus=1)(tasks.load)
        self.settle = ray.remote(num_cpus=1)(tasks.settle_many)
        # no retries: a worker that died is counted towards poison, as an actor's death is
        self.run_whole = ray.remote(num_cpus=1, max_retries=0)(tasks.run_whole)
        self.server_class = tasks.ForecastServer
        self.modes: dict[tuple, str] = {}  # pool -> "whole" | "split", once decided
        self.probing: set[tuple] = set()  # pools whose probe (a first job, whole) is in flight
        self.probed: dict[tuple, float] = {}  # pool -> its probe's mean seconds a cell
        self.overhead = batching.task_overhead(ray)  # seconds a task costs besides its cells
        self.server = ray.remote(tasks.ForecastServer)
        self.pools: dict[tuple, Pool] = {}
        self.unsubmitted: dict[tuple, int] = {}
        self.cells_left: dict[tuple, int] = {}  # cells of jobs not yet submitted, per pool
        self.jobs_cells: dict[tuple, list[int]] = {}  # (cells, jobs) per pool: a job's mean cell count
        for job in jobs:
            self._count(job, 1)
            totals = self.jobs_cells.setdefault(job.pool_key, [0, 0])
            totals[0], totals[1] = totals[0] + len(job.cells), totals[1] + 1
        self.inflight: dict = {}  # settle ref -> (chunk, call)
        self.calls: list[Call] = []  # calls with settle tasks in flight
        self.again: list[list[Job]] = []  # calls to send again (their actor died)
        self.deaths: dict[int, int] = {}  # id(job) -> actors its calls killed
        self.blame: dict[int, str] = {}  # id(job) -> the last death's message

    def run(self) -> dict:
        try:
            pending = deque(self._calls())
            while pending:
                self._send(pending)
            while self.inflight or self.again:
                while self.again and not self._full(self.again[0]):
                    self._submit([self.again.pop(0)])
                self._harvest()
        finally:
            self._flush(force=True)  # finished cells are kept even when interrupted
            for pool in self.pools.values():
                self._release(pool)
        return self.counts

    # --- submitting -------------------------------------------------------------------------------------

    def _count(self, job: Job, sign: int) -> None:
        self.unsubmitted[job.pool_key] = self.unsubmitted.get(job.pool_key, 0) + sign
        self.cells_left[job.pool_key] = self.cells_left.get(job.pool_key, 0) + sign * len(job.cells)

    def _mode(self, job: Job) -> str:
        """How ``job``'s pool runs its jobs: "split" for a GPU model (its actor is what pays) or as the
        ``whole_jobs`` option says; else "probe" (send this call whole and measure it), "wait" (a probe is in
        flight), then "whole" or "split" as the probe's cells decide (:meth:`_decide`)."""
        key = job.pool_key
        if key not in self.modes:
            if actor_resources(job.first.device)["num_gpus"]:
                self.modes[key] = "split"
            elif self.options["whole_jobs"] is not None:
                self.modes[key] = "whole" if self.options["whole_jobs"] else "split"
            else:
                return "wait" if key in self.probing else "probe"
        return self.modes[key]

    def _decide(self, call: Call, per_cell: list[list[dict]]) -> None:
        """A probe is in: its pool goes whole when a job is cheap (:func:`~marketcast.sweep.batching.whole_jobs`:
        the mean seconds of its ok cells against the measured task overhead), else split. A probe without an
        ok cell decides nothing: the pool's next call probes again."""
        key = call.jobs[0].pool_key
        self.probing.discard(key)
        seconds = [rows[0]["seconds"] for rows in per_cell if rows[0]["status"] == "ok" and rows[0].get("seconds")]
        if seconds and key not in self.modes:
            cells, count = self.jobs_cells[key]
            self.probed[key] = sum(seconds) / len(seconds)
            cheap = batching.whole_jobs(self.overhead, self.probed[key], cells / count)
            self.modes[key] = "whole" if cheap else "split"

    def _full(self, jobs: list[Job]) -> bool:
        mode = self._mode(jobs[0])
        pool = self.pools.get(jobs[0].pool_key) if mode == "split" else None
        return (mode == "wait" or len(self.inflight) >= self.max_in_flight
                or (pool is not None and not pool.error and not pool.ready()))

    def _send(self, pending: deque) -> None:
        """Submit the next call of ``pending``; a pool that runs whole jobs takes the following calls of its
        model along, up to :func:`~marketcast.sweep.batching.whole_task_cells` cells in one task; a probe takes
        the call's first job alone (a forecast's paths do not depend on the batch around it)."""
        jobs = pending[0]
        key = jobs[0].pool_key
        while self._full(jobs) or (self._mode(jobs[0]) == "split" and key not in self.pools
                                   and self._crowded(jobs[0])):
            self._harvest()
        calls = [pending.popleft()]
        if self._mode(jobs[0]) == "probe" and len(jobs) > 1:  # a probe of one job: the other CPUs wait less
            calls = [jobs[:1]]
            pending.appendleft(jobs[1:])
        if self._mode(jobs[0]) == "whole":
            mean = self.cost.mean if self.cost.mean is not None else self.probed.get(key, 0.0)
            size = batching.whole_task_cells(self.overhead, mean, self.cells_left[key], self.cpus)
            cells = sum(len(job.cells) for job in jobs)
            while pending and pending[0][0].pool_key == key and cells < size:
                cells += sum(len(job.cells) for job in pending[0])
                calls.append(pending.popleft())
        self._submit(calls)

    def _crowded(self, job: Job) -> bool:
        """Whether a new CPU-model actor would leave no core for the load and settle tasks (they would wait
        forever for the actors to finish): then the older models' actors are waited for first."""
        if actor_resources(job.first.device)["num_gpus"]:
            return False
        held = sum(sum(a is not None for a in p.actors) for p in self.pools.values())
        wanted = self.options["actors"] or 1
        return held > 0 and held + wanted > self.cpus - 1

    def _pool(self, job: Job) -> Pool:
        key = job.pool_key
        if key not in self.pools:
            cell = job.first
            resources = actor_resources(cell.device)
            if resources["num_gpus"] > self.gpus:
                self.pools[key] = Pool([], error=f"device {cell.device!r} needs a GPU and the Ray cluster has none")
            else:
                count = self.options["actors"] or (self.gpus if resources["num_gpus"] else 1)
                count = min(count, max(1, self.cpus - 1)) if not resources["num_gpus"] else count
                make = self.server.options(**resources, max_restarts=0, max_task_retries=0)
                options = cell.model_options()
                self.pools[key] = Pool([make.remote(options) for _ in range(count)], make=make, options=options)
        return self.pools[key]

    def _submit(self, calls: list[list[Job]]) -> None:
        """One forecast call split into its load tasks, actor call and settle tasks; or, for a pool that runs
        whole jobs, ``calls`` in one task."""
        jobs = [job for call in calls for job in call]
        for job in jobs:
            self._count(job, -1)
        mode = self._mode(jobs[0])
        if mode in ("whole", "probe"):
            if mode == "probe":
                self.probing.add(jobs[0].pool_key)
            ref = self.run_whole.remote(self.ctx, self.server_class, jobs[0].first.model_options(), calls)
            call = Call(jobs, -1, 0, [ref], chunks=1, whole=True)
            self.calls.append(call)
            self.inflight[ref] = ([cell for job in jobs for cell in job.cells], call)
            return
        pool = self._pool(jobs[0])
        if pool.error:
            for job in jobs:
                self._record([[error_row(self.ctx, cell, pos, pool.error)] for pos, cell in job.cells])
            return
        loaded = [self.load.remote(job.symbol, job.path, job.first) for job in jobs]
        slot, generation, forecasted = pool.submit("forecast", len(jobs), jobs[0].config, *loaded)
        call = Call(jobs, slot, generation, forecasted)
        self.calls.append(call)
        default = self.options["cells_per_task"]
        pieces = [(chunk, len(job.cells), one_loaded, one_forecast)
                  for job, one_loaded, one_forecast in zip(jobs, loaded, forecasted) for chunk in job.chunks(default)]
        size = self.cost.cells_per_task(self.overhead, default)
        for group in batching.partition([piece[0] for piece in pieces], size):
            batch = [pieces[i] for i in group]
            inputs = [ref for _, _, one_loaded, one_forecast in batch for ref in (one_loaded, one_forecast)]
            ref = self.settle.remote(self.ctx, [(chunk, cells) for chunk, cells, _, _ in batch], *inputs)
            self.inflight[ref] = ([cell for chunk, _, _, _ in batch for cell in chunk], call)
            call.chunks += 1

    # --- collecting -------------------------------------------------------------------------------------

    def _harvest(self) -> None:
        if not self.inflight:  # waiting for a dead actor's backoff
            time.sleep(0.05)
        ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=1.0) if self.inflight else ([], [])
        for ref in ready:
            if ref not in self.inflight:  # dropped with its dead actor's call
                continue
            chunk, call = self.inflight.pop(ref)
            call.chunks -= 1
            try:
                per_cell = self.ray.get(ref)
            except self.ray.exceptions.RayActorError:  # the actor died under this call (or before it)
                self._actor_died(call)
                continue
            except self.ray.exceptions.RayError as exc:  # the load or the forecast failed: all its cells
                if call.whole and isinstance(exc, self.ray.exceptions.WorkerCrashedError):  # its process died
                    self.probing.discard(call.jobs[0].pool_key)
                    self._resend([call], blamed=True)
                    continue
                per_cell = [[error_row(self.ctx, cell, pos, tasks.describe(exc))] for pos, cell in chunk]
            if call.whole and call.jobs[0].pool_key in self.probing:
                self._decide(call, per_cell)
            self._record(per_cell)
        self.calls = [c for c in self.calls if c.chunks > 0 and not c.dead]
        for key, pool in self.pools.items():
            # a death may still be reported; a pool gone whole no longer needs its actors
            busy = any(c.jobs[0].pool_key == key and not c.whole for c in self.calls)
            done = self.unsubmitted[key] == 0 or self.modes.get(key) == "whole"
            if done and not busy and not pool.error and any(a is not None for a in pool.actors):
                last = list(pool.last.values())
                finished, _ = (self.ray.wait(last, num_returns=len(last), timeout=0, fetch_local=False) if last
                                else ([], []))
                if len(finished) == len(last):
                    self._release(pool)
        self._flush()

    def _actor_died(self, call: Call) -> None:
        """Every call the dead actor still held is sent again; the first of them (an actor runs its calls in
        order) is the one it died in, and each of its jobs is blamed once."""
        pool = self.pools[call.jobs[0].pool_key]
        if call.dead:
            return  # handled with the rest of that actor's calls
        if not pool.died(call.slot, call.generation):  # a call of that actor that did not look lost then
            lost, blamed = [call], False
        else:
            lost = [c for c in self.calls if c.slot == call.slot and c.generation == call.generation and not c.dead
                    and not c.whole and c.jobs[0].pool_key == call.jobs[0].pool_key]
            lost, blamed = [c for c in lost if self._lost(c)] or [call], True
        self._resend(sorted(lost, key=lambda c: self.calls.index(c) if c in self.calls else -1), blamed)

    def _resend(self, lost: list[Call], blamed: bool) -> None:
        """The jobs of ``lost`` calls sent again, each alone (so a symbol that kills its process is found); when
        ``blamed``, each job of the first (the call its process died in) counts a death, and a job with
        :data:`POISON_AFTER` deaths is recorded poison instead."""
        for n, one in enumerate(lost):
            self._drop(one)
            for job in one.jobs:
                if n == 0 and blamed:  # the call it died in
                    self.deaths[id(job)] = self.deaths.get(id(job), 0) + 1
                    self.blame[id(job)] = f"its model's process died {self.deaths[id(job)]} times forecasting it"
                if self.deaths.get(id(job), 0) >= POISON_AFTER:
                    message = f"poison: {self.blame[id(job)]}; not retried"
                    self._record([[{**error_row(self.ctx, cell, pos, message), "status": "poison"}]
                                  for pos, cell in job.cells])
                else:
                    self._count(job, 1)
                    self.again.append([job])

    def _lost(self, call: Call) -> bool:
        """Whether ``call``'s forecasts died with its actor (a call finished before the death is not)."""
        try:
            self.ray.get(call.forecasts, timeout=60)
        except self.ray.exceptions.GetTimeoutError:
            return True  # not delivered by an actor that is dead: lost
        except self.ray.exceptions.RayActorError:
            return True
        except self.ray.exceptions.RayError:
            return False
        return False

    def _drop(self, call: Call) -> None:
        call.dead = True
        for ref in [r for r, (_, c) in self.inflight.items() if c is call]:
            del self.inflight[ref]

    def _release(self, pool: Pool) -> None:
        for actor in pool.actors:
            if actor is not None:
                self.ray.kill(actor)
        pool.actors, pool.last = [None] * len(pool.actors), {}
        pool.revive_at = {i: float("inf") for i in range(len(pool.actors))}
