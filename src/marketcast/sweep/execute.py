"""Running a sweep on Ray: an embedded local Ray by default, or an existing cluster (``--address`` or
``RAY_ADDRESS``).

Per forecast job (:mod:`marketcast.sweep.plan`) a CPU task loads the symbol; a model actor forecasts up to
``symbols_per_call`` symbols of the same model and settings in one batch; CPU tasks settle each job's cells. Model actors hold a loaded forecaster for the whole sweep (``num_gpus=1`` when
the cells ask for CUDA, none on the CPU) and are released as soon as the last forecast of their model is
in, so their CPU or GPU goes back to the pool. The driver alone writes the store: finished cells are
flushed in parts (every ``flush_cells`` cells or ``flush_seconds``), so a killed sweep loses at most the
cells since the last part, and ``--resume`` recomputes exactly those.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from marketcast.errors import ConfigError, UnavailableError
from marketcast.failures import Terminated
from marketcast.runs.rows import RunContext, error_row
from marketcast.runs.store import RunStore
from marketcast.sweep import tasks
from marketcast.sweep.plan import FORECAST_FIELDS, Job

RAY_HINT = "marketcast sweep needs Ray, an optional extra: pip install 'marketcast[ray]'"
DEFAULTS = {"actors": None, "max_in_flight": None, "flush_cells": 64, "flush_seconds": 10.0, "cells_per_task": 8,
            "symbols_per_call": 8}


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_HINT) from None
    return ray


def connect(ray, address: str | None, num_cpus: int | None) -> bool:
    """Join ``address`` (or ``RAY_ADDRESS``), else start a local Ray on this machine's cores (at least two
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
                ray.init(address=address, **quiet)
            else:
                ray.init(num_cpus=num_cpus or max(2, os.cpu_count() or 1), include_dashboard=False, **quiet)
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise UnavailableError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None
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
    """What a model actor asks Ray for: a whole GPU and a CPU to drive it for a CUDA model; nothing for a CPU
    model, which computes only while it forecasts and leaves the cores to the settle tasks in between."""
    cuda = device.startswith("cuda")
    return {"num_cpus": 1 if cuda else 0, "num_gpus": 1 if cuda else 0}


@dataclass
class Pool:
    """The actors serving one model, used round-robin. An actor runs its calls in order, so its last
    forecast being in means all of its forecasts are (``last`` holds only that one reference, so earlier
    forecasts are freed once their cells are settled)."""

    actors: list
    error: str | None = None
    turn: int = 0
    last: dict = field(default_factory=dict)

    def submit(self, method: str, returns: int, *args) -> list:
        """``returns`` object refs, one per result of the call (Ray's ``num_returns``)."""
        index = self.turn % len(self.actors)
        self.turn += 1
        refs = getattr(self.actors[index], method).options(num_returns=returns).remote(*args)
        refs = [refs] if returns == 1 else list(refs)
        self.last[index] = refs[-1]
        return refs


