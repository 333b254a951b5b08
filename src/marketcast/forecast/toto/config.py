"""Toto architecture settings, read from and written to the public ``config.json`` format."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from marketcast.errors import ModelLoadError

SCALER_CLS = "<class 'model.scaler.CausalPatchStdMeanScaler'>"
MIXTURE_CLS = "<class 'model.distribution.MixtureOfStudentTsOutput'>"


@dataclass(frozen=True)
class TotoConfig:
    """The fields of Toto-Open-Base-1.0's ``config.json``; defaults are that checkpoint's values."""

    patch_size: int = 64
    stride: int = 64
    embed_dim: int = 768
    num_layers: int = 12
    num_heads: int = 12
    mlp_hidden_dim: int = 3072
    dropout: float = 0.1
    spacewise_every_n_layers: int = 12
    spacewise_first: bool = False
    k_components: int = 24
    stabilize_with_global: bool = True
    scale_factor_exponent: float = 10.0
    use_memory_efficient_attention: bool = True  # kept for round-tripping; the math is the same either way
    min_scale: float = 0.1  # CausalPatchStdMeanScaler's default minimum_scale
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        problems = []
        if self.patch_size != self.stride:
            problems.append(f"patch_size {self.patch_size} != stride {self.stride} (only non-overlapping patches)")
        if self.embed_dim % self.num_heads or (self.embed_dim // self.num_heads) % 2:
            problems.append(f"embed_dim {self.embed_dim} must split into {self.num_heads} heads of even size")
        n = self.spacewise_every_n_layers
        if n != -1 and (n < 1 or self.num_layers % n):
            problems.append(f"num_layers {self.num_layers} is not a multiple of spacewise_every_n_layers {n}")
        if min(self.patch_size, self.embed_dim, self.num_layers, self.mlp_hidden_dim, self.k_components) < 1:
            problems.append("sizes must be positive")
        if problems:
            raise ModelLoadError(f"invalid Toto config: {'; '.join(problems)}; fix config.json")

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    def layer_axes(self) -> list[str]:
        """'time' or 'space' per layer, as toto-ts's Transformer lays them out."""
        n = self.spacewise_every_n_layers
        if n == -1:
            return ["time"] * self.num_layers
        block = ["time"] * (n - 1)
        block = ["space", *block] if self.spacewise_first else [*block, "space"]
        return block * (self.num_layers // n)

    @classmethod
    def base(cls) -> "TotoConfig":
        """Toto-Open-Base-1.0 (151,306,080 parameters)."""
        return cls()

    @classmethod
    def tiny(cls, **overrides) -> "TotoConfig":
        """A small config with the same structure (time-wise layers, space-wise last) for tests."""
        values = dict(embed_dim=64, num_layers=3, num_heads=4, mlp_hidden_dim=128, spacewise_every_n_layers=3,
                      k_components=4)
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict:
        """The public ``config.json`` layout (what toto-ts's ``Toto(**config)`` accepts)."""
        d = asdict(self)
        d.pop("extra")
        d.pop("min_scale")
        d["output_distribution_kwargs"] = {"k_components": d.pop("k_components")}
        d["scaler_cls"] = SCALER_CLS
        d["output_distribution_classes"] = [MIXTURE_CLS]
        return {**self.extra, **d}

    @classmethod
    def from_dict(cls, raw: dict, source: str = "config") -> "TotoConfig":
        known = {f for f in cls.__dataclass_fields__ if f not in ("extra", "k_components", "min_scale")}
        raw = dict(raw)
        scaler = raw.pop("scaler_cls", SCALER_CLS)
        if "CausalPatchStdMeanScaler" not in str(scaler):
            raise ModelLoadError(f"{source}: scaler_cls {scaler!r} is not supported (only CausalPatchStdMeanScaler)")
        outputs = raw.pop("output_distribution_classes", [MIXTURE_CLS])
        if not outputs or "MixtureOfStudentTsOutput" not in str(outputs[0]):
            raise ModelLoadError(f"{source}: output_distribution_classes {outputs!r} is not supported "
                                 "(only MixtureOfStudentTsOutput)")
        kwargs = raw.pop("output_distribution_kwargs", None) or {}
        values = {k: raw.pop(k) for k in list(raw) if k in known}
        if "k_components" not in kwargs:
            raise ModelLoadError(f"{source}: output_distribution_kwargs.k_components is missing")
        try:
            return cls(**values, k_components=int(kwargs["k_components"]), extra=raw)
        except TypeError as exc:
            raise ModelLoadError(f"{source}: {exc}") from exc

    @classmethod
    def from_file(cls, path: str | Path) -> "TotoConfig":
        p = Path(path)
        try:
            raw = json.loads(p.read_text())
        except FileNotFoundError:
            raise ModelLoadError(f"{p}: config.json not found; put Toto's config.json next to model.safetensors") from None
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{p}: not a readable JSON config ({exc}); download config.json again") from None
        if not isinstance(raw, dict):
            raise ModelLoadError(f"{p}: expected a JSON object; download config.json again")
        return cls.from_dict(raw, str(p))

