"""The tuning record: what a fine-tuned checkpoint was trained on, and the one leak check every command runs.

``marketcast finetune`` writes the record inside the weights, as one JSON string under :data:`METADATA_KEY` in
the safetensors header's ``__metadata__`` (a str -> str map), and as ``tuning.json`` next to ``config.json`` +
``model.safetensors``. :func:`read_tuning` reads the header first (``safe_open(...).metadata()`` reads only the
header), so the record travels with ``model.safetensors``: copied to another folder, downloaded from the hub (a
repo id is read from its Hugging Face cache copy), or with its ``tuning.json`` renamed, recased or made a folder.
The sidecar is read only where the weights carry no record: a checkpoint written before the record moved into the
weights, or a format without a header map (a ``.ckpt``). A sharded checkpoint (``model.safetensors.index.json``)
carries the record in every shard's header, so that any shard copied keeps it, and it is read from the first
shard in the index's order; Kronos's folder carries it in ``model/model.safetensors`` (and its tokenizer's).
It records the cutoff
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
METADATA_KEY = "marketcast.tuning"  # the record's key in the safetensors header's __metadata__
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
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
    """A parsed tuning record; ``symbols`` maps each tuned symbol to its record (``fingerprint`` at least).
    ``path``: where it was read (a safetensors file or ``tuning.json``); ``weights``: the ``--weights`` it belongs
    to, as every message names them."""

    path: Path
    until: date
    symbols: dict
    base: str = ""
    raw: dict = field(default_factory=dict, compare=False)
    weights: str = ""

    def tuned_as(self, symbol: str, frame: pd.DataFrame | None = None) -> str | None:
        """The tuned symbol whose bars these are: ``symbol`` by name, else (``frame`` given) the one whose recorded
        fingerprint equals that of ``frame``'s bars up to ``until``: the same bars under another name."""
        symbol = symbol.upper()
        if symbol in self.symbols or frame is None:
            return symbol if symbol in self.symbols else None
        mine = fingerprint(frame, self.until)
        return next((s for s, record in self.symbols.items() if record.get("fingerprint") == mine), None)

    def changed(self, symbol: str, frame: pd.DataFrame) -> bool:
        """Whether ``symbol``'s bars up to ``until`` differ from the ones tuned on (False for other symbols)."""
        record = self.symbols.get(symbol.upper())
        return record is not None and record.get("fingerprint") != fingerprint(frame, self.until)


def _folder(weights: str | Path) -> Path | None:
    """A local weights folder as is; a Hugging Face repo id (``owner/name``) as its cache snapshot folder, found
    without the network (None when it is not cached: the loader then downloads it or refuses)."""
    path = Path(weights).expanduser()
    if path.is_dir():
        return path
    repo = str(weights)
    if path.exists() or repo.count("/") != 1 or repo.startswith((".", "/", "~")):
        return None
    from huggingface_hub import try_to_load_from_cache

    for name in (WEIGHTS, INDEX):
        cached = try_to_load_from_cache(repo, name)
        if isinstance(cached, str):
            return Path(cached).parent
    return None


