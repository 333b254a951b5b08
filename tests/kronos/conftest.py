"""Tiny Kronos configs (fast on 2 CPU cores) and their upstream twins with the same weights."""

from __future__ import annotations

import pytest
import torch

from marketcast.forecast.kronos import Kronos, KronosConfig, KronosTokenizer, TokenizerConfig, from_config

TINY_TOKENIZER = TokenizerConfig(d_model=32, n_heads=4, ff_dim=64, n_enc_layers=2, n_dec_layers=2, s1_bits=4,
                                 s2_bits=4, group_size=4)
TINY_MODEL = KronosConfig(s1_bits=4, s2_bits=4, n_layers=2, d_model=32, n_heads=4, ff_dim=64, max_context=32)


def upstream_pair(model: Kronos, tokenizer: KronosTokenizer):
    """Upstream's classes (the vendored reference) holding our weights, loaded with strict=True."""
    from kronos_finance._vendor.kronos_model import Kronos as RefKronos
    from kronos_finance._vendor.kronos_model import KronosTokenizer as RefTokenizer

    ref_tok = RefTokenizer(**tokenizer.config.to_dict()).eval()
    ref_tok.load_state_dict(tokenizer.state_dict(), strict=True)
    cfg = model.config.to_dict()
    cfg.pop("max_context")
    ref_model = RefKronos(**cfg).eval()
    ref_model.load_state_dict(model.state_dict(), strict=True)
    return ref_model, ref_tok


def random_stamps(b: int, t: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    cols = [torch.randint(lo, hi, (b, t), generator=g) for lo, hi in ((0, 60), (0, 24), (0, 7), (1, 32), (1, 13))]
    return torch.stack(cols, -1)


@pytest.fixture(scope="session")
def tiny_model() -> Kronos:
    return from_config(Kronos, TINY_MODEL, seed=1)


@pytest.fixture(scope="session")
def tiny_tokenizer() -> KronosTokenizer:
    return from_config(KronosTokenizer, TINY_TOKENIZER, seed=2)


@pytest.fixture(scope="session")
def upstream(tiny_model, tiny_tokenizer):
    return upstream_pair(tiny_model, tiny_tokenizer)


@pytest.fixture(scope="session")
def sp500():
    from marketcast.data import load_symbol

    return load_symbol("SP500").frame


@pytest.fixture
def bars() -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randn(3, 20, 6, generator=g)
