"""How much history each window's forecast actually read, and which windows are too short to score.

The window ending at row t holds ``min(context, t + 1)`` real bars: :func:`marketcast.forecast.base.make_batch`
left-pads and masks the rest. With ``--windows all`` (or a period that starts early) the first windows read far
fewer bars than ``--context`` asks for; the reports say so ("context 3–361 of 512 bars") instead of stating
the context asked for.

Two numbers bound a window from below:

* the model's own minimum (``Forecaster.min_context``, 2 unless a model says more; the baseline's 3): a hard
  limit, below which the model cannot forecast at all;
* ``--min-context N`` (:attr:`BacktestConfig.min_context`, default: the model's minimum): the first scored window
  is the first that holds N real bars, so windows with fewer are skipped (``--windows all`` holds fewer windows;
  a ``--windows`` count that no longer fits is one line naming ``--min-context``). N below the model's minimum
  is refused.

The warning compares with ``--context``, not with the model's minimum: no scored window is ever below the
minimum (it is skipped), but every window below ``--context`` read less history than the report's settings
say. One warning per symbol counts them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from marketcast.errors import ConfigError

MODEL_MINIMUM = 2  # real bars any model needs: one move (a model that needs more says so in min_context)


def needed(asked: int | None, model_minimum: int = MODEL_MINIMUM) -> int:
    """Real bars the first scored window must hold: ``asked`` (``--min-context``) when given, else the model's
    own minimum; ``asked`` below the model's minimum is refused in one line."""
    floor = max(int(model_minimum), MODEL_MINIMUM)
    if asked is None:
        return floor
    if asked < floor:
        raise ConfigError(f"--min-context {asked} is below the model's own minimum of {floor} real bars a window; "
                          f"give {floor} or more, or leave it out")
    return int(asked)


def model_minimum(forecaster) -> int:
    """The forecaster's ``min_context`` (:data:`MODEL_MINIMUM` when it sets none)."""
    return int(getattr(forecaster, "min_context", MODEL_MINIMUM))


def seen(ends: np.ndarray, context: int) -> np.ndarray:
    """Real bars each window ending at row ``ends[k]`` holds: ``min(context, t + 1)`` (int64)."""
    return np.minimum(np.asarray(ends, dtype=np.int64) + 1, int(context))


def span(lo: int, hi: int, context: int) -> str:
    """``512`` when every window read the whole context, else ``3–361 of 512`` (``300 of 512`` when all read
    the same)."""
    if lo >= context:
        return f"{context}"
    return f"{lo} of {context}" if lo == hi else f"{lo}–{hi} of {context}"


def describe(seen_by: Sequence[np.ndarray | None], context: int) -> str:
    """:func:`span` over the windows of one or more symbols (a result stored before the count was kept: the
    context asked for)."""
    parts = [np.asarray(s) for s in seen_by if s is not None and len(s)]
    if not parts:
        return f"{context}"
    return span(int(min(p.min() for p in parts)), int(max(p.max() for p in parts)), context)


def context_text(results: Sequence) -> str:
    """:func:`describe` over every window of a run's results (one run, one ``--context``): a report's header."""
    return describe([getattr(r, "context_seen", None) for r in results], results[0].config.context)


def warning(seen_by: np.ndarray | None, context: int) -> str:
    """One line when some windows read fewer bars than ``context`` asks for; '' when none did."""
    if seen_by is None or not len(seen_by):
        return ""
    short = int((np.asarray(seen_by) < context).sum())
    if not short:
        return ""
    return (f"{short:,} of {len(seen_by):,} windows saw fewer than the {context} bars of context asked for "
            f"(context {describe([seen_by], context)} bars); --min-context N skips windows with fewer than N bars")


def summary(seen_by: np.ndarray | None, context: int) -> dict:
    """The JSON and run-store form: the range over the windows, the context asked for and how many windows fell
    short of it (None where a result stored before these were kept)."""
    if seen_by is None or not len(seen_by):
        return {"min": None, "max": None, "of": int(context), "short_windows": None}
    s = np.asarray(seen_by)
    return {"min": int(s.min()), "max": int(s.max()), "of": int(context), "short_windows": int((s < context).sum())}
