"""Each public checkpoint's card (corpora, market prices, cutoff, release, each with a source or "unknown"), how
weights are known as a checkpoint, and how windows are labelled by the card."""

from __future__ import annotations

import json
import re
from datetime import date

import pandas as pd
import pytest

from marketcast.forecast.cards import (
    CARDS,
    INSIDE,
    POSSIBLY,
    UNKNOWN,
    Card,
    Fact,
    checkpoint_card,
    exposure,
    identify,
    pretraining_meta,
    pretraining_text,
)
from marketcast.forecast.hub import catalogue
from marketcast.forecast.registry import import_models

SOURCE = re.compile(r"https://[\w.-]+\.[a-z]+/\S+")
NAMED = {"Datadog/Toto-Open-Base-1.0", "Datadog/Toto-2.0-22m", "NeoQuasar/Kronos-mini", "NeoQuasar/Kronos-small",
         "NeoQuasar/Kronos-base", "NeoQuasar/Kronos-Tokenizer-2k", "NeoQuasar/Kronos-Tokenizer-base",
         "amazon/chronos-2", "google/timesfm-2.5-200m-pytorch", "NX-AI/TiRex"}


def test_every_catalogued_repo_and_every_named_checkpoint_has_a_card():
    import_models()
    repos = {repo for c in catalogue().values() for repo in c.repos.values()}
    assert NAMED <= set(CARDS) and repos <= set(CARDS), sorted(repos - set(CARDS))


@pytest.mark.parametrize("repo", sorted(NAMED))
def test_each_fact_cites_its_source_or_says_unknown_with_what_was_checked(repo):
    card = CARDS[repo]
    for name in ("corpora", "market", "cutoff", "release"):
        fact = getattr(card, name)
        assert fact.value and fact.source, (repo, name)
        if fact.value != UNKNOWN:
            assert SOURCE.search(fact.source), (repo, name, fact.source)
        else:
            assert len(fact.source) > 20, (repo, name, "say what was checked")
    assert card.market.value in ("yes", "no", UNKNOWN)
    for when in (card.cutoff.value, card.release.value):
        assert when == UNKNOWN or re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", when), when


def test_kronos_corpora_hold_market_prices_and_windows_before_its_release_month_end_are_possibly_inside():
    card = CARDS["NeoQuasar/Kronos-small"]
    assert card.market.value == "yes" and card.cutoff.value == UNKNOWN and card.release.value == "2025-08"
    assert exposure(card) == (POSSIBLY, date(2025, 8, 31))
    decisions = pd.to_datetime(["2025-08-29", "2025-08-31", "2025-09-01", "2025-09-02"], utc=True)
    meta = pretraining_meta(card, decisions)
    assert meta == {"checkpoint": "NeoQuasar/Kronos-small", "pretraining": POSSIBLY, "pretraining_windows": 2,
                    "pretraining_until": "2025-08-31"}
    assert pretraining_text(meta, 4).startswith(f"{POSSIBLY}: 2 of 4 windows have a decision bar on or before "
                                                "2025-08-31")
    after = pretraining_meta(card, decisions[2:])
    assert after["pretraining"] == "" and after["pretraining_windows"] == 0 and pretraining_text(after, 2) == ""


def test_a_stated_cutoff_labels_inside_and_wins_over_the_release():
    card = Card("x/y", Fact("prices", "https://arxiv.org/abs/1"), Fact("yes", "https://arxiv.org/abs/1"),
                Fact("2020-06-30", "https://arxiv.org/abs/1"), Fact("2024-01", "https://arxiv.org/abs/1"))
    meta = pretraining_meta(card, pd.to_datetime(["2020-06-30", "2020-07-01"], utc=True))
    assert (meta["pretraining"], meta["pretraining_windows"], meta["pretraining_until"]) == (INSIDE, 1, "2020-06-30")


