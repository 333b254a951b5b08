"""The tuning record inside the weights (the safetensors header's ``marketcast.tuning``): it travels with
model.safetensors, so what happens to tuning.json no longer matters, a repo id is read from its Hugging Face cache
copy, a sharded checkpoint carries it in every shard, and a checkpoint with only tuning.json still loads."""

from __future__ import annotations

import json
import shutil
from datetime import date

import pytest
from safetensors.torch import load_file, save_file

from marketcast.commands import main
from marketcast.errors import ModelLoadError
from marketcast.forecast.tuning import read_tuning, record_metadata, record_text
from tests.finetune.conftest import UNTIL, syn_record
from tests.finetune.test_every_weights_command import in_sample_cases


def _refused(argv, capsys) -> str:
    code = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(err) == 1, err
    return err[0]


def test_record_metadata_round_trips_through_a_safetensors_file(carried, tiny_base, data_dir, tmp_path):
    record = syn_record(tiny_base, data_dir)
    path = tmp_path / "model.safetensors"
    save_file(load_file(str(carried / "model.safetensors")), str(path), metadata=record_metadata(record))
    (tmp_path / "config.json").write_text("{}")
    tuning = read_tuning(tmp_path)
    assert tuning.raw == json.loads(record_text(record)) and tuning.until == date.fromisoformat(UNTIL)
    assert tuning.symbols == {"SYN": record["symbols"]["SYN"]} and tuning.path == path
    with pytest.raises(ValueError, match="needs until and symbols"):
        record_metadata({"until": UNTIL})


def test_a_sidecar_only_checkpoint_still_loads_its_record(tuned):
    tuning = read_tuning(tuned)
    assert tuning.path == tuned / "tuning.json" and tuning.until == date.fromisoformat(UNTIL)


COMMANDS = ["backtest", "forecast", "models compare", "sweep", "finetune", "trade replay", "trade run"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("trick", ["renamed", "recased", "folder", "lying"])
def test_what_happens_to_tuning_json_no_longer_matters_when_the_header_holds_the_record(trick, command, carried,
                                                                                     data_dir, tmp_path,
                                                                                     monkeypatch, capsys):
    """The copied folder with a tuning.json renamed, recased, replaced by a folder, or one that says the weights
    were tuned up to 2005 on another symbol: the header's record (SYN through UNTIL) decides, on every command."""
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    monkeypatch.chdir(tmp_path)
    other = {"model": "toto", "until": "2005-12-30", "symbols": {"OTHER": {"fingerprint": "0"}}}
    if trick == "renamed":
        (carried / "tuning.json.bak").write_text(record_text(other))
    elif trick == "recased":
        (carried / "TUNING.JSON").write_text(record_text(other))
    elif trick == "folder":
        (carried / "tuning.json").mkdir()
    else:
        (carried / "tuning.json").write_text(record_text(other))
    for argv in in_sample_cases(carried, data_dir, tmp_path)[command]:
        line = _refused(argv, capsys)
        assert str(carried) in line and (f"on or before {UNTIL}" in line or f"up to {UNTIL}" in line), line
    assert read_tuning(carried).path == carried / "model.safetensors"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_repo_id_is_read_from_its_hugging_face_cache_copy(command, carried, data_dir, tmp_path, monkeypatch,
                                                            capsys):
    """Weights given as a repo id, cached as a download lays them out (config.json + model.safetensors only)."""
    import huggingface_hub.constants

    from tests.spine.test_models import cache_repo

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    monkeypatch.chdir(tmp_path)
    snapshot = cache_repo(cache, "someone/tuned-toto")
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(carried / name, snapshot / name)
    repo = "someone/tuned-toto"
    assert read_tuning(repo).path == snapshot / "model.safetensors"
    for argv in in_sample_cases(repo, data_dir, tmp_path)[command]:
        line = _refused(argv, capsys)
        assert repo in line and (f"on or before {UNTIL}" in line or f"up to {UNTIL}" in line), line
    assert read_tuning("someone/not-cached") is None


def test_a_sharded_checkpoint_carries_the_record_in_every_shard_and_is_read_from_the_first(carried, data_dir,
                                                                                          tmp_path, capsys):
    state = load_file(str(carried / "model.safetensors"))
    record = read_tuning(carried).raw
    folder = tmp_path / "sharded"
    folder.mkdir()
    shutil.copyfile(carried / "config.json", folder / "config.json")
    names = sorted(state)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:]), 1):
        shard = f"model-0000{i}-of-00002.safetensors"
        save_file({k: state[k] for k in part}, str(folder / shard), metadata=record_metadata(record))
        weight_map.update({k: shard for k in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert read_tuning(folder).path == folder / "model-00001-of-00002.safetensors"
    (argv,) = in_sample_cases(folder, data_dir, tmp_path)["backtest"]
    assert f"on or before {UNTIL}" in _refused(argv, capsys)


def test_a_corrupt_header_is_one_line(carried, tmp_path):
    (carried / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ModelLoadError, match="model.safetensors: unreadable safetensors header"):
        read_tuning(carried)


def test_a_header_with_other_metadata_and_no_record_falls_back_to_the_sidecar(tuned):
    path = tuned / "model.safetensors"
    save_file(load_file(str(path)), str(path), metadata={"format": "pt"})
    assert read_tuning(tuned).path == tuned / "tuning.json"
