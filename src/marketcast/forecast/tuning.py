"""``tuning.json``: what a fine-tuned checkpoint was trained on, and the one leak check every command runs.

``marketcast finetune`` writes the file next to ``config.json`` + ``model.safetensors``. It records the cutoff
(``until``: the last day any training bar, targets included, may fall on) and a fingerprint of each tuned
symbol's bars up to that day. A backtest of such weights that scores a window whose decision bar is on or before
``until`` on a tuned symbol would grade the model on bars it was trained on (a look-ahead leak), so
:func:`guard_windows` refuses it with one line (exit 2) unless ``--allow-in-sample`` is given, and then the window
is labelled "in sample". Other symbols are "out of sample, other symbol". The check lives here, below every
command, and every command that loads weights asks it through :func:`guard_weights` with the bars it will score
or decide on: backtest, sweep, ``models compare``, ``forecast`` (the fan's last bar, or ``--calibration``'s
windows), ``finetune --evaluate``, ``trade replay`` (each cycle's decision bar) and ``trade run`` (the newest bar).
tests/finetune/test_every_weights_command.py walks every command with a ``--weights`` option and fails on one
that does not refuse (or label) an in-sample run.

A bars file edited after tuning (its bars up to ``until`` hash differently) makes the cutoff meaningless for that
symbol: the user is told with one warning line. Bars appended after ``until`` do not change the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from marketcast.errors import ConfigError, DataWarning, ModelLoadError

FILE_NAME = "tuning.json"
FORMAT = 1
IN_SAMPLE = "in sample"
OUT_OF_SAMPLE = "out of sample"
OTHER_SYMBOL = "out of sample, other symbol"
_COLUMNS = ("open", "high", "low", "close", "volume")


def bars_used(frame: pd.DataFrame, until: date) -> pd.DataFrame:
    """The rows of ``frame`` whose (UTC) day is on or before ``until``."""
    days = np.asarray(frame.index.date)
    return frame.iloc[: int(np.searchsorted(days, until, side="right"))]


def fingerprint(frame: pd.DataFrame, until: date) -> str:
    """sha256 of the bars up to ``until``: their timestamps (int64 ns) and OHLC(V) values (float64 bytes)."""
    used = bars_used(frame, until)
    digest = hashlib.sha256()
    digest.update(np.asarray(used.index.asi8, dtype="<i8").tobytes())
    for column in _COLUMNS:
        if column in used.columns:
            digest.update(column.encode())
            digest.update(np.ascontiguousarray(used[column].to_numpy(dtype="<f8")).tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Tuning:
    """A parsed ``tuning.json``; ``symbols`` maps each tuned symbol to its record (``fingerprint`` at least)."""

    path: Path
    until: date
    symbols: dict
    base: str = ""
    raw: dict = field(default_factory=dict, compare=False)

    def label(self, symbol: str) -> str:
        return IN_SAMPLE if symbol.upper() in self.symbols else OTHER_SYMBOL

    def changed(self, symbol: str, frame: pd.DataFrame) -> bool:
        """Whether ``symbol``'s bars up to ``until`` differ from the ones tuned on (False for other symbols)."""
        record = self.symbols.get(symbol.upper())
        return record is not None and record.get("fingerprint") != fingerprint(frame, self.until)


