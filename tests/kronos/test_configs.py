"""Public configs: parameter counts (built on the meta device) and upstream-identical state_dict keys."""

from __future__ import annotations

import pytest
import torch

from marketcast.forecast.kronos import MODELS, TOKENIZERS, Kronos, KronosTokenizer

PARAMS = {"Kronos-mini": 4_108_032, "Kronos-small": 24_741_376, "Kronos-base": 102_310_592,
          "Kronos-Tokenizer-base": 3_958_042}


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", ["Kronos-mini", "Kronos-small", "Kronos-base"])
def test_model_parameter_counts(name):
    with torch.device("meta"):
        assert count(Kronos(MODELS[name])) == PARAMS[name]


def test_tokenizer_parameter_count():
    with torch.device("meta"):
        assert count(KronosTokenizer(TOKENIZERS["Kronos-Tokenizer-base"])) == PARAMS["Kronos-Tokenizer-base"]
        assert count(KronosTokenizer(TOKENIZERS["Kronos-Tokenizer-2k"])) == PARAMS["Kronos-Tokenizer-base"]


def test_state_dict_layout_matches_upstream():
    from kronos_finance._vendor.kronos_model import Kronos as RefKronos
    from kronos_finance._vendor.kronos_model import KronosTokenizer as RefTokenizer

    cfg = MODELS["Kronos-small"].to_dict()
    cfg.pop("max_context")
    with torch.device("meta"):
        pairs = [(Kronos(MODELS["Kronos-small"]), RefKronos(**cfg)),
                 (KronosTokenizer(TOKENIZERS["Kronos-Tokenizer-base"]),
                  RefTokenizer(**TOKENIZERS["Kronos-Tokenizer-base"].to_dict()))]
    for ours, ref in pairs:
        shapes = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
        assert shapes == {k: tuple(v.shape) for k, v in ref.state_dict().items()}


def test_fixed_time_embedding_layout_matches_upstream():
    from dataclasses import replace

    from kronos_finance._vendor.kronos_model import Kronos as RefKronos

    cfg = replace(MODELS["Kronos-mini"], learn_te=False)
    kwargs = cfg.to_dict()
    kwargs.pop("max_context")
    with torch.device("meta"):
        assert set(Kronos(cfg).state_dict()) == set(RefKronos(**kwargs).state_dict())
