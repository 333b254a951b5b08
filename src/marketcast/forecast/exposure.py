"""What weights may have seen of the bars they are scored or traded on, asked once by every command that takes
``--weights``: backtest (and forecast --calibration, sweep, ``models compare`` through
:func:`marketcast.backtest.prepare.prepare`), the fan of ``forecast``, ``trade replay`` and ``trade run``.

Three facts, each from its own module: the tuning record (:mod:`marketcast.forecast.tuning`: in sample, out of
sample, the same bars under another name), the public checkpoint's card (:mod:`marketcast.forecast.cards`:
inside or possibly inside pretraining data) and weights of unknown provenance (neither). :func:`weigh` refuses
an in-sample decision (the tuned-weights guard), and with ``require_clean`` any labelled one, in one line;
:meth:`Exposure.meta` is what a surface stores, :func:`exposure_json` what its JSON shows and
:func:`exposure_lines` what its terminal and page say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd

from marketcast.errors import ConfigError
from marketcast.forecast.cards import Card, pretraining_meta, pretraining_text, provenance_text, weights_exposure
from marketcast.forecast.tuning import WINDOW, Runs, Tuning, guard_weights, read_tuning, sample_meta, sample_text

CLEAN_FIX = "test after it (--start {start})"
JSON_KEYS = ("sample", "in_sample_windows", "tuned_until",  # tuned weights (marketcast.forecast.tuning)
             "checkpoint", "pretraining", "pretraining_windows", "pretraining_until")  # a dated card


@dataclass(frozen=True)
class Exposure:
    """The tuning record, the public checkpoint's card and the provenance mark (:func:`weights_exposure`) of
    the weights a command loaded; all empty for random weights and weight-free models."""

    tuning: Tuning | None = None
    card: Card | None = None
    provenance: dict = field(default_factory=dict)

    def meta(self, symbol: str, decisions: Sequence, frame: pd.DataFrame | None = None) -> dict:
        """What a result stores of one symbol's decisions (``forecast_meta``): its sample label, its pretraining
        label and the provenance mark. ``frame``: its bars as read, so the same bars under another name count."""
        return {**sample_meta(self.tuning, symbol, decisions, frame), **pretraining_meta(self.card, decisions),
                **self.provenance}


def weigh(model: str | None, weights: str | Path | None, runs: Callable[[], Runs], *, allow_in_sample: bool = False,
          require_clean: bool = False, fix: str | None = None, what: str = WINDOW) -> Exposure:
    """The one check before a model loads: the tuned-weights guard (:func:`guard_weights`, ``runs`` as it takes
    them) and what the weights may have seen; ``require_clean`` (``--require-clean``) refuses an in-sample
    decision whatever ``allow_in_sample``, weights of unknown provenance and decisions inside the checkpoint's
    pretraining data (:func:`refuse_unclean`). ``fix``: each refusal's advice, ``{start}`` the first clean day."""
    exposure = _exposure(model, weights, guard_weights(weights, runs, allow_in_sample and not require_clean, fix, what))
    if require_clean and (exposure.provenance or exposure.card is not None):  # else nothing to refuse
        refuse_unclean(exposure, ((symbol, decisions) for symbol, _, decisions in runs()), fix)
    return exposure


def exposure_of(model: str | None, weights: str | Path | None) -> Exposure:
    """What ``weights`` may have seen, without the guard: for the workers that label the cells of a sweep whose
    windows :func:`weigh` checked before any ran."""
    return _exposure(model, weights, read_tuning(weights))


def _exposure(model: str | None, weights: str | Path | None, tuning: Tuning | None) -> Exposure:
    return Exposure(tuning, *weights_exposure(model, None if weights is None else str(weights), tuning))


def refuse_unclean(exposure: Exposure, runs: Iterable[tuple[str, Sequence]], fix: str | None = None) -> None:
    """``--require-clean``: one line for weights of unknown provenance, or the first symbol with a decision
    inside the checkpoint's pretraining data (in-sample ones were refused by the tuned-weights guard)."""
    if exposure.provenance:
        raise ConfigError(f"--require-clean: the weights {exposure.provenance['provenance_weights']} are of "
                          "unknown provenance (neither a known public checkpoint nor fine-tuned weights with a tuning "
                          "record); name their hub id in their config.json (_name_or_path) or leave out "
                          "--require-clean")
    for symbol, decisions in runs:
        meta = pretraining_meta(exposure.card, decisions)
        if meta.get("pretraining"):
            first = pd.DatetimeIndex(decisions)[0]
            after = pd.Timestamp(meta["pretraining_until"]) + pd.Timedelta(days=1)
            n = meta["pretraining_windows"]
            advice = (fix or CLEAN_FIX).format(start=f"{after:%Y-%m-%d}")
            raise ConfigError(
                f"--require-clean: {symbol}: {n} {'window' if n == 1 else 'windows'} (the first with decision bar "
                f"{first:%Y-%m-%d}) {'is' if n == 1 else 'are'} {meta['pretraining']} of {meta['checkpoint']} (on "
                f"or before {meta['pretraining_until']}); {advice} or leave out --require-clean")


def exposure_json(meta: dict) -> dict:
    """The keys every JSON document shows of a result's ``meta`` (:meth:`Exposure.meta`): ``sample``,
    ``in_sample_windows``, ``tuned_until`` for tuned weights; ``checkpoint``, ``pretraining``,
    ``pretraining_windows``, ``pretraining_until`` for a dated card; ``provenance: "unknown"``."""
    return {**{k: meta[k] for k in JSON_KEYS if k in meta},
            **({"provenance": "unknown"} if meta.get("provenance") == "unknown" else {})}


def exposure_lines(meta: dict, windows: int) -> list[str]:
    """The lines every terminal and page says of ``meta`` over ``windows`` decisions: the sample label, the
    provenance mark, the pretraining label (those that apply)."""
    return [text for text in (sample_text(meta, windows), provenance_text(meta), pretraining_text(meta, windows))
            if text]


Labelled = dict  # symbol -> (Exposure.meta of its decisions, how many decisions): a replay's or a run's labels


def exposure_field(labelled: Labelled) -> dict:
    """``{"exposure": {symbol: exposure_json(meta)}}`` of a run over several symbols (trade replay, trade run);
    {} when no symbol carries a label."""
    shown = {symbol: exposure_json(meta) for symbol, (meta, _) in labelled.items()}
    shown = {symbol: keys for symbol, keys in shown.items() if keys}
    return {"exposure": shown} if shown else {}


def exposure_text(labelled: Labelled) -> list[str]:
    """``SYMBOL: line`` for each of :func:`exposure_lines` of every symbol of ``labelled``."""
    return [f"{symbol}: {line}" for symbol, (meta, n) in labelled.items() for line in exposure_lines(meta, n)]


def standing_lines(exposure: Exposure) -> list[str]:
    """What a run over many cells (a sweep) says once per weights before its cells' own labels (``runs show``):
    the provenance mark, and the day up to which its checkpoint's windows are labelled."""
    from marketcast.forecast.cards import exposure as boundary

    found = boundary(exposure.card)
    dated = [] if found is None else [f"a window with a decision bar on or before {found[1]} is {found[0]} of "
                                      f"{exposure.card.repo}"]
    return [text for text in (provenance_text(exposure.provenance),) if text] + dated
