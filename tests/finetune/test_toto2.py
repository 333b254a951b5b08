"""Toto 2.0 fine-tuning: its pinball objective against the toto-2 reference and the forecaster, LoRA merged into
u-μP-scaled layers, and the command end to end (a planted pattern learnt, weights that load back, the leak guard)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from marketcast.calibrate.crps import crps_ensemble
from marketcast.commands import main
from marketcast.finetune.toto import add_lora
from marketcast.finetune.toto2 import merge_lora, pinball, sequence_quantiles, window_pinball
from marketcast.forecast.base import make_batch
from marketcast.forecast.registry import load_forecaster
from marketcast.forecast.toto2 import QUANTILES, Toto2Forecaster
from marketcast.forecast.toto2.model import Toto2Model, random_model
from tests.finetune.conftest import TOTO2_PATCH as P, TOTO2_TUNE, UNTIL, planted, tiny_toto2_config

CONFIG = tiny_toto2_config()


def _series(batch, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 100 + torch.randn(batch, 3, length, generator=g).cumsum(-1)


def test_the_training_pass_equals_the_toto2_reference_forward():
    """Every position's knots (asinh space) and the scaler's loc/scale equal toto-2's ``Toto2Model.forward`` with
    ``cpm_mask`` = the mask, on the same random weights (biases and per-dim scales non-zero)."""
    from tests.toto2.conftest import reference_model

    ref = reference_model(CONFIG, seed=3)
    mine = Toto2Model(CONFIG)
    mine.load_state_dict(ref.state_dict(), strict=True)
    x = _series(2, 5 * P, seed=1)
    mask = torch.ones_like(x, dtype=torch.bool)
    ids = torch.zeros(2, 3, dtype=torch.long)
    with torch.no_grad():
        want = ref(target=x, target_mask=mask, cpm_mask=mask, series_ids=ids)
        q, loc, scale = sequence_quantiles(mine, x, mask)
    assert q.shape == (2, 3, 5, P, 9)
    torch.testing.assert_close(q, want.quantiles.permute(1, 2, 3, 4, 0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loc, want.loc[..., P - 1::P])
    torch.testing.assert_close(scale, want.scale[..., P - 1::P])
    assert float(q.std()) > 1e3 * 1e-5  # the knots spread far beyond the tolerance: not a trivial match


def test_the_last_position_is_the_forecasters_next_patch():
    """sinh(knots) * scale + loc of the last position = ``Toto2Model.quantiles`` for the patch after the context
    (the inference path, here without the short-context fallback and the cap), folded or not."""
    model = random_model(CONFIG, 4)
    x = _series(3, 4 * P, seed=2)
    mask = torch.ones_like(x, dtype=torch.bool)
    ids = torch.zeros(3, 3, dtype=torch.long)
    with torch.no_grad():
        q, loc, scale = sequence_quantiles(model, x, mask)
        real = q[:, :, -1].sinh() * scale[..., -1, None, None] + loc[..., -1, None, None]  # [B, V, P, 9]
        want = model.quantiles(x, mask, ids, 1)  # [9, B, V, P], sorted
        folded = random_model(CONFIG, 4).fold_scales().quantiles(x, mask, ids, 1)
    got = real.sort(-1).values.permute(3, 0, 1, 2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(got, folded, rtol=1e-5, atol=1e-4)
    with pytest.raises(Exception, match="unfolded"):
        sequence_quantiles(random_model(CONFIG, 4).fold_scales(), x, mask)


def test_pinball_by_hand():
    q = torch.tensor([[1.0] * 9, [float(i) for i in range(9)]])
    y = torch.tensor([2.0, 4.0])
    # y = 2 above every knot at 1: mean tau * 1 = 0.5; knots 0..8 around y = 4: sum tau_i (4 - i) for i < 4 plus
    # sum (1 - tau_i)(i - 4) for i > 4 = (0.4 + 0.6 + 0.6 + 0.4) + (0.4 + 0.6 + 0.6 + 0.4) = 4, mean 4 / 9
    torch.testing.assert_close(pinball(q, y), torch.tensor([0.5, 4 / 9]))
    assert QUANTILES == tuple(round(0.1 * i, 1) for i in range(1, 10))


def test_window_pinball_scores_the_next_patch_in_scaled_asinh_space():
    """By hand for one window: input = first 32 steps, target = the window shifted by one patch, each target
    step normalised by the loc/scale of the input patch that predicts it, then asinh."""
    model = random_model(CONFIG, 5)
    w = _series(1, 5 * P, seed=6)
    x, target = w[..., :4 * P], w[..., P:]
    with torch.no_grad():
        q, loc, scale = sequence_quantiles(model, x, torch.ones_like(x, dtype=torch.bool))
        y = ((target.view(1, 3, 4, P) - loc[..., None]) / (scale[..., None] + torch.finfo(torch.float32).eps)).asinh()
        tau = torch.tensor(QUANTILES)
        u = y[..., None] - q
        each = torch.where(u >= 0, tau * u, (tau - 1) * u).mean(-1).reshape(1, 3, 4 * P)
        torch.testing.assert_close(window_pinball(model, w)[0], each.mean())
        # window steps 32..35 are target steps 24..27
        torch.testing.assert_close(window_pinball(model, w, slice(32, 36))[0], each[..., 24:28].mean())


def test_lora_trains_only_the_attention_adapters_and_merges_to_the_same_function():
    """peft adds the adapter after ScaledLinear's u-μP factor; the merge divides by it, so merged = unmerged."""
    pytest.importorskip("peft")
    model = add_lora(random_model(CONFIG, 7), rank=4, seed=0, targets=("in_proj", "out_proj"))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert len(names) == 2 * 2 * CONFIG.num_layers
    assert all("lora_" in n and (".attn.in_proj." in n or ".attn.out_proj." in n) for n in names)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(8))
    w = _series(3, 5 * P, seed=9)
    with torch.no_grad():
        before = window_pinball(model, w)
        merged = merge_lora(model)
        after = window_pinball(merged, w)
    assert set(merged.state_dict()) == set(random_model(CONFIG, 7).state_dict())  # the public key layout again
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(after, window_pinball(random_model(CONFIG, 7), w))  # the adapters did change it


