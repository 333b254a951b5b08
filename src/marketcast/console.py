"""Shared rich consoles: tables and progress on stdout, errors and warnings on stderr.

Piped output (CI logs, ``| tee``) gets a wide fixed width instead of rich's 80-column default, so summary
tables are not folded into unreadable cells.
"""

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def _width(stream) -> int | None:
    if "COLUMNS" in os.environ or stream.isatty():
        return None
    return 160


console = Console(width=_width(sys.stdout))
err_console = Console(stderr=True, width=_width(sys.stderr))


@contextmanager
def progress_steps(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """A transient progress bar on stderr for ``total`` steps; yields ``step(description)``, called as each
    step starts. Nothing is drawn when stderr is not a terminal (CI logs, pipes, tests stay clean)."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err_console, transient=True, disable=not err_console.is_terminal)
    with bar:
        task = bar.add_task(title, total=total)
        started = False

        def step(description: str) -> None:
            nonlocal started
            bar.update(task, description=f"{title}: {description}", advance=1 if started else 0)
            started = True

        yield step
        bar.update(task, completed=total)
