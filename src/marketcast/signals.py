"""SIGTERM and SIGINT as exceptions while a command runs, and :func:`shielded` to defer them over a commit.

SIGTERM becomes :class:`Terminated` and SIGINT ``KeyboardInterrupt`` where the process is, so every ``finally``
cleans up (temporary files removed, a sweep's run marked interrupted, Ray shut down); :func:`shielded` defers
them over a commit that must not stop half-way. This module sits below every room (the run store, the sweep
and atomic file writes use it) and knows nothing of commands; :mod:`marketcast.commands.runner` turns what
arrives into an exit code.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Terminated(BaseException):
    """SIGTERM raised where the process is, as Ctrl-C raises KeyboardInterrupt: a BaseException, so no
    ``except Exception`` swallows it and every ``finally`` on the way out still runs."""


class Received:
    """The handler's state: the last signal received (Ray may turn a handler's exception into a
    KeyboardInterrupt; this tells a SIGTERM apart), how deep in :func:`shielded` we are, what waits there."""

    last: int | None = None
    depth = 0
    pending: int | None = None
    finished: str | None = None  # what the command had committed when a signal came (see :func:`finished`)


def raise_for(signum: int) -> None:
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _on_signal(signum: int, frame) -> None:
    Received.last = signum
    if Received.depth:
        Received.pending = Received.pending or signum
        return
    raise_for(signum)


def install_signal_handlers() -> dict[int, object] | None:
    """SIGTERM and SIGINT raise from here on; returns the handlers replaced (None off the main thread, where
    Python cannot install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    Received.last, Received.depth, Received.pending, Received.finished = None, 0, None, None
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _on_signal)
    return previous


def restore_signal_handlers(previous: dict[int, object] | None) -> None:
    if previous:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def finished(what: str) -> None:
    """Say what the command has committed for good ("the run ... finished and was recorded"): a signal from
    here on still stops it (with 130/143), and the line it ends with says this instead of only "interrupted"."""
    Received.finished = what


@contextmanager
def shielded() -> Iterator[None]:
    """Defer SIGTERM/SIGINT until the block is done (the run-store record and the rename of the outputs: all
    of it or none), then raise it."""
    Received.depth += 1
    try:
        yield
    finally:
        Received.depth -= 1
        if not Received.depth and Received.pending is not None:
            signum, Received.pending = Received.pending, None
            raise_for(signum)


def handles(pid: int, signum: int = signal.SIGTERM) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (``SigCgt`` of /proc/PID/status, Linux):
    once a marketcast command has installed its handlers, a signal is the command's to handle; before that, Python
    is still starting. For the tests and benchmarks that signal a running command."""
    from pathlib import Path

    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signum - 1) & 1)