def test_no_label_where_the_card_dates_nothing_or_the_corpora_are_not_known_to_hold_prices():
    decisions = pd.to_datetime(["2001-01-02"], utc=True)
    assert pretraining_meta(CARDS["Datadog/Toto-Open-Base-1.0"], decisions) == {}  # market unknown, no cutoff
    assert pretraining_meta(CARDS["google/timesfm-2.5-200m-pytorch"], decisions) == {}
    assert pretraining_meta(None, decisions) == {}


def test_weights_are_known_by_hub_id_default_or_the_id_their_config_names(tmp_path):
    import_models()
    assert checkpoint_card("kronos", None).repo == "NeoQuasar/Kronos-small"  # auto: the model's default
    assert checkpoint_card("toto", "auto").repo == "Datadog/Toto-Open-Base-1.0"
    assert checkpoint_card("kronos", "NeoQuasar/Kronos-base").repo == "NeoQuasar/Kronos-base"
    assert checkpoint_card("kronos", "random") is None and checkpoint_card("baseline", None) is None
    folder = tmp_path / "w"
    (folder / "model").mkdir(parents=True)
    assert identify(str(folder)) is None  # a folder that names nothing: unknown
    (folder / "model" / "config.json").write_text(json.dumps({"_name_or_path": "NeoQuasar/Kronos-mini"}))
    assert identify(str(folder)).repo == "NeoQuasar/Kronos-mini"
    (folder / "config.json").write_text(json.dumps({"marketcast_checkpoint": "NX-AI/TiRex"}))
    assert identify(str(folder)).repo == "NX-AI/TiRex"
    (folder / "config.json").write_text(json.dumps({"_name_or_path": "someone/else"}))
    assert identify(str(folder)).repo == "NeoQuasar/Kronos-mini"  # an unknown id is no checkpoint: next config


def test_a_fine_tune_records_its_lineage_and_tuned_weights_inherit_their_base_checkpoint(tmp_path):
    from marketcast.forecast.cards import lineage, tuned_card, weights_exposure
    from marketcast.forecast.tuning import read_tuning, record_text

    import_models()
    assert lineage("kronos", "random") == {"base_checkpoint": None, "base_provenance": "random"}
    assert lineage("kronos", None) == {"base_checkpoint": "NeoQuasar/Kronos-small",
                                       "base_provenance": "public checkpoint"}
    anonymous = tmp_path / "anonymous"
    anonymous.mkdir()
    (anonymous / "config.json").write_text("{}")
    assert lineage("toto", str(anonymous)) == {"base_checkpoint": None, "base_provenance": "unknown"}
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    (tuned / "config.json").write_text("{}")
    (tuned / "tuning.json").write_text(record_text({"until": "2021-02-24", "symbols": {},
                                                    **lineage("kronos", "NeoQuasar/Kronos-base")}))
    assert lineage("kronos", str(tuned)) == {"base_checkpoint": "NeoQuasar/Kronos-base", "base_provenance": "tuned"}
    assert tuned_card(read_tuning(tuned)).repo == "NeoQuasar/Kronos-base"
    card, unknown = weights_exposure("kronos", str(tuned), read_tuning(tuned))
    assert card.repo == "NeoQuasar/Kronos-base" and unknown == {}  # tuned Kronos: its base's pretraining period
    (tuned / "tuning.json").write_text(record_text({"until": "2021-02-24", "symbols": {},
                                                    **lineage("toto", str(anonymous))}))
    assert weights_exposure("toto", str(tuned), read_tuning(tuned)) == (
        None, {"provenance": "unknown", "provenance_weights": str(tuned)})  # "base: provenance unknown" carries on
    assert weights_exposure("kronos", "random", None) == (None, {})
    assert weights_exposure("baseline", None, None) == (None, {})


@pytest.mark.parametrize("weights", ["random", "random:4m"])
def test_random_weights_of_any_size_carry_no_label(weights):
    from marketcast.forecast.cards import lineage, weights_exposure

    assert weights_exposure("toto2", weights, None) == (None, {})
    assert lineage("toto2", weights) == {"base_checkpoint": None, "base_provenance": "random"}
    assert weights_exposure("toto2", "/no/such/folder", None)[1] == {"provenance": "unknown",
                                                                   "provenance_weights": "/no/such/folder"}
