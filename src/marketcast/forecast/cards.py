"""Each public checkpoint's card: what its model card or paper says of its pretraining data, with the source.

A pretrained checkpoint may have seen the windows it is scored on (parametric look-ahead): Kronos is pretrained
on K-lines of 45 exchanges (Shi et al. 2025, arXiv:2508.02739), so a backtest of it on market bars from before its
release may grade it on bars it learned. Every fact below is a :class:`Fact`: a value and where it was read, or
"unknown" and what was checked (no date is guessed). Dates are ISO days or months (``2025-08``: that month).

Labels (:func:`pretraining_meta`): a window whose decision bar is on or before a stated ``cutoff`` is "inside
pretraining data"; where the cutoff is unknown but the corpora include market prices, a window before the end of
the release month is "possibly inside pretraining data". Random and weight-free models have no card, so no label.

A loaded checkpoint is known (:func:`identify`) by its hub id: given as ``--weights``, the model's default
(``auto``), or named by a local folder's ``config.json`` (``_name_or_path``, as transformers writes it, or
``marketcast_checkpoint``, which ``models download --to DIR`` writes). This guards against accidents, not
against a user set on fooling it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from marketcast.forecast.hub import NAME_KEY, catalogue

UNKNOWN = "unknown"
INSIDE = "inside pretraining data"
POSSIBLY = "possibly inside pretraining data"
CONFIG_KEYS = (NAME_KEY, "_name_or_path")  # NAME_KEY: what `models download --to DIR` writes


@dataclass(frozen=True)
class Fact:
    """One statement of a card: ``value`` ("unknown" where the source is silent) and ``source`` (a URL, or for
    "unknown" what was checked)."""

    value: str
    source: str


@dataclass(frozen=True)
class Card:
    repo: str
    corpora: Fact
    market: Fact  # do the corpora include market prices: "yes", "no" or "unknown"
    cutoff: Fact  # the last day of pretraining data, ISO, or "unknown"
    release: Fact  # ISO day or month, or "unknown"


TOTO_CARD = "https://huggingface.co/Datadog/Toto-Open-Base-1.0"
TOTO_PAPER = "https://arxiv.org/abs/2505.14766"
KRONOS_PAPER = "https://arxiv.org/abs/2508.02739"
TOTO2_BLOG = "https://www.datadoghq.com/blog/ai/toto-2/"
CHRONOS2_PAPER = "https://arxiv.org/abs/2510.15821"
TIREX_CARD = "https://huggingface.co/NX-AI/TiRex"
TIREX_PAPER = "https://arxiv.org/abs/2505.23719"
_ARXIV_MONTH = " (arXiv identifiers give the month of the first version)"


def _kronos(repo: str) -> Card:
    """Every Kronos model and tokenizer: one paper describes their pretraining."""
    return Card(
        repo,
        Fact("over 12 billion K-line (OHLCV) records from 45 global exchanges", KRONOS_PAPER),
        Fact("yes", KRONOS_PAPER),
        Fact(UNKNOWN, f"the abstract of {KRONOS_PAPER} and the README of https://github.com/shiyu-coder/Kronos "
                      "state no end date of the data"),
        Fact("2025-08", KRONOS_PAPER + _ARXIV_MONTH))


CARDS: dict[str, Card] = {card.repo: card for card in (
    Card("Datadog/Toto-Open-Base-1.0",
         Fact("~1 trillion points of Datadog's own observability metrics (no customer data), public datasets "
              "(Salesforce/GiftEvalPretrain, autogluon/chronos_datasets) and synthetic data (~1/3)", TOTO_CARD),
         Fact(UNKNOWN, f"{TOTO_CARD} names the public corpora but not their series; none is a market-price corpus "
                       "by name"),
         Fact(UNKNOWN, f"{TOTO_CARD} and the abstract of {TOTO_PAPER} state no end date"),
         Fact("2025-05", TOTO_PAPER + _ARXIV_MONTH)),
    Card("Datadog/Toto-2.0-22m",
         Fact("observability metrics and synthetic data, without public forecasting datasets", TOTO2_BLOG +
              " (as summarised at https://alex-knowledge-base.pages.dev/sources/toto-2-2026; the post itself was "
              "not read here)"),
         Fact(UNKNOWN, f"neither {TOTO2_BLOG} as summarised nor the Toto 2.0 model cards (e.g. "
                       "https://huggingface.co/Datadog/Toto-2.0-2.5B) were read to say whether any series are "
                       "market prices"),
         Fact(UNKNOWN, "the summaries of the Toto 2.0 technical report state no end date"),
         Fact(UNKNOWN, "a listing (https://www.scholarfeed.org/author/297286) dates the Toto 2.0 technical report "
                       "'May 19' without a year; no arXiv identifier found")),
    *(_kronos(f"NeoQuasar/{name}") for name in ("Kronos-mini", "Kronos-small", "Kronos-base",
                                                 "Kronos-Tokenizer-2k", "Kronos-Tokenizer-base")),
    Card("amazon/chronos-2",
         Fact("univariate series given diverse multivariate structure by synthetic data generators; the real "
              "corpora are not listed in the abstract", CHRONOS2_PAPER),
         Fact(UNKNOWN, f"the abstract of {CHRONOS2_PAPER} names no market-price corpus; the paper's data section "
                       "was not read"),
         Fact(UNKNOWN, f"the abstract of {CHRONOS2_PAPER} states no end date"),
         Fact("2025-10", CHRONOS2_PAPER + _ARXIV_MONTH)),
    Card("google/timesfm-2.5-200m-pytorch",
         Fact(UNKNOWN, "https://huggingface.co/google/timesfm-2.5-200m-pytorch was found but its card not read; "
                       "TimesFM 1.0's corpus (https://arxiv.org/abs/2310.10688) need not be 2.5's"),
         Fact(UNKNOWN, "no source read lists TimesFM 2.5's corpora"),
         Fact(UNKNOWN, "no source read states an end date for TimesFM 2.5's data"),
         Fact(UNKNOWN, "the hub listing of google/timesfm-2.5-200m-pytorch gives only relative upload ages")),
    Card("NX-AI/TiRex",
         Fact("the card's datasets: autogluon/chronos_datasets and Salesforce/GiftEvalPretrain", TIREX_CARD),
         Fact(UNKNOWN, f"{TIREX_CARD} names the corpora but not their series"),
         Fact(UNKNOWN, f"{TIREX_CARD} and the abstract of {TIREX_PAPER} state no end date"),
         Fact("2025-05", TIREX_PAPER + _ARXIV_MONTH)),
)}


def _named(folder: Path) -> str | None:
    """The hub id a local folder names in its ``config.json`` (Kronos: ``model/config.json``)."""
    for config in (folder / "config.json", folder / "model" / "config.json"):
        try:
            raw = json.loads(config.read_text())
        except (OSError, ValueError):
            continue
        for key in CONFIG_KEYS:
            if isinstance(raw, dict) and str(raw.get(key, "")) in CARDS:
                return str(raw[key])
    return None


def identify(weights: str | None, default: str | None = None) -> Card | None:
    """The card of the checkpoint ``weights`` loads: ``default`` (the model's own repo) for None/``auto``, a
    known repo id as given, a local folder by the id its config names; None for ``random`` and unknown weights."""
    if weights is None or str(weights) == "auto":
        return CARDS.get(default or "")
    if random_weights(weights):
        return None
    if str(weights) in CARDS:
        return CARDS[str(weights)]
    path = Path(str(weights)).expanduser()
    if path.is_dir():
        repo = _named(path)
        return CARDS.get(repo) if repo else None
    return None


def checkpoint_card(model: str | None, weights: str | None) -> Card | None:
    """:func:`identify` with the default repo of ``model`` (from the hub catalogue of the imported models)."""
    known = catalogue().get(model or "")
    default = (known.repos.get("model") or known.repos.get("")) if known else None
    return identify(weights, default)


def _day(value: str, end: bool) -> date | None:
    """An ISO day, or a month as its last day (``end``) — None for "unknown"."""
    if value == UNKNOWN:
        return None
    if len(value) == 7:
        year, month = int(value[:4]), int(value[5:])
        first_next = date(year + month // 12, month % 12 + 1, 1)
        return date.fromordinal(first_next.toordinal() - 1) if end else date(year, month, 1)
    return date.fromisoformat(value)


def exposure(card: Card | None) -> tuple[str, date] | None:
    """(label, last day it covers) of ``card``: its stated cutoff, else (market corpora) its release; None."""
    if card is None:
        return None
    cutoff = _day(card.cutoff.value, end=True)
    if cutoff is not None:
        return INSIDE, cutoff
    release = _day(card.release.value, end=True)
    if card.market.value == "yes" and release is not None:
        return POSSIBLY, release
    return None


def pretraining_meta(card: Card | None, decisions: Sequence) -> dict:
    """What a report says of one symbol's windows and the checkpoint's pretraining: ``checkpoint``,
    ``pretraining`` (the label, "" when no window is inside), ``pretraining_windows`` and ``pretraining_until``;
    {} for weights without a card or a card that dates nothing."""
    found = exposure(card)
    if found is None:
        return {}
    label, until = found
    days = np.asarray(pd.DatetimeIndex(decisions).date)
    inside = int(np.count_nonzero(days <= until))
    return {"checkpoint": card.repo, "pretraining": label if inside else "", "pretraining_windows": inside,
            "pretraining_until": until.isoformat()}


def pretraining_text(meta: dict, windows: int) -> str:
    """One line for every surface: ``possibly inside pretraining data: 12 of 20 windows ...``; '' otherwise."""
    label = meta.get("pretraining")
    if not label:
        return ""
    how = "its stated data cutoff" if label == INSIDE else "the end of its release month (corpora hold market prices)"
    return (f"{label}: {meta.get('pretraining_windows', 0)} of {windows} windows have a decision bar on or before "
            f"{meta.get('pretraining_until')}, {how} for {meta.get('checkpoint')}; their scores may flatter the model")


PROVENANCE_UNKNOWN = "provenance unknown"


def weighted(model: str | None, weights: str | None) -> bool:
    """Whether ``model`` runs on pretrained or tuned weights (not the weight-free baseline, not ``random``)."""
    return model not in (None, "baseline") and not random_weights(weights)


def random_weights(weights: str | None) -> bool:
    """``random`` or ``random:SIZE`` (toto2's ``random:4m``): seeded weights that saw nothing."""
    return str(weights).split(":")[0] == "random"


def provenance_meta(model: str | None, weights: str | None, card: Card | None, tuned: bool) -> dict:
    """``{"provenance": "unknown", "provenance_weights": ...}`` for weights that are neither a known public
    checkpoint (``card``) nor ``tuned`` weights with a record of a known base; {} otherwise (and for random or
    no weights)."""
    if not weighted(model, weights) or card is not None or tuned:
        return {}
    return {"provenance": "unknown", "provenance_weights": "auto" if weights is None else str(weights)}


def provenance_text(meta: dict) -> str:
    """The line for weights that are neither a known public checkpoint nor tuned weights with a record; ''
    otherwise."""
    if meta.get("provenance") != "unknown":
        return ""
    return (f"{PROVENANCE_UNKNOWN}: the weights {meta.get('provenance_weights')} are neither a known public "
            "checkpoint nor fine-tuned weights with a tuning record, so whether they saw these windows cannot be said")


def lineage(model: str, weights: str | None) -> dict:
    """What a fine-tune records of its base: ``base_checkpoint`` (the public checkpoint it descends from, None if
    none) and ``base_provenance``: "public checkpoint", "tuned" (the base's own record, whose checkpoint it
    inherits), "random" or "unknown"."""
    from marketcast.forecast.tuning import read_tuning

    if random_weights(weights):
        return {"base_checkpoint": None, "base_provenance": "random"}
    card = checkpoint_card(model, weights)
    if card is not None:
        return {"base_checkpoint": card.repo, "base_provenance": "public checkpoint"}
    tuning = read_tuning(weights)
    if tuning is not None:
        return {"base_checkpoint": tuning.raw.get("base_checkpoint"),
                "base_provenance": "tuned" if tuning.raw.get("base_provenance") != "unknown" else "unknown"}
    return {"base_checkpoint": None, "base_provenance": "unknown"}


def tuned_card(tuning) -> Card | None:
    """The card of the public checkpoint tuned weights descend from (their record's ``base_checkpoint``)."""
    return CARDS.get(str((tuning.raw if tuning is not None else {}).get("base_checkpoint")))


def weights_exposure(model: str | None, weights: str | None, tuning) -> tuple[Card | None, dict]:
    """What the loaded weights may have seen, for every surface: the card they are (a public checkpoint, or the
    one tuned weights descend from) and :func:`provenance_meta`; (None, {}) for random or no weights.
    ``tuning``: their :class:`~marketcast.forecast.tuning.Tuning` record, or None."""
    if not weighted(model, weights):
        return None, {}
    card = checkpoint_card(model, weights) or tuned_card(tuning)
    known_base = tuning is not None and tuning.raw.get("base_provenance") != "unknown"
    return card, provenance_meta(model, weights, card, known_base)
