"""Fine-tuning fixtures: a tiny random Toto saved as a checkpoint folder, and bars with a planted pattern."""

from __future__ import annotations

import json
import shutil
from datetime import date

import numpy as np
import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.loading import save_checkpoint
from marketcast.forecast.toto.model import random_model
from marketcast.forecast.tuning import fingerprint, record_text

PATCH = 8
PERIOD = 16  # the planted pattern: a 16-bar cycle a random model cannot know
BARS = 400
UNTIL = "2021-02-24"  # bar 300 of weekday bars from 2020-01-01: 99 windows stay out of sample
TUNE = ["--steps", "60", "--lr", "3e-3", "--batch-size", "8", "--context", "32", "--horizon", "4",
        "--eval-every", "10", "--checkpoint-every", "10"]


def planted(n: int = BARS, seed: int = 0, start: str = "2020-01-01") -> pd.DataFrame:
    """Weekday bars whose log close is a 5 % sine of period 16 plus 0.2 % noise (high/low 1 % around it)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    close = 100 * np.exp(0.05 * np.sin(2 * np.pi * t / PERIOD) + rng.normal(0, 0.002, n))
    index = pd.bdate_range(start, periods=n, tz="UTC", name="timestamp")
    return pd.DataFrame({"open": close, "high": close * 1.01, "low": close * 0.99, "close": close,
                         "volume": 1000.0}, index=index)


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """One torch thread: a tiny model's steps take milliseconds, and two threads on a busy 2-core CI machine
    spend most of that waiting for each other (30x slower here)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory):
    """A random tiny Toto (patches of 8) as a weights folder: the base every test tunes."""
    config = TotoConfig.tiny(patch_size=PATCH, stride=PATCH)
    return save_checkpoint(random_model(config, 0), config, tmp_path_factory.mktemp("base") / "toto-tiny")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bars")
    planted().to_csv(folder / "SYN.csv")
    planted(seed=1).to_csv(folder / "OTHER.csv")
    return folder


TOTO2_PATCH = 8
TOTO2_TUNE = [*TUNE[:TUNE.index("--lr")], "--lr", "3e-2", *TUNE[TUNE.index("--lr") + 2:]]  # unit-scaled weights


def tiny_toto2_config():
    """Toto 2.0 at test size: the 4m checkpoint's flags (xPos, per-dim scale, attention bias, u-μP), patches of 8,
    width 64, one time and one variate layer (163 k parameters)."""
    from marketcast.forecast.toto2.config import Toto2Config

    raw = {**Toto2Config.size("4m").to_dict(), "d_ff": None, "qk_dim": None, "v_dim": None, "num_groups": None,
           "heads_per_group": None}
    return Toto2Config.from_dict({**raw, "patch_size": TOTO2_PATCH, "d_model": 64, "num_heads": 4, "num_layers": 2,
                                  "layer_group_size": 2})


@pytest.fixture(scope="session")
def tiny_toto2(tmp_path_factory):
    """A random tiny Toto 2.0 as a weights folder (unfolded, the public layout)."""
    from marketcast.forecast.toto2.loading import save_checkpoint
    from marketcast.forecast.toto2.model import random_model

    return save_checkpoint(random_model(tiny_toto2_config(), 0), tmp_path_factory.mktemp("base") / "toto2-tiny")


def syn_record(tiny_base, data_dir) -> dict:
    """The record of weights tuned on SYN through UNTIL."""
    frame = load_symbol("SYN", data_dir=data_dir).frame
    return {"model": "toto", "base": str(tiny_base), "until": UNTIL,
            "symbols": {"SYN": {"fingerprint": fingerprint(frame, date.fromisoformat(UNTIL)), "bars": 301}}}


def stamp(path, record: dict) -> None:
    """Rewrite the safetensors file ``path`` with ``record`` in its header, through safetensors' own API."""
    from safetensors.torch import load_file, save_file

    save_file(load_file(str(path)), str(path), metadata={"marketcast.tuning": json.dumps(record)})


@pytest.fixture
def tuned(tiny_base, data_dir, tmp_path):
    """The tiny base with only a tuning.json saying it was tuned on SYN through UNTIL (a checkpoint written before
    the record moved into the weights)."""
    folder = tmp_path / "tuned"
    shutil.copytree(tiny_base, folder)
    (folder / "tuning.json").write_text(record_text(syn_record(tiny_base, data_dir)))
    return folder


@pytest.fixture
def carried(tiny_base, data_dir, tmp_path):
    """Tuned weights as finetune writes them (the record in model.safetensors' header), of which only config.json
    and model.safetensors were copied to another folder: no tuning.json."""
    folder = tmp_path / "copied"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(tiny_base / name, folder / name)
    stamp(folder / "model.safetensors", syn_record(tiny_base, data_dir))
    return folder