def _headers(folder: Path) -> list[Path]:
    """The safetensors files whose header may hold the record: ``model.safetensors``, else the first shard of
    ``model.safetensors.index.json``, in the folder or (Kronos) its ``model/`` subfolder."""
    found = []
    for where in (folder, folder / "model"):
        if (where / WEIGHTS).is_file():
            found.append(where / WEIGHTS)
        elif (where / INDEX).is_file():
            try:
                shards = sorted(set(json.loads((where / INDEX).read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # the loader refuses a bad index in its own words
            if shards and (where / shards[0]).is_file():
                found.append(where / shards[0])
    return found


def embedded(path: Path) -> dict | None:
    """The tuning record in the header of the safetensors file ``path`` (its raw dict), or None without one."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as handle:
            meta = handle.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for a truncated or corrupt header
        raise ModelLoadError(f"{path}: unreadable safetensors header ({type(exc).__name__}: "
                             f"{str(exc).strip()[:120]}); it is truncated or corrupt, download it again") from None
    if METADATA_KEY not in meta:
        return None
    try:
        return json.loads(meta[METADATA_KEY])
    except ValueError as exc:
        raise ModelLoadError(f"{path}: its {METADATA_KEY} metadata is not a readable tuning record ({exc}); run "
                             "`marketcast finetune` again") from None


def read_tuning(weights: str | Path | None) -> Tuning | None:
    """The tuning record of ``weights`` (a local folder, or a repo id in the Hugging Face cache): from the
    weights' own safetensors header first, else their ``tuning.json``; None without either (``auto``, ``random``,
    a public checkpoint)."""
    if weights is None or str(weights) in ("auto", "random"):
        return None
    folder = _folder(weights)
    if folder is None:
        return None
    for path in _headers(folder):
        raw = embedded(path)
        if raw is not None:
            return _parse(raw, path, str(weights))
    path = folder / FILE_NAME
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path}: not a readable tuning record ({type(exc).__name__}: {exc}); run "
                             "`marketcast finetune` again or remove the file") from None
    return _parse(raw, path, str(weights))


def _parse(raw: dict, path: Path, weights: str) -> Tuning:
    try:
        until = date.fromisoformat(raw["until"])
        symbols = {str(k).upper(): dict(v) for k, v in raw["symbols"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelLoadError(f"{path}: not a readable tuning record ({type(exc).__name__}: {exc}); run "
                             "`marketcast finetune` again or remove the file") from None
    return Tuning(path, until, symbols, str(raw.get("base", "")), raw, weights)


def record_metadata(record: dict) -> dict[str, str]:
    """The safetensors ``__metadata__`` that carries ``record`` (``safetensors.torch.save(state, metadata=...)``)."""
    return {METADATA_KEY: json.dumps(_full(record), sort_keys=False)}


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
        recorded = tuning.tuned_as(symbol, frame)  # by name, or the same bars under another name
        if recorded is None:
            labels[symbol] = OTHER_SYMBOL
            continue
        if recorded == symbol and frame is not None and tuning.changed(symbol, frame):
            warnings.warn(DataWarning(
                f"{symbol}: its bars up to {tuning.until} differ from the ones the weights in {tuning.weights} "
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
            alias = "" if recorded == symbol else f" (the bars the weights were tuned on as {recorded})"
            raise ConfigError(f"{symbol}{alias}: {where} is on or before {tuning.until}, the last day the weights in "
                              f"{tuning.weights} were tuned on; {advice}")
        first, last = times[inside[0]], times[inside[-1]]
        warnings.warn(f"{symbol}: {inside.size} of {len(times)} windows (decision bars {first:%Y-%m-%d} to "
                      f"{last:%Y-%m-%d}) are in sample: the weights in {tuning.weights} were tuned on them; "
                      "their scores flatter the model", stacklevel=2)
        labels[symbol] = IN_SAMPLE
    return labels


def sample_meta(tuning: Tuning | None, symbol: str, decisions: Sequence, frame: pd.DataFrame | None = None) -> dict:
    """What a report says about one symbol's windows: ``sample`` (its label), ``in_sample_windows`` and
    ``tuned_until``; {} for untuned weights. ``frame``: its bars as read, so that the same bars under another
    name count as tuned (:meth:`Tuning.tuned_as`). Reports read these from ``forecast_meta`` (see
    :func:`sample_text`)."""
    if tuning is None:
        return {}
    tuned = tuning.tuned_as(symbol, frame) is not None
    days = np.asarray(pd.DatetimeIndex(decisions).date)
    inside = int(np.count_nonzero(days <= tuning.until)) if tuned else 0
    label = IN_SAMPLE if inside else OUT_OF_SAMPLE if tuned else OTHER_SYMBOL
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


def _full(record: dict) -> dict:
    if "until" not in record or "symbols" not in record:
        raise ValueError("a tuning record needs until and symbols")
    return {"format": FORMAT, **record}


def record_text(record: dict) -> str:
    """The text of ``tuning.json`` for ``record`` (the caller writes it atomically with the weights)."""
    return json.dumps(_full(record), indent=2, sort_keys=False) + "\n"
