"""``marketcast models download`` and the weights advice: the hf command that exists, the Kronos layout
(DIR/model + DIR/tokenizer) and the public repo names. Offline, against a Hugging Face cache built here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marketcast.commands import main
from marketcast.errors import ConfigError, ModelLoadError
from marketcast.forecast.checkpoint import resolve_folder
from marketcast.forecast.hub import download
from marketcast.forecast.kronos import MODELS, TOKENIZERS, Kronos, KronosTokenizer, from_config, save_pretrained
from marketcast.forecast.kronos.loading import load_pair

REVISION = "0123456789abcdef0123456789abcdef01234567"


def cache_repo(cache: Path, repo: str) -> Path:
    """An entry of the Hugging Face cache as huggingface_hub lays it out; returns its snapshot folder."""
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(REVISION)
    snapshot = root / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    return snapshot


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    import huggingface_hub.constants

    folder = tmp_path / "hf-cache"
    folder.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(folder))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return folder


@pytest.fixture
def kronos_mini(cache) -> Path:
    """Kronos-mini and Kronos-Tokenizer-2k (random weights, the public shapes) in the cache."""
    save_pretrained(from_config(Kronos, MODELS["Kronos-mini"]), cache_repo(cache, "NeoQuasar/Kronos-mini"))
    save_pretrained(from_config(KronosTokenizer, TOKENIZERS["Kronos-Tokenizer-2k"]),
                    cache_repo(cache, "NeoQuasar/Kronos-Tokenizer-2k"))
    return cache


def test_toto_from_the_cache_needs_no_weights_option(cache, capsys):
    snapshot = cache_repo(cache, "Datadog/Toto-Open-Base-1.0")
    for name in ("config.json", "model.safetensors"):
        (snapshot / name).write_text(name)
    assert main(["models", "download", "toto"]) == 0
    out = capsys.readouterr().out
    assert "Datadog/Toto-Open-Base-1.0" in out and REVISION in out and "use it with: --model toto\n" in out


def test_kronos_to_a_folder_gets_model_and_tokenizer_that_load(kronos_mini, tmp_path, capsys):
    target = tmp_path / "weights" / "kronos-mini"
    assert main(["models", "download", "kronos-mini", "--to", str(target)]) == 0
    assert f"--model kronos --weights {target}" in capsys.readouterr().out
    for sub, repo in (("model", "Kronos-mini"), ("tokenizer", "Kronos-Tokenizer-2k")):
        cached = kronos_mini / f"models--NeoQuasar--{repo}" / "snapshots" / REVISION
        assert (target / sub / "model.safetensors").read_bytes() == (cached / "model.safetensors").read_bytes()
        # config.json as cached, plus the repo it came from: the folder says which public checkpoint it is
        config = json.loads((target / sub / "config.json").read_text())
        assert config == {**json.loads((cached / "config.json").read_text()),
                          "marketcast_checkpoint": f"NeoQuasar/{repo}"}
    from marketcast.forecast.cards import identify

    assert identify(str(target)).repo == "NeoQuasar/Kronos-mini"
    model, tokenizer, label = load_pair(str(target))
    assert label == str(target) and model.config.n_layers == 4 and tokenizer.config.group_size == 5


def test_kronos_in_the_cache_is_loaded_by_its_repo_id(kronos_mini):
    folders, weights = download("kronos-mini")
    assert weights == "NeoQuasar/Kronos-mini" and set(folders) == {"NeoQuasar/Kronos-mini",
                                                                   "NeoQuasar/Kronos-Tokenizer-2k"}
    model, tokenizer, _ = load_pair(weights)
    assert model.config.d_model == 256 and tokenizer.config.group_size == 5


def test_offline_and_not_cached_is_one_line_with_both_commands(cache, capsys):
    assert main(["models", "download", "kronos-base"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: NeoQuasar/Kronos-base: could not be downloaded")
    assert ("`hf download NeoQuasar/Kronos-base config.json model.safetensors` and `hf download "
            "NeoQuasar/Kronos-Tokenizer-base config.json model.safetensors`") in err
    assert "with model/ and tokenizer/ subfolders" in err and "huggingface-cli" not in err


def test_an_unknown_model_name(cache, capsys):
    assert main(["models", "download", "kronos-huge"]) == 2  # the command imports every model package first
    assert capsys.readouterr().err.strip() == ("error: unknown model 'kronos-huge'; choose one of chronos2, kronos (= kronos-small), "
                                               "kronos-base, kronos-mini, kronos-small, timesfm, tirex, toto, toto2")
    with pytest.raises(ConfigError, match="unknown model 'kronos-huge'; choose one of chronos2, kronos \\(= kronos-small\\), "):
        download("kronos-huge")


def test_missing_weights_advice_names_hf_and_the_layout(cache):
    with pytest.raises(ModelLoadError) as toto:
        resolve_folder("Datadog/Toto-Open-Base-1.0", "Toto")
    assert ("run `marketcast models download toto` (or `hf download Datadog/Toto-Open-Base-1.0 config.json "
            "model.safetensors`) on a connected machine, or pass --weights DIR with a folder holding config.json "
            "and model.safetensors") in str(toto.value)
    with pytest.raises(ModelLoadError) as kronos:
        resolve_folder("NeoQuasar/Kronos-small", "Kronos")
    message = str(kronos.value)
    assert "`marketcast models download kronos-small`" in message and "NeoQuasar/Kronos-Tokenizer-base" in message
    assert "--weights DIR with a folder with model/ and tokenizer/ subfolders" in message
    assert "huggingface-cli" not in message + str(toto.value)
