"""The loop that keeps running: a look at the market every ``interval_s``, backoff on transient errors, a clean
stop on SIGTERM, and exit codes a supervisor (systemd, a shell loop, cron) can tell apart.

Each look (:meth:`Supervisor.tick`):

1. ``now`` is the venue's clock: Alpaca's (``GET /v2/clock``), else the system's or ``--clock-file``'s;
2. the bars are re-read, without any bar not complete at ``now`` on its calendar (a session still trading);
3. each clock (the symbols of one market: crypto 24/7, stocks on NYSE sessions, forex 24/5) steps on its own
   bars: its newest bar, if newer than the clock's last finished cycle, gets a cycle of that clock's symbols;
   the same bar gets a watch (reconcile: fills, take-profits, the daily loss limit); an older one means the
   data moved backwards: a WARNING and an alert, nothing traded on that clock;
4. a symbol whose last bar is older than the calendar says it should be raises a stale-data alert (once, until
   it is fresh again); the cycle itself gives it no new entry (:mod:`~marketcast.trade.risk.freshness`).

``--once`` is one cycle on the newest bar, as ``trade run --once`` always was.

How it ends (:class:`~marketcast.errors.ExitCode`): 0 after ``--once`` or a SIGTERM (the step in progress is
finished first: its orders journalled, its record written); 130 after Ctrl-C (likewise; a second Ctrl-C stops
at once); 2 bad input (a flag, the config file, a data file at start, a second loop); 3 a state folder that
cannot be used; 4 the broker refused the keys; 5 halted (a risk limit tripped: the loop's orders were cancelled;
or the journal and the broker disagree); 6 the broker stayed unavailable (``--once`` only: a continuous loop
waits 1, 2, 4 ... up to ``max_backoff_s`` seconds and tries again, however long it takes). Bars that cannot be
read after the first look (a file being replaced) are retried the same way.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Callable

from marketcast.errors import DataError, ExitCode, HaltedError, UnavailableError
from marketcast.trade.ops.alerts import Alerts, AlertThresholds, cycle_alerts
from marketcast.trade.interface import BrokerError
from marketcast.trade.loop.cycle import CycleReport, TradingLoop
from marketcast.trade.risk.freshness import stale_reason, went_back

log = logging.getLogger("marketcast.trade")

TRANSIENT = (BrokerError, UnavailableError, DataError)


class Supervisor:
    """Runs ``loop`` over ``venue`` until stopped; ``wait(seconds)`` sleeps and returns True once stopped (the
    default waits on the stop event, so SIGTERM ends a sleep at once)."""

    def __init__(self, loop: TradingLoop, venue, alerts: Alerts, thresholds: AlertThresholds, *,
                 interval_s: float = 60.0, once: bool = False, max_backoff_s: float = 300.0,
                 report: Callable[[CycleReport], None] | None = None,
                 wait: Callable[[float], bool] | None = None) -> None:
        self.loop, self.venue, self.alerts, self.thresholds = loop, venue, alerts, thresholds
        self.interval_s, self.once, self.max_backoff_s = interval_s, once, max_backoff_s
        self.report = report or (lambda r: None)
        self.stop = threading.Event()
        self.wait = wait or self.stop.wait
        self.stopped_by: int | None = None
        self.looked = False  # one look went through: data errors after it are transient

    # ----------------------------------------------------------------- signals
    def request_stop(self, signum: int, frame=None) -> None:
        if self.stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: now
        self.stopped_by = signum
        self.stop.set()
        log.warning("%s: stopping after the step in progress", signal.Signals(signum).name)

    @contextlib.contextmanager
    def signals(self):
        """SIGTERM and SIGINT ask for a stop after the current step (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {s: signal.signal(s, self.request_stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)

    # ----------------------------------------------------------------- the loop
    def run(self) -> int:
        failures = 0
        with self.signals():
            while not self.stop.is_set():
                try:
                    self.tick()
                except TRANSIENT as exc:
                    if self.once or not self.looked:
                        raise
                    failures += 1
                    delay = min(self.max_backoff_s, 2.0 ** (failures - 1))
                    log.warning("%s; retry %d in %g s", exc, failures, delay)
                    self.alerts.watch("unavailable", "broker", True, f"{exc}; retrying every {delay:g} s at most "
                                      f"{self.max_backoff_s:g} s apart", error=str(exc))
                    if self.wait(delay):
                        break
                    continue
                except HaltedError as exc:
                    self.alerts.emit("halt", "loop", str(exc), level="error", console=False)  # the error line
                    raise
                if failures:
                    log.warning("back after %d failed look(s)", failures)
                failures = 0
                self.alerts.watch("unavailable", "broker", False)
                if self.once or self.wait(self.interval_s):
                    break
        return ExitCode.INTERRUPTED if self.stopped_by == signal.SIGINT else ExitCode.OK

    def tick(self) -> None:
        """One look: every clock (market) with a newer bar of its own gets its cycle, the others a watch."""
        now = self.venue.now()
        self.venue.refresh(now)
        self.looked = True
        cfg = self.loop.config.freshness
        for symbol in self.loop.config.symbols:
            reason = stale_reason(self.venue.feed(symbol), now, cfg)
            self.alerts.watch("stale_data", symbol, reason is not None, f"{symbol}: {reason}")
        for clock, symbols in self.loop.clocks().items():
            self.step(clock, max(self.venue.feed(s).frame.index[-1] for s in symbols).isoformat(), now)

    def step(self, clock: str, latest: str, now) -> None:
        """``clock``'s newest bar ``latest``: a cycle if it is new, a watch if it was decided, nothing (an alert)
        if the data went back. A stale symbol of the clock gets no entry; it never holds back the others."""
        done = self.loop.journal.last_done_cycle(clock)
        back = None if self.once else went_back(latest, done)
        self.alerts.watch("data_backwards", clock, back is not None, back or "")
        if back:
            log.warning("%s: %s; nothing is traded until the data is past it again", clock, back)
            return
        if self.once or latest != done:
            report = self.loop.run_cycle(latest, now=now, clock=clock)
            self.report(report)
            if report.record:
                cycle_alerts(self.alerts, report.record, self.thresholds, self.loop.monitor.warm_memory_mb)
        else:
            self.loop.reconcile(latest, now=now, clock=clock)