class Sweep:
    """Submits the jobs with a bounded number of settle tasks in flight and collects their rows."""

    def __init__(self, ray, store: RunStore, ctx: RunContext, jobs: list[Job], options: dict, advance) -> None:
        self.ray, self.store, self.ctx, self.jobs, self.advance = ray, store, ctx, jobs, advance
        self.options = {**DEFAULTS, **options}
        resources = ray.cluster_resources()
        self.cpus, self.gpus = int(resources.get("CPU", 1)), int(resources.get("GPU", 0))
        self.max_in_flight = self.options["max_in_flight"] or 2 * self.cpus + 2
        self.load = ray.remote(num_cpus=1)(tasks.load)
        self.settle = ray.remote(num_cpus=1)(tasks.settle)
        self.server = ray.remote(tasks.ForecastServer)
        self.pools: dict[tuple, Pool] = {}
        self.unsubmitted: dict[tuple, int] = {}
        for job in jobs:
            self.unsubmitted[job.model_key] = self.unsubmitted.get(job.model_key, 0) + 1
        self.inflight: dict = {}
        self.buffer: list[dict] = []
        self.buffered_cells = 0
        self.last_flush = time.monotonic()
        self.counts = {"ok": 0, "error": 0}

    def run(self) -> dict:
        try:
            for group in self._calls():
                while len(self.inflight) >= self.max_in_flight:
                    self._harvest()
                self._submit(group)
            while self.inflight:
                self._harvest()
        finally:
            self._flush(force=True)  # finished cells are kept even when interrupted
            for pool in self.pools.values():
                self._release(pool)
        return self.counts

    # --- submitting -------------------------------------------------------------------------------------

    def _pool(self, job: Job) -> Pool:
        key = job.model_key
        if key not in self.pools:
            cell = job.first
            resources = actor_resources(cell.device)
            if resources["num_gpus"] > self.gpus:
                self.pools[key] = Pool([], error=f"device {cell.device!r} needs a GPU and the Ray cluster has none")
            else:
                count = self.options["actors"] or (self.gpus if resources["num_gpus"] else 1)
                make = self.server.options(**resources, max_restarts=1, max_task_retries=1)
                self.pools[key] = Pool([make.remote(cell.model_options()) for _ in range(count)])
        return self.pools[key]

    def _calls(self) -> list[list[Job]]:
        """Jobs of one model and the same forecast settings, ``symbols_per_call`` at a time, in plan order: the
        symbols an actor forecasts in one batch."""
        size, groups = self.options["symbols_per_call"], {}
        for job in self.jobs:
            groups.setdefault((job.model_key, *(getattr(job.config, f) for f in FORECAST_FIELDS)), []).append(job)
        calls = [g[i:i + size] for g in groups.values() for i in range(0, len(g), size)]
        order = {id(job): n for n, job in enumerate(self.jobs)}
        return sorted(calls, key=lambda call: order[id(call[0])])

    def _submit(self, jobs: list[Job]) -> None:
        pool = self._pool(jobs[0])
        self.unsubmitted[jobs[0].model_key] -= len(jobs)
        if pool.error:
            for job in jobs:
                self._record([[error_row(self.ctx, cell, pos, pool.error)] for pos, cell in job.cells])
            return
        loaded = [self.load.remote(job.symbol, job.path, job.first) for job in jobs]
        forecasted = pool.submit("forecast", len(jobs), jobs[0].config, *loaded)
        for job, one_loaded, one_forecast in zip(jobs, loaded, forecasted):
            for chunk in job.chunks(self.options["cells_per_task"]):
                ref = self.settle.remote(self.ctx, one_loaded, one_forecast, chunk, len(job.cells))
                self.inflight[ref] = chunk

    # --- collecting -------------------------------------------------------------------------------------

    def _harvest(self) -> None:
        ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=1.0)
        for ref in ready:
            chunk = self.inflight.pop(ref)
            try:
                per_cell = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:  # the load or the forecast failed: all its cells
                per_cell = [[error_row(self.ctx, cell, pos, tasks.describe(exc))] for pos, cell in chunk]
            self._record(per_cell)
        for key, pool in self.pools.items():
            if self.unsubmitted[key] == 0 and pool.actors:
                last = list(pool.last.values())
                done, _ = self.ray.wait(last, num_returns=len(last), timeout=0)
                if len(done) == len(last):
                    self._release(pool)
        self._flush()

    def _record(self, per_cell: list[list[dict]]) -> None:
        for rows in per_cell:
            status = rows[0]["status"]
            self.counts["ok" if status == "ok" else "error"] += 1
            self.buffer += rows
            self.buffered_cells += 1
            self.advance(status)

    def _release(self, pool: Pool) -> None:
        for actor in pool.actors:
            self.ray.kill(actor)
        pool.actors, pool.last = [], {}

    def _flush(self, force: bool = False) -> None:
        due = (self.buffered_cells >= self.options["flush_cells"]
               or time.monotonic() - self.last_flush >= self.options["flush_seconds"])
        if self.buffer and (force or due):
            self.store.write_rows(self.ctx.run_id, self.buffer)
            self.buffer, self.buffered_cells = [], 0
            self.last_flush = time.monotonic()

