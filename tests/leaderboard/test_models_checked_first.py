"""``models compare`` checks every model before any work (issue 57): offline with an empty Hugging Face cache its
defaults stop at once with a line per missing model and one naming each (exit 2, no run recorded, nothing
loaded), or with ``--skip-missing`` the models that can run are compared and the left-out ones are said in the
terminal, the JSON and on the page; the check is the loaders' own resolution (:func:`registry.missing`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from huggingface_hub import constants
from jsonschema import Draft202012Validator

from marketcast.commands import main
from marketcast.forecast.registry import MODEL_NAMES, installed, missing
from marketcast.leaderboard.compare import default_models
from marketcast.runs.store import RunStore
from marketcast.schemas import load, registry

SMALL = ["--symbols", "SP500", "--windows", "12", "--samples", "16", "--context", "64"]
TOTO_MISSING = "Toto weights 'Datadog/Toto-Open-Base-1.0': no folder 'Datadog/Toto-Open-Base-1.0' here"


@pytest.fixture(autouse=True)
def offline_empty_cache(tmp_path, monkeypatch):
    """Offline, with a Hugging Face cache that holds nothing: no public checkpoint can be found."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.chdir(tmp_path)


def _store() -> RunStore:
    import os

    return RunStore(os.environ["MARKETCAST_RUN_STORE"])


def test_the_defaults_offline_stop_before_any_work_naming_each_missing_model(capsys):
    capsys.readouterr()
    assert main(["models", "compare", *SMALL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    wanted = [n for n in default_models().split(",") if n != "baseline"]  # every model with weights to find
    assert {"toto", "kronos", "toto2"} <= set(wanted)
    warned = [line for line in err if line.startswith("warning: ")]
    assert [line.split(":")[1].strip() for line in warned] == wanted  # one line per missing model, in order
    assert warned[0] == f"warning: toto: {missing('toto')}" and TOTO_MISSING in warned[0]
    (error,) = [line for line in err if line.startswith("error: ")]
    n = len(wanted)
    assert error.startswith(f"error: {n} of {n + 1} models cannot run here (toto: no weights here; kronos: no "
                            "weights here; toto2: no weights here")
    assert "--skip-missing" in error
    assert len(err) == n + 1  # nothing else: no progress line, nothing was loaded or backtested
    assert _store().infos() == {}


def test_one_missing_model_is_its_loaders_one_line(capsys):
    capsys.readouterr()
    assert main(["models", "compare", "--models", "baseline,toto", *SMALL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: toto: {missing('toto')}; or pass --skip-missing to compare the other models"]
    assert _store().infos() == {}


def test_skip_missing_compares_the_others_and_says_so_everywhere(capsys, tmp_path):
    capsys.readouterr()
    args = ["models", "compare", "--models", "baseline,toto,toto2", "--weights", "toto2=random:4m", "--skip-missing",
            *SMALL]
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [r["model"] for r in doc["models"]] == ["baseline", "toto2"]
    assert doc["skipped"] == [{"model": "toto", "reason": missing("toto")}]
    assert list(Draft202012Validator(load("models_compare"), registry=registry()).iter_errors(doc)) == []
    assert f"warning: toto: {missing('toto')}" in captured.err

    assert main(args) == 0  # the terminal says it too
    out = " ".join(capsys.readouterr().out.split())
    assert "left out by --skip-missing (not run, not in the table): toto: Toto weights" in out

    assert main(["report", doc["run_id"], "-o", str(tmp_path / "rep")]) == 0
    pages = sorted((tmp_path / "rep").rglob("report.html"))
    assert [p.parent.name for p in pages] == ["baseline", "toto2"]
    for page in pages:
        text = page.read_text()
        said = re.search(r'<p class="warning" data-check="skipped-models">(.*?)</p>', text).group(1)
        assert said.startswith("left out by --skip-missing (not run, not in the table): toto: Toto weights")
        # the models' table near the top: under the strip, before the first symbol's section
        assert text.index('<div id="verdict"') < text.index('<section id="leaderboard">') < text.index('id="s0-SP500"')


def test_skip_missing_with_no_model_left_is_exit_2(capsys):
    capsys.readouterr()
    assert main(["models", "compare", "--models", "toto,toto2", "--skip-missing", *SMALL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: none of the 2 models can run here") and len(err) == 3
    assert _store().infos() == {}


def test_missing_is_the_loaders_resolution_without_loading(tmp_path):
    """Random weights need nothing; a local folder is found as the loader finds it (no tensor read: the files are
    not even there); a Kronos folder without tokenizer/ and a missing extra are the loaders' own lines."""
    assert [missing(n, "random") for n in ("toto", "kronos")] == [None, None]
    assert missing("toto2", "random:4m") is None and missing("baseline") is None
    folder = tmp_path / "weights"
    folder.mkdir()
    assert missing("toto", str(folder)) is None and missing("toto2", str(folder)) is None
    assert missing("kronos", str(folder)) == (f"Kronos weights folder {folder}: no model/ subfolder; the folder needs "
                                              "model/ and tokenizer/, each with config.json and model.safetensors")
    (folder / "model").mkdir(), (folder / "tokenizer").mkdir()
    assert missing("kronos", str(folder)) is None
    assert missing("toto", "weights/toto").startswith("Toto weights 'weights/toto': no folder 'weights/toto' here")
    for name in MODEL_NAMES:
        if not installed(name):
            assert "pip install 'marketcast[" in missing(name)


def test_the_help_says_the_default_and_offers_no_start(capsys):
    capsys.readouterr()
    assert main(["models", "compare", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: every model whose optional extra is installed)" in text
    assert "[default: baseline" not in text  # the default is the sentence, not a list beside it
    assert "--start" not in text and "--skip-missing" in text
    assert "The same count for every symbol and model" in text
