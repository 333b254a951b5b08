"""``marketcast finetune`` end to end on a tiny Toto: it learns a planted pattern, its weights load back through
``--weights`` everywhere, and bad input is one line with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from marketcast.calibrate.crps import crps_ensemble
from marketcast.commands import main
from marketcast.forecast.base import make_batch
from marketcast.forecast.registry import load_forecaster
from marketcast.forecast.toto.forecaster import TotoForecaster
from marketcast.forecast.tuning import read_tuning
from tests.finetune.conftest import TUNE, UNTIL, planted


def _tune(tmp_path_factory, tiny_base, data_dir, name, *extra):
    out = tmp_path_factory.mktemp(name) / "tuned"
    code = main(["finetune", "--weights", str(tiny_base), "--data-dir", str(data_dir), "--symbols", "SYN",
                 "--until", UNTIL, *TUNE, *extra, "--out", str(out)])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def full(tmp_path_factory, tiny_base, data_dir):
    return _tune(tmp_path_factory, tiny_base, data_dir, "full")


@pytest.fixture(scope="module")
def lora(tmp_path_factory, tiny_base, data_dir):
    pytest.importorskip("peft")
    return _tune(tmp_path_factory, tiny_base, data_dir, "lora", "--lora", "4")


def _oos_crps(weights) -> float:
    """Mean CRPS of the next close over every window after --until (decision bars 301..398)."""
    frame = planted()
    ends = list(range(301, len(frame) - 1))
    fc = TotoForecaster.from_pretrained(weights, compile="eager").forecast(make_batch(frame, ends, 32, 1), 1, 64)
    observed = frame["close"].to_numpy()[np.asarray(ends) + 1]
    return float(crps_ensemble(fc.samples[:, 0], observed[:, None]).mean())


def test_tuning_on_a_planted_pattern_lowers_validation_loss_and_out_of_sample_crps(full, tiny_base):
    record = json.loads((full / "tuning.json").read_text())
    loss = record["loss"]
    assert loss["validation"] < loss["base_validation"] - 1.0  # nats per step, on the held-out 10 %
    assert record["best_step"] > 0 and record["steps"] == 60 and record["adapter"] == "full"
    assert [h["step"] for h in record["history"]] == [10, 20, 30, 40, 50, 60]
    assert record["until"] == UNTIL and record["symbols"]["SYN"]["bars"] == 301
    assert record["hyper"]["lr"] == 3e-3 and record["hyper"]["lora"] is None
    assert (record["base_checkpoint"], record["base_provenance"]) == (None, "unknown")  # a random folder named nothing
    base, tuned = _oos_crps(tiny_base), _oos_crps(full)
    assert tuned < 0.7 * base, (tuned, base)


def test_lora_and_full_tuning_both_load_back_through_weights(full, lora, tiny_base):
    base = load_file(str(tiny_base / "model.safetensors"))
    for folder in (full, lora):
        state = load_file(str(folder / "model.safetensors"))
        assert set(state) == set(base)  # the public layout: adapters merged, no lora_ keys
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "tuning.json"]
        forecaster = load_forecaster("toto", weights=str(folder), compile="eager")
        assert forecaster.source == str(folder)
    lora_state = load_file(str(lora / "model.safetensors"))
    changed = {k for k in base if not np.array_equal(base[k].numpy(), lora_state[k].numpy())}
    assert changed and all(".attention.wQKV." in k or ".attention.wO." in k for k in changed)  # only the adapted
    record = json.loads((lora / "tuning.json").read_text())
    loss = record["loss"]
    assert record["adapter"].startswith("lora rank 4") and loss["validation"] < loss["base_validation"]


def test_the_record_is_inside_the_weights_header_as_well_as_beside_them(full, lora):
    """The header's ``marketcast.tuning`` (read with safetensors' own safe_open) is tuning.json's record."""
    from safetensors import safe_open

    for folder in (full, lora):
        with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
            meta = handle.metadata()
        assert set(meta) == {"marketcast.tuning"}
        assert json.loads(meta["marketcast.tuning"]) == json.loads((folder / "tuning.json").read_text())
        (folder / "tuning.json").rename(folder / "kept.json")
        try:
            tuning = read_tuning(folder)
            assert tuning.path == folder / "model.safetensors" and tuning.until.isoformat() == UNTIL
            assert tuning.raw == json.loads((folder / "kept.json").read_text())
        finally:
            (folder / "kept.json").rename(folder / "tuning.json")


