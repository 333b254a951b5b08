"""A sharded checkpoint (``model.safetensors.index.json`` + shards, the layout transformers' save_pretrained
writes for large models and the toto-2 reference loads) reads like one file; a shard the index names but the
folder lacks is one line."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from marketcast.errors import ModelLoadError
from marketcast.forecast.checkpoint import INDEX
from marketcast.forecast.toto2 import Toto2Config
from marketcast.forecast.toto2.loading import load_pretrained, save_checkpoint
from marketcast.forecast.toto2.model import random_model


def _shard(folder) -> dict[str, str]:
    """Split ``folder``'s model.safetensors into two shards and an index, as save_pretrained names them."""
    state = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    names = sorted(state)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for shard, keys in halves.items():
        save_file({k: state[k] for k in keys}, str(folder / shard))
    weight_map = {k: shard for shard, keys in halves.items() for k in keys}
    (folder / INDEX).write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return weight_map


def test_two_shards_and_an_index_load_the_same_tensors(tmp_path):
    model = random_model(Toto2Config.size("4m"), seed=3)
    weight_map = _shard(save_checkpoint(model, tmp_path))
    assert len(set(weight_map.values())) == 2 and not (tmp_path / "model.safetensors").exists()
    loaded, _ = load_pretrained(tmp_path, torch.device("cpu"))
    want, got = model.state_dict(), loaded.state_dict()
    assert set(got) == set(want)
    assert all(torch.equal(got[k], want[k].float()) for k in want)


def test_a_missing_shard_is_one_line(tmp_path):
    _shard(save_checkpoint(random_model(Toto2Config.size("4m"), seed=3), tmp_path))
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelLoadError) as err:
        load_pretrained(tmp_path, torch.device("cpu"))
    message = str(err.value)
    assert "\n" not in message
    assert message == (f"{tmp_path / INDEX}: shard model-00002-of-00002.safetensors not found in {tmp_path}; "
                       "download every shard the index names")
