"""Shared rich consoles: tables on stdout; progress, errors and warnings on stderr.

Piped output (CI logs, ``| tee``) gets a wide fixed width instead of rich's 80-column default, so summary
tables are not folded into unreadable cells; progress there is one line per stage, so a log never looks hung.
"""

import math
import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console


def _width(stream) -> int | None:
    if "COLUMNS" in os.environ or stream.isatty():
        return None
    return 160


console = Console(width=_width(sys.stdout))
err_console = Console(stderr=True, width=_width(sys.stderr))


def eta(seconds: float) -> str:
    """A remaining time as a person reads it: ``eta 3 s``, ``eta 4 min``."""
    return f"eta {seconds:.0f} s" if seconds < 120 else f"eta {seconds / 60:.0f} min"


def step_lines(total: int, title: str) -> Callable[[str], None]:
    """``step(description)`` that prints ``[2/5] title: description (eta 3 s)`` on stderr as each step starts:
    the progress bar of a log or pipe. The estimate is the mean time of the steps done so far."""
    started, count = time.perf_counter(), 0

    def step(description: str) -> None:
        nonlocal count
        count += 1
        done = count - 1
        left = f" ({eta((time.perf_counter() - started) / done * (total - done))})" if done else ""
        err_console.print(f"[{count}/{total}] {title}: {description}{left}", markup=False, highlight=False,
                          soft_wrap=True)

    return step


@contextmanager
def progress_steps(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """A transient progress bar on stderr for ``total`` steps; yields ``step(description)``, called as each
    step starts. When stderr is not a terminal (CI logs, pipes) each step is one line instead
    (:func:`step_lines`)."""
    if not err_console.is_terminal:
        yield step_lines(total, title)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # a terminal's

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err_console, transient=True)
    with bar:
        task = bar.add_task(title, total=total)
        started = False

        def step(description: str) -> None:
            nonlocal started
            bar.update(task, description=f"{title}: {description}", advance=1 if started else 0)
            started = True

        yield step
        bar.update(task, completed=total)


def print_json(data) -> None:
    """``data`` as the one JSON document of a ``--json`` command, on stdout (see :func:`jsonable`). Piped, it
    is written as is: rich's highlighting adds nothing there and takes a minute for 100k rows."""
    if not console.is_terminal:  # the same text rich writes (indent 2, no ASCII escaping)
        import json

        sys.stdout.write(json.dumps(jsonable(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        return
    console.print_json(data=jsonable(data), allow_nan=False)


def jsonable(value):
    """``value`` in JSON types: NaN/inf, NaT and NA as null, numpy values as numbers or lists, times as ISO-8601,
    paths as text; anything else is a TypeError, never a repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):  # a numpy scalar or array
        return jsonable(value.tolist())
    if hasattr(value, "isoformat"):  # datetime, date, pandas Timestamp (NaT is not equal to itself)
        return value.isoformat() if value == value else None
    import pandas as pd

    if value is pd.NA:
        return None
    raise TypeError(f"{type(value).__name__} has no JSON form")