def read_tuning(weights: str | Path | None) -> Tuning | None:
    """The ``tuning.json`` of a local weights folder, or None (no such file, the hub, ``auto``, ``random``)."""
    if weights is None or str(weights) in ("auto", "random"):
        return None
    path = Path(weights).expanduser() / FILE_NAME
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        until = date.fromisoformat(raw["until"])
        symbols = {str(k).upper(): dict(v) for k, v in raw["symbols"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelLoadError(f"{path}: not a readable tuning record ({type(exc).__name__}: {exc}); run "
                             "`marketcast finetune` again or remove the file") from None
    return Tuning(path, until, symbols, str(raw.get("base", "")), raw)


Runs = Iterable[tuple[str, "pd.DataFrame | None", Sequence]]
WINDOW = "window {k} (decision bar {bar})"


def guard_weights(weights: str | Path | None, runs: Callable[[], Runs], allow_in_sample: bool = False,
                  fix: str | None = None, what: str = WINDOW) -> Tuning | None:
    """The one tuned-weights check: the ``tuning.json`` of ``weights`` (None without one) after
    :func:`guard_windows` passed on ``runs()``, called only when there is a record (the decision bars of an
    untuned run are never computed for it). Every command that loads weights calls this before the model loads."""
    tuning = read_tuning(weights)
    if tuning is not None:
        guard_windows(tuning, runs(), allow_in_sample, fix, what)
    return tuning


def guard_windows(tuning: Tuning | None, runs: Runs, allow_in_sample: bool = False, fix: str | None = None,
                  what: str = WINDOW) -> dict[str, str]:
    """Refuse scoring tuned weights on the bars they were tuned on; returns each symbol's label.

    ``runs``: ``(symbol, bars frame as read from its file, decision times of its windows in order)``. A window
    whose decision bar falls on or before ``until`` on a tuned symbol raises one :class:`ConfigError` line naming
    the first such window, unless ``allow_in_sample`` (then the symbol is labelled "in sample"). A tuned symbol
    whose bars changed since tuning gets one warning line (a frame of None: not checked, for a live feed that
    holds only its latest bars). Without a tuning record everything passes unlabelled. ``fix``: the line's
    advice, ``{start}`` standing for the first day after ``until`` (default: the backtest's ``--start`` /
    ``--allow-in-sample``); ``what``: how the line names the first in-sample decision, ``{k}`` its number and
    ``{bar}`` its day (a replay's cycles, a fan's last bar).
    """
    if tuning is None:
        return {}
    labels: dict[str, str] = {}
    for symbol, frame, decisions in runs:
        symbol = symbol.upper()
        if symbol not in tuning.symbols:
            labels[symbol] = OTHER_SYMBOL
            continue
        if frame is not None and tuning.changed(symbol, frame):
            warnings.warn(DataWarning(
                f"{symbol}: its bars up to {tuning.until} differ from the ones the weights in {tuning.path.parent} "
                "were tuned on (fingerprint changed since tuning); the in/out-of-sample split by --until no longer "
                "holds for them"), stacklevel=2)
        times = pd.DatetimeIndex(decisions)
        days = np.asarray(times.date)
        inside = np.flatnonzero(days <= tuning.until)
        if inside.size == 0:
            labels[symbol] = OUT_OF_SAMPLE
            continue
        if not allow_in_sample:
            k = int(inside[0])
            start = date.fromordinal(tuning.until.toordinal() + 1)
            advice = (fix or "test after it (--start {start}) or pass --allow-in-sample to see in-sample "
                      "results").format(start=start)
            where = what.format(k=k + 1, bar=f"{times[k]:%Y-%m-%d}")
            raise ConfigError(f"{symbol}: {where} is on or before {tuning.until}, the last day the weights in "
                              f"{tuning.path.parent} were tuned on; {advice}")
        first, last = times[inside[0]], times[inside[-1]]
        warnings.warn(f"{symbol}: {inside.size} of {len(times)} windows (decision bars {first:%Y-%m-%d} to "
                      f"{last:%Y-%m-%d}) are in sample: the weights in {tuning.path.parent} were tuned on them; "
                      "their scores flatter the model", stacklevel=2)
        labels[symbol] = IN_SAMPLE
    return labels


def sample_meta(tuning: Tuning | None, symbol: str, decisions: Sequence) -> dict:
    """What a report says about one symbol's windows: ``sample`` (its label), ``in_sample_windows`` and
    ``tuned_until``; {} for untuned weights. Reports read these from ``forecast_meta`` (see :func:`sample_text`)."""
    if tuning is None:
        return {}
    days = np.asarray(pd.DatetimeIndex(decisions).date)
    inside = int(np.count_nonzero(days <= tuning.until)) if symbol.upper() in tuning.symbols else 0
    label = tuning.label(symbol) if inside or symbol.upper() not in tuning.symbols else OUT_OF_SAMPLE
    return {"sample": label, "in_sample_windows": inside, "tuned_until": tuning.until.isoformat()}


def sample_text(meta: dict, windows: int) -> str:
    """One line for every report: ``in sample: 5 of 12 windows ...``; '' for untuned weights."""
    label = meta.get("sample")
    if not label:
        return ""
    until = meta.get("tuned_until")
    if label == IN_SAMPLE:
        return (f"{IN_SAMPLE}: {meta.get('in_sample_windows', 0)} of {windows} windows have a decision bar on or "
                f"before {until}, the last day the weights were tuned on; their scores flatter the model")
    if label == OTHER_SYMBOL:
        return f"{OTHER_SYMBOL}: the weights were tuned (up to {until}) on other symbols only"
    return f"{OUT_OF_SAMPLE}: every window's decision bar is after {until}, the last day the weights were tuned on"


def record_text(record: dict) -> str:
    """The text of ``tuning.json`` for ``record`` (the caller writes it atomically with the weights)."""
    if "until" not in record or "symbols" not in record:
        raise ValueError("a tuning record needs until and symbols")
    return json.dumps({"format": FORMAT, **record}, indent=2, sort_keys=False) + "\n"
