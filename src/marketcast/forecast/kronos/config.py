"""Kronos and Kronos-Tokenizer hyper-parameters, named like the public ``config.json`` files.

The public checkpoints were saved with ``PyTorchModelHubMixin``, so their ``config.json`` holds the
constructor arguments of upstream's classes; the field names below are exactly those keys.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from marketcast.errors import ModelLoadError


@dataclass(frozen=True)
class _Config:
    @classmethod
    def from_dict(cls, data: dict, source: str = "config"):
        """Build from a ``config.json`` dict: unknown keys are ignored, missing ones are an error."""
        names = [f.name for f in fields(cls) if f.name not in _OPTIONAL]
        missing = [n for n in names if n not in data]
        if missing:
            raise ModelLoadError(f"{source}: missing key(s) {', '.join(missing)}; this is not a {cls.__name__[:-6]} "
                                 "config.json (compare with the public NeoQuasar/Kronos-* files)")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    @classmethod
    def from_file(cls, path: str | Path):
        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(f"{path}: config.json not found; the folder must hold config.json and "
                                 "model.safetensors")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{path}: unreadable config.json ({exc}); download it again") from None
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict:
        return asdict(self)


_OPTIONAL = {"ffn_dropout_p", "attn_dropout_p", "resid_dropout_p", "token_dropout_p", "max_context"}


@dataclass(frozen=True)
class TokenizerConfig(_Config):
    """Kronos-Tokenizer: a causal encoder/decoder around a binary spherical quantizer (s1 + s2 bits)."""

    d_in: int = 6
    d_model: int = 256
    n_heads: int = 4
    ff_dim: int = 512
    n_enc_layers: int = 4
    n_dec_layers: int = 4
    s1_bits: int = 10
    s2_bits: int = 10
    beta: float = 0.05
    gamma0: float = 1.0
    gamma: float = 1.1
    zeta: float = 0.05
    group_size: int = 4
    ffn_dropout_p: float = 0.0
    attn_dropout_p: float = 0.0
    resid_dropout_p: float = 0.0


@dataclass(frozen=True)
class KronosConfig(_Config):
    """Kronos decoder-only predictor over (s1, s2) token pairs; ``max_context`` is not in upstream's file."""

    s1_bits: int = 10
    s2_bits: int = 10
    n_layers: int = 8
    d_model: int = 512
    n_heads: int = 8
    ff_dim: int = 1024
    learn_te: bool = True
    ffn_dropout_p: float = 0.0
    attn_dropout_p: float = 0.0
    resid_dropout_p: float = 0.0
    token_dropout_p: float = 0.0
    max_context: int = 512


TOKENIZERS = {
    "Kronos-Tokenizer-base": TokenizerConfig(),
    "Kronos-Tokenizer-2k": TokenizerConfig(group_size=5),
}
MODELS = {
    "Kronos-mini": KronosConfig(n_layers=4, d_model=256, n_heads=4, ff_dim=512, max_context=2048),
    "Kronos-small": KronosConfig(),
    "Kronos-base": KronosConfig(n_layers=12, d_model=832, n_heads=16, ff_dim=2048),
}
# which tokenizer each public model was trained with
TOKENIZER_OF = {"Kronos-mini": "Kronos-Tokenizer-2k", "Kronos-small": "Kronos-Tokenizer-base",
                "Kronos-base": "Kronos-Tokenizer-base"}
HUB_OWNER = "NeoQuasar"