def _tune(tmp_path_factory, base, data_dir, name, *extra):
    out = tmp_path_factory.mktemp(name) / "tuned"
    code = main(["finetune", "--model", "toto2", "--weights", str(base), "--data-dir", str(data_dir), "--symbols",
                 "SYN", "--until", UNTIL, *TOTO2_TUNE, *extra, "--out", str(out)])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def full(tmp_path_factory, tiny_toto2, data_dir):
    return _tune(tmp_path_factory, tiny_toto2, data_dir, "toto2-full")


@pytest.fixture(scope="module")
def lora(tmp_path_factory, tiny_toto2, data_dir):
    pytest.importorskip("peft")
    return _tune(tmp_path_factory, tiny_toto2, data_dir, "toto2-lora", "--lora", "4")


def _oos_crps(weights) -> float:
    """Mean CRPS of the next close over every window after --until (decision bars 301..398)."""
    frame = planted()
    ends = list(range(301, len(frame) - 1))
    fc = Toto2Forecaster.from_pretrained(weights, compile="eager").forecast(make_batch(frame, ends, 32, 1), 1, 64)
    observed = frame["close"].to_numpy()[np.asarray(ends) + 1]
    return float(crps_ensemble(fc.samples[:, 0], observed[:, None]).mean())


def test_tuning_on_a_planted_pattern_lowers_validation_loss_and_out_of_sample_crps(full, tiny_toto2):
    record = json.loads((full / "tuning.json").read_text())
    loss = record["loss"]
    assert loss["validation"] < 0.5 * loss["base_validation"]  # pinball in scaled asinh space, held-out 10 %
    assert record["model"] == "toto2" and record["adapter"] == "full" and record["steps"] == 60
    assert record["best_step"] > 0 and [h["step"] for h in record["history"]] == [10, 20, 30, 40, 50, 60]
    assert record["until"] == UNTIL and record["symbols"]["SYN"]["bars"] == 301
    base, tuned = _oos_crps(tiny_toto2), _oos_crps(full)
    assert tuned < 0.7 * base, (tuned, base)


def test_lora_and_full_tuning_both_load_back_through_weights(full, lora, tiny_toto2, data_dir, tmp_path, capsys):
    base = load_file(str(tiny_toto2 / "model.safetensors"))
    for folder in (full, lora):
        state = load_file(str(folder / "model.safetensors"))
        assert set(state) == set(base)  # the public layout: adapters merged, scales unfolded, no lora_ keys
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "tuning.json"]
        assert json.loads((folder / "config.json").read_text()) == json.loads((tiny_toto2 / "config.json").read_text())
        forecaster = load_forecaster("toto2", weights=str(folder), compile="eager")
        assert forecaster.source == str(folder)
    # unfolded: the tuned tensors stay near the base's unit scale (folding would shrink them by ~1/sqrt(64))
    full_state = load_file(str(full / "model.safetensors"))
    key = "transformer.layers.0.attn.in_proj.weight"
    assert 0.8 < float(full_state[key].std()) / float(base[key].std()) < 1.25
    lora_state = load_file(str(lora / "model.safetensors"))
    changed = {k for k in base if not np.array_equal(base[k].numpy(), lora_state[k].numpy())}
    assert changed == {f"transformer.layers.{i}.attn.{m}.weight" for i in range(2) for m in ("in_proj", "out_proj")}
    record = json.loads((lora / "tuning.json").read_text())
    assert record["adapter"] == "lora rank 4 on in_proj, out_proj, merged into the weights"
    assert record["loss"]["validation"] < record["loss"]["base_validation"]
    capsys.readouterr()
    code = main(["backtest", "SYN", "--data-dir", str(data_dir), "--model", "toto2", "--weights", str(full),
                 "--start", "2021-02-01", "--end", "2021-03-05", "--samples", "8", "--context", "32",
                 "--output-dir", str(tmp_path / "bt")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: SYN: window 1 (decision bar 2021-02-01) is on or before {UNTIL}")
    assert not (tmp_path / "bt").exists()
    code = main(["backtest", "SYN", "--data-dir", str(data_dir), "--model", "toto2", "--weights", str(full),
                 "--start", "2021-02-25", "--end", "2021-03-16", "--samples", "16", "--context", "32",
                 "--output-dir", str(tmp_path / "bt")])
    assert code == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "bt" / "latest" / "SYN.json").read_text())["runs"] == 14
