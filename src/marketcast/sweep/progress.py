"""The sweep's progress: a bar of cells done, failing and remaining on a terminal; a line per finished cell in a
log or pipe."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from marketcast.console import err_console, eta


@contextmanager
def cell_progress(total: int, done: int, failed: int, title: str) -> Iterator[Callable[[str], None]]:
    """Yields ``advance(status)`` (``"ok"`` or ``"error"``), called as each cell finishes. Cells finished
    before a resume start the bar. When stderr is not a terminal each cell is one line:
    ``[3/12] sweep R: ok (2 ok, 1 failing, eta 40 s)``."""
    if not err_console.is_terminal:
        yield _cell_lines(total, done, failed, title)
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("[green]{task.fields[ok]} ok[/] · [red]{task.fields[failed]} failing[/] · "
                              "{task.fields[left]} remaining"),
                   TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=True)
    counts = {"ok": done, "error": failed}
    with bar:
        task = bar.add_task(title, total=total, completed=done + failed, ok=done, failed=failed,
                            left=total - done - failed)

        def advance(status: str) -> None:
            counts["ok" if status == "ok" else "error"] += 1
            finished = counts["ok"] + counts["error"]
            bar.update(task, completed=finished, ok=counts["ok"], failed=counts["error"], left=total - finished)

        yield advance


def _cell_lines(total: int, done: int, failed: int, title: str) -> Callable[[str], None]:
    """``advance(status)`` printing a line per finished cell; the estimate is the mean time of this session's
    cells (those a resume found done took no time here)."""
    started, counts, before = time.perf_counter(), {"ok": done, "error": failed}, done + failed

    def advance(status: str) -> None:
        counts["ok" if status == "ok" else "error"] += 1
        finished = counts["ok"] + counts["error"]
        left = (time.perf_counter() - started) / (finished - before) * (total - finished)
        err_console.print(f"[{finished}/{total}] {title}: {status} ({counts['ok']} ok, {counts['error']} failing, "
                          f"{eta(left)})", markup=False, highlight=False, soft_wrap=True)

    return advance
