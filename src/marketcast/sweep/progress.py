"""The sweep's progress bar: cells done, failing and remaining, on interactive terminals only."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from marketcast.console import err_console


@contextmanager
def cell_progress(total: int, done: int, failed: int, title: str) -> Iterator[Callable[[str], None]]:
    """Yields ``advance(status)`` (``"ok"`` or ``"error"``), called as each cell finishes. Cells finished
    before a resume start the bar. Nothing is drawn when stderr is not a terminal."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("[green]{task.fields[ok]} ok[/] · [red]{task.fields[failed]} failing[/] · "
                              "{task.fields[left]} remaining"),
                   TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=True,
                   disable=not err_console.is_terminal)
    counts = {"ok": done, "error": failed}
    with bar:
        task = bar.add_task(title, total=total, completed=done + failed, ok=done, failed=failed,
                            left=total - done - failed)

        def advance(status: str) -> None:
            counts["ok" if status == "ok" else "error"] += 1
            finished = counts["ok"] + counts["error"]
            bar.update(task, completed=finished, ok=counts["ok"], failed=counts["error"], left=total - finished)

        yield advance