def test_a_backtest_after_until_runs_with_the_tuned_weights(full, data_dir, tmp_path, capsys):
    code = main(["backtest", "SYN", "--data-dir", str(data_dir), "--model", "toto", "--weights", str(full),
                 "--start", "2021-02-25", "--end", "2021-03-16", "--samples", "16", "--context", "32",
                 "--output-dir", str(tmp_path / "bt")])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "bt" / "latest" / "SYN.json").read_text())
    assert report["runs"] == 14


@pytest.mark.parametrize("args,message", [
    (["--until", "2021-07-13"], "error: --until 2021-07-13 is on or after the last bar of SYN"),
    (["--until", "2020-01-28"], "error: --until 2020-01-28 leaves 20 bars of SYN"),
    (["--until", UNTIL, "--model", "chronos"],
     "error: --model 'chronos' is unknown; choose one of toto, kronos, toto2\n"),
    (["--until", UNTIL, "--lora", "0"], "error: --lora 0: a LoRA rank is a positive integer, e.g. --lora 8"),
    (["--until", UNTIL, "--lora", "-3"], "error: --lora -3: a LoRA rank is a positive integer"),
    (["--until", "Oct 27"], "error: --until 'Oct 27' is not a date; use YYYY-MM-DD"),
    pytest.param(["--until", UNTIL, "--device", "cuda"], "error: --device cuda: CUDA is not available here; use "
                 "--device cpu", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA")),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tiny_base, data_dir, tmp_path, capsys):
    out = tmp_path / "tuned"
    code = main(["finetune", "--weights", str(tiny_base), "--data-dir", str(data_dir), "--symbols", "SYN",
                 *TUNE, *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("args,code,message", [
    (["--until", "2262-05-01"], 2, "error: --until 2262-05-01 is on or after the last bar of SYN"),
    (["--horizon", "5000"], 2, "and --horizon 5000 need at least"),
    (["--context", "100000"], 2, "a --context of 100000"),
    (["--batch-size", "50000"], 2, "error: --batch-size 50000 is more than the"),
    (["--resume"], 2, "holds no checkpoint.pt to continue from; drop --resume"),
    (["--lr", "inf"], 2, "error: Invalid value for '--lr': inf is not a finite number."),
    (["--out", "{file}"], 3, "exists and is not a folder"),
    (["--out", "{file}/below"], 3, "is not a folder, so it cannot be created"),
])
def test_options_are_checked_before_the_weights_load(args, code, message, data_dir, tmp_path, capsys):
    """Weights that do not exist (``./no-such-weights``): a bad option must be said before the loader would
    say those are missing (it used to answer every one of these with "Toto weights ... not in the cache")."""
    (tmp_path / "a-file").write_text("x")
    out = tmp_path / "tuned"
    args = [a.format(file=tmp_path / "a-file") for a in args]
    rc = main(["finetune", "--weights", "./no-such-weights", "--data-dir", str(data_dir), "--symbols", "SYN",
               "--until", UNTIL, *TUNE, "--out", str(out), *args])
    err = capsys.readouterr().err
    assert rc == code and message in err and err.count("\n") == 1 and "weights" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_an_existing_out_needs_resume(full, tiny_base, data_dir, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in full.iterdir()}
    args = ["finetune", "--weights", str(tiny_base), "--data-dir", str(data_dir), "--symbols", "SYN",
            "--until", UNTIL, *TUNE, "--out", str(full)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == f"error: --out {full} already exists and is not empty; pass --resume to continue its training, " \
                  "or choose a new folder\n"
    assert main([*args, "--resume"]) == 2
    assert capsys.readouterr().err == (f"error: --resume: {full} has no checkpoint.pt to continue from; its tuning "
                                       "already finished; choose a new --out\n")
    assert {p.name: p.stat().st_mtime_ns for p in full.iterdir()} == before


def test_progress_shows_the_step_loss_validation_and_eta(tiny_base, data_dir, tmp_path, capsys):
    args = ["--steps", "4", "--lr", "1e-3", "--batch-size", "2", "--context", "32", "--eval-every", "2"]
    assert main(["finetune", "--weights", str(tiny_base), "--data-dir", str(data_dir), "--symbols", "SYN",
                 "--until", UNTIL, *args, "--out", str(tmp_path / "t")]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "finetune:" in line]
    assert [line.split(" loss ")[0] for line in lines] == [f"[{i}/4] finetune: step {i}/4" for i in (1, 2, 3, 4)]
    assert "validation" not in lines[0] and "(base " in lines[1] and lines[1].endswith(")")
    assert "(eta " in lines[2]  # the log form of the progress bar: one line per report, with the time left
    record = json.loads((tmp_path / "t" / "tuning.json").read_text())
    assert f"validation loss {record['loss']['validation']:.4f} (base {record['loss']['base_validation']:.4f})" \
        in captured.out
