"""A SIGKILL in mid-training, then ``--resume``: the same final weights as a run never interrupted (Toto 1.0 and
Toto 2.0)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.finetune.conftest import UNTIL

ARGS = ["--steps", "120", "--lr", "3e-3", "--batch-size", "4", "--context", "32", "--horizon", "4",
        "--eval-every", "10", "--checkpoint-every", "5", "--patience", "0", "--seed", "7"]


def _command(base: Path, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "marketcast.commands", "finetune", "--weights", str(base), "--data-dir", str(data_dir),
            "--symbols", "SYN,OTHER", "--until", UNTIL, *ARGS, *extra, "--out", str(out)]


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1"}  # the same thread count in every run (and a light load)


def kill_mid_training(base: Path, data_dir: Path, out: Path, at: int, *extra: str) -> int:
    """Start a tuning and SIGKILL it once its checkpoint has reached step ``at``; the step of the checkpoint
    left behind (at least ``at``, and the run unfinished)."""
    proc = subprocess.Popen(_command(base, data_dir, out, *extra), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    step = 0
    try:
        deadline = time.monotonic() + 300
        while step < at:
            assert proc.poll() is None, f"the tuning ended with its checkpoint at step {step}"
            assert time.monotonic() < deadline, f"no checkpoint of step {at} within 300 s"
            try:  # a checkpoint is renamed into place whole: an open file is the old one or the new one
                step = torch.load(out / "checkpoint.pt", weights_only=False)["step"]
            except FileNotFoundError:
                time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "tuning.json").exists(), "the kill came after the end; not a mid-training kill"
    return torch.load(out / "checkpoint.pt", weights_only=False)["step"]


def run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(params=["toto", "toto2"])
def model(request):
    """(base weights folder, the model's options): the tiny Toto 1.0 or the tiny Toto 2.0."""
    if request.param == "toto":
        return request.getfixturevalue("tiny_base"), []
    return request.getfixturevalue("tiny_toto2"), ["--model", "toto2"]


def test_sigkill_then_resume_gives_the_uninterrupted_weights(model, data_dir, tmp_path):
    base, extra = model
    reference = tmp_path / "reference"
    run(_command(base, data_dir, reference, *extra))
    out = tmp_path / "killed"
    step = kill_mid_training(base, data_dir, out, 20, *extra)
    assert 20 <= step < 120 and step % 5 == 0
    run(_command(base, data_dir, out, *extra, "--resume"))
    assert (out / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    got, want = (json.loads((p / "tuning.json").read_text()) for p in (out, reference))
    assert got["loss"] == want["loss"] and got["history"] == want["history"] and got["steps"] == 120
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tuning.json"]


def test_resume_with_other_settings_is_refused(tiny_base, data_dir, tmp_path):
    out = tmp_path / "killed"
    kill_mid_training(tiny_base, data_dir, out, at=5)
    cmd = _command(tiny_base, data_dir, out, "--resume")
    cmd[cmd.index("--lr") + 1] = "1e-3"
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    assert done.stderr == ("error: --resume: --lr differs from the checkpoint's (lr=0.003); use the same settings "
                           "or another --out\n")



@pytest.fixture(scope="module")
def killed(tiny_base, data_dir, tmp_path_factory):
    """A tuning of SYN,OTHER up to UNTIL killed after its checkpoint of step 5 (left unfinished, to resume)."""
    out = tmp_path_factory.mktemp("killed") / "out"
    kill_mid_training(tiny_base, data_dir, out, at=5)
    return out


def _edited(data_dir: Path, folder: Path) -> Path:
    """A copy of ``data_dir`` whose SYN has one close changed 0.01 % on bar 100 (before UNTIL)."""
    import pandas as pd

    folder.mkdir()
    for path in data_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    frame = pd.read_csv(folder / "SYN.csv", index_col=0)
    frame.iloc[100, frame.columns.get_loc("close")] *= 1.0001
    frame.to_csv(folder / "SYN.csv")
    return folder


@pytest.mark.parametrize("change", ["until", "symbols", "data"])
def test_resume_with_another_cutoff_symbols_or_data_is_refused_before_training(change, killed, tiny_base, data_dir,
                                                                                tmp_path, capsys):
    """The cutoff, the symbols and each symbol's bars up to the cutoff live in the checkpoint: a resume that
    changes one is one line naming it, exit 2, and the checkpoint is left as it was (no step was taken)."""
    from marketcast.commands import main

    cmd = _command(tiny_base, data_dir, killed, "--resume")[3:]  # past `python -m marketcast.commands`
    before = (killed / "checkpoint.pt").read_bytes()
    want = {
        "until": "--until 2021-01-29 differs from the checkpoint's (until=2021-02-24); use --until 2021-02-24 or "
                 "another --out",
        "symbols": "--symbols SYN differ from the checkpoint's (SYN,OTHER); use --symbols SYN,OTHER or another --out",
        "data": f"the bars of SYN up to {UNTIL} ({tmp_path / 'edited' / 'SYN.csv'}) differ from the ones the "
                "checkpoint was trained on (their fingerprint changed); restore them, or start over in another --out",
    }[change]
    if change == "until":
        cmd[cmd.index("--until") + 1] = "2021-01-29"
    elif change == "symbols":
        cmd[cmd.index("--symbols") + 1] = "SYN"
    else:
        cmd[cmd.index("--data-dir") + 1] = str(_edited(data_dir, tmp_path / "edited"))
    assert main(cmd) == 2
    assert capsys.readouterr().err == f"error: --resume: {want}\n"
    assert (killed / "checkpoint.pt").read_bytes() == before and not (killed / "tuning.json").exists()
