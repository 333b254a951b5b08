"""Kronos fine-tuning: token cross-entropy against the inference path, and the command end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file

from marketcast.commands import main
from marketcast.finetune.kronos import kronos_features, kronos_stamps, token_ce
from marketcast.forecast.kronos import Kronos, KronosConfig, KronosTokenizer, TokenizerConfig, from_config
from marketcast.forecast.kronos.loading import save_pretrained
from marketcast.forecast.registry import load_forecaster
from tests.finetune.conftest import TUNE, UNTIL, planted

TOKENIZER = TokenizerConfig(d_model=32, n_heads=4, ff_dim=64, n_enc_layers=2, n_dec_layers=2, s1_bits=4, s2_bits=4,
                            group_size=4)
MODEL = KronosConfig(s1_bits=4, s2_bits=4, n_layers=2, d_model=32, n_heads=4, ff_dim=64, max_context=512)


@pytest.fixture(scope="module")
def kronos_base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kronos") / "kronos-tiny"
    save_pretrained(from_config(Kronos, MODEL, 1), folder / "model")
    save_pretrained(from_config(KronosTokenizer, TOKENIZER, 2), folder / "tokenizer")
    return folder


def test_features_and_stamps_are_the_forecasters_inputs():
    frame = planted(5)
    x = kronos_features(frame)
    assert x.shape == (6, 5)
    np.testing.assert_allclose(x[5], 1000.0 * frame[["open", "high", "low", "close"]].mean(axis=1), rtol=1e-6)
    stamps = kronos_stamps(frame.index)
    assert stamps.tolist()[0] == [0, 0, 2, 1, 1]  # 2020-01-01: minute, hour, Wednesday, day 1, January


def test_token_ce_equals_the_inference_paths_cross_entropy_step_by_step():
    """Teacher-forced training in one pass = for each t, the forecaster's decode_s1 on tokens <= t and its
    decode_s2 queried with the true next s1, scored against the true next tokens."""
    model = from_config(Kronos, MODEL, 3)
    tokenizer = from_config(KronosTokenizer, TOKENIZER, 4)
    frame = planted(40)
    values = torch.from_numpy(kronos_features(frame)[None].repeat(2, 0))
    values[1] *= 1.0 + 0.01 * torch.arange(40)  # a second, different window
    stamps = torch.from_numpy(kronos_stamps(frame.index)[None].repeat(2, 0))
    context = 24
    got = token_ce(model, tokenizer, values, stamps, context)
    scored = token_ce(model, tokenizer, values, stamps, context, slice(24, 28))

    x = values.transpose(1, 2)
    mean, std = x[:, :context].mean(1, keepdim=True), x[:, :context].std(1, unbiased=False, keepdim=True)
    s1, s2 = tokenizer.encode(((x - mean) / (std + 1e-5)).clamp(-5, 5))
    ce = []
    with torch.no_grad():
        for t in range(39):
            logits1, hidden = model.decode_s1(s1[:, :t + 1], s2[:, :t + 1], stamps[:, :t + 1])
            logits2 = model.decode_s2(hidden, s1[:, t + 1:t + 2])
            ce.append((F.cross_entropy(logits1[:, -1], s1[:, t + 1], reduction="none")
                       + F.cross_entropy(logits2[:, -1], s2[:, t + 1], reduction="none")) / 2)
    ce = torch.stack(ce, 1)
    torch.testing.assert_close(got, ce.mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scored, ce[:, 23:27].mean(1), rtol=1e-5, atol=1e-5)  # bars 24..27 = tokens 23..26


def test_kronos_tuning_lowers_validation_loss_and_loads_back(kronos_base, data_dir, tmp_path, capsys):
    pytest.importorskip("peft")
    out = tmp_path / "tuned"
    assert main(["finetune", "--model", "kronos", "--weights", str(kronos_base), "--data-dir", str(data_dir),
                 "--symbols", "SYN", "--until", UNTIL, *TUNE, "--lora", "4", "--out", str(out)]) == 0
    record = json.loads((out / "tuning.json").read_text())
    assert record["loss"]["validation"] < record["loss"]["base_validation"] - 0.5  # nats per token
    assert record["adapter"] == "lora rank 4 on q_proj, k_proj, v_proj, out_proj, merged into the weights"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "model/config.json", "model/model.safetensors", "tokenizer/config.json", "tokenizer/model.safetensors",
        "tuning.json"]
    for sub in ("model", "tokenizer"):  # the record in both headers too
        with safe_open(str(out / sub / "model.safetensors"), framework="pt") as handle:
            assert json.loads(handle.metadata()["marketcast.tuning"]) == record
    tuned_tok, base_tok = (load_file(str(f / "tokenizer" / "model.safetensors")) for f in (out, kronos_base))
    assert set(tuned_tok) == set(base_tok) and all(torch.equal(tuned_tok[k], base_tok[k]) for k in base_tok)  # frozen
    forecaster = load_forecaster("kronos", weights=str(out), compile="eager")
    assert forecaster.name == "kronos"
    capsys.readouterr()
    code = main(["backtest", "SYN", "--data-dir", str(data_dir), "--model", "kronos", "--weights", str(out),
                 "--start", "2021-02-01", "--end", "2021-03-05", "--samples", "8", "--context", "32",
                 "--output-dir", str(tmp_path / "bt")])
    assert code == 2 and capsys.readouterr().err.startswith("error: SYN: window 1 (decision bar 2021-02-01) is on "
                                                             f"or before {UNTIL}")


def test_a_kronos_window_longer_than_its_context_is_refused(kronos_base, data_dir, tmp_path, capsys):
    code = main(["finetune", "--model", "kronos", "--weights", str(kronos_base), "--data-dir", str(data_dir),
                 "--symbols", "SYN", "--until", UNTIL, "--context", "510", "--horizon", "4", "--out",
                 str(tmp_path / "t")])
    assert code == 2  # the bars are checked first, before the weights load: 301 bars cannot hold such a window
    err = capsys.readouterr().err
    assert err.startswith("error: --until 2021-02-24 leaves 301 bars of SYN") and "a --context of 510" in err
    assert err.count("\n") == 1
