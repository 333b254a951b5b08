"""A user's query with a time limit and a row limit, stopped at once by SIGINT/SIGTERM.

DuckDB runs a statement in C++ with the GIL released, and Python runs a signal handler only between bytecodes
of the main thread: a query that never ends (``WITH RECURSIVE`` without an end, ``range(10^13)``, a cross join
of cross joins) on the main thread ignored Ctrl-C and SIGTERM until SIGKILL. So the query runs on a worker
thread while the main thread waits on it (a wait a signal breaks): at the deadline, or when a signal's
exception arrives, the main thread calls ``connection.interrupt()`` (DuckDB's documented way to cancel a
running query from another thread), waits briefly for the worker to let go, and raises. The row limit is a
``LIMIT`` around the query (one row more than asked, to tell a cut answer from a whole one), so DuckDB stops
producing rows instead of computing all of them first.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, TypeVar

from marketcast.errors import ConfigError

T = TypeVar("T")

#: How long the worker gets to let go after ``interrupt()`` before the command ends without it.
GRACE_S = 1.0


@dataclass(frozen=True)
class Bounds:
    """At most ``seconds`` of query time and ``rows`` rows of answer (``runs query``'s defaults and maxima are
    its options', :mod:`marketcast.commands.runs`)."""

    seconds: float
    rows: int


def limited(sql: str, rows: int) -> str:
    """``sql`` (one SELECT) cut to ``rows + 1`` rows; the newlines end a trailing ``--`` comment of ``sql``."""
    return f"SELECT * FROM (\n{sql}\n) AS bounded_query LIMIT {int(rows) + 1}"


def run_bounded(connection, call: Callable[[], T], seconds: float) -> T:
    """``call()`` (a query on ``connection``) on a worker thread; ``connection.interrupt()`` when ``seconds``
    pass (then one :class:`ConfigError` line, exit 2) or when a signal's exception reaches this thread (which
    is then raised: the command ends with 130 or 143)."""
    box: dict[str, object] = {}
    done = threading.Event()  # not Thread.join: a signal's exception inside join marks a running thread stopped

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the main thread, which raises it
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="marketcast-query", daemon=True).start()
    try:
        timed_out = not done.wait(seconds)  # a signal's exception breaks the wait and leaves through the finally
    finally:
        if not done.is_set():  # the deadline, or a signal
            connection.interrupt()
            done.wait(GRACE_S)
    if timed_out:
        raise ConfigError(f"query stopped at its time limit of {seconds:g} s; narrow it (a WHERE on run_id or "
                          "symbol, a LIMIT) or give it more time with --timeout SECONDS")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
