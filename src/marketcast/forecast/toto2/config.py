"""Toto 2.0 architecture settings in the public ``config.json`` layout (the fields of toto-2's
``Toto2ModelConfig``), with the derived sizes it fills in and the two sizes the tests and benchmarks use."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from marketcast.errors import ModelLoadError

QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the output head's fixed knots
# Keys that must be present for a config.json to describe a Toto 2.0 model (Toto 1.0's has embed_dim /
# spacewise_every_n_layers instead, Kronos's d_model without layer groups): the architecture check.
REQUIRED = ("patch_size", "d_model", "num_heads", "num_layers", "layer_group_size",
            "num_variate_layers_per_group", "variate_layer_first", "residual_attn_ratio")


def attn_ratio(context_length: int, patch_size: int) -> float:
    """``sqrt(S / log S)`` with ``S`` context patches: toto-2's residual attention ratio rule."""
    s = context_length / patch_size
    return math.sqrt(s / math.log(s))


@dataclass(frozen=True)
class Toto2Config:
    """The fields of a Toto 2.0 ``config.json``; ``None`` sizes are derived as toto-2 derives them."""

    patch_size: int
    d_model: int
    num_heads: int
    num_layers: int
    layer_group_size: int
    num_variate_layers_per_group: int
    variate_layer_first: bool
    residual_attn_ratio: float
    dropout_p: float = 0.0
    norm_eps: float = 5e-5
    attn_bias: bool = False
    mlp_bias: bool = False
    num_output_patches: int = 1
    pre_norm: bool = True
    d_ff: int | None = None
    qk_dim: int | None = None
    v_dim: int | None = None
    num_groups: int | None = None
    heads_per_group: int | None = None
    residual_mult: float = 1.0
    qk_norm: bool = True
    norm_include_weight: bool = False
    qk_norm_include_weight: bool | None = None
    per_dim_scale: bool = False
    use_xpos: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        fill = object.__setattr__
        if self.d_ff is None:
            fill(self, "d_ff", (int(4 * self.d_model * 2 / 3) + 7) // 8 * 8)
        if self.qk_norm_include_weight is None:
            fill(self, "qk_norm_include_weight", self.norm_include_weight)
        fill(self, "num_groups", self.num_groups or self.num_heads)
        fill(self, "qk_dim", self.qk_dim or self.d_model // max(self.num_heads, 1))
        fill(self, "v_dim", self.v_dim or self.qk_dim)
        problems = []
        if min(self.patch_size, self.d_model, self.num_heads, self.num_layers, self.layer_group_size) < 1:
            problems.append("sizes must be positive")
        elif self.num_layers % self.layer_group_size:
            problems.append(f"num_layers {self.num_layers} is not a multiple of layer_group_size "
                            f"{self.layer_group_size}")
        elif self.d_model % self.num_heads or self.num_heads % self.num_groups:
            problems.append(f"d_model {self.d_model}, num_heads {self.num_heads} and num_groups {self.num_groups} "
                            "do not divide")
        elif not 0 <= self.num_variate_layers_per_group <= self.layer_group_size:
            problems.append(f"num_variate_layers_per_group {self.num_variate_layers_per_group} is outside "
                            f"0..{self.layer_group_size}")
        if self.dropout_p != 0.0 or self.num_output_patches != 1 or not self.pre_norm:
            problems.append("only dropout_p 0, num_output_patches 1 and pre_norm true are supported")
        if problems:
            raise ModelLoadError(f"invalid Toto 2.0 config: {'; '.join(problems)}; fix config.json")
        fill(self, "heads_per_group", self.num_heads // self.num_groups)

    def variate_layers(self) -> list[bool]:
        """Per layer: True for variate (across series) attention, False for time attention."""
        g, n = self.layer_group_size, self.num_variate_layers_per_group
        if self.variate_layer_first:
            return [i % g < n for i in range(self.num_layers)]
        return [i % g >= g - n for i in range(self.num_layers)]

    @classmethod
    def size(cls, name: str) -> "Toto2Config":
        """``4m`` or ``22m``: the architectures of Datadog/Toto-2.0-4m and Datadog/Toto-2.0-22m.

        4m is the published checkpoint's config.json (4,144,448 parameters). The hub is not reachable from this
        project's machines, so ``22m`` is pieced together: the toto-2 wheel ships no configs, tests or model
        cards (only the sizes' names), and public code that copies the five hub config.json files gives 22m as
        d_model 512, d_ff 1368 (the derived default), 8 heads (= groups) of 64, 6 layers in ONE group of 6
        (one variate layer, the last), norm_eps 1e-4, the 4m flags otherwise. Every size there has
        layer_group_size = num_layers (2.5B: 48 and 48, as an independent Rust port's defaults also say), its
        4m entry matches the real 4m file, and its shapes give 4.1M / 21.9M / 313M / 1.02B / 2.42B parameters,
        the published names. 22m here: 21,915,584 parameters, 84 MiB in float32. Load the real checkpoint with
        ``--weights`` and its own config.json is used instead.
        """
        base = dict(patch_size=32, num_heads=4, num_layers=4, layer_group_size=4, num_variate_layers_per_group=1,
                    variate_layer_first=False, residual_attn_ratio=attn_ratio(4096, 32), norm_eps=1e-4,
                    attn_bias=True, mlp_bias=False, qk_norm=False, per_dim_scale=True, use_xpos=True,
                    residual_mult=0.75)
        sizes = {"4m": dict(d_model=256, d_ff=688),
                 "22m": dict(d_model=512, num_heads=8, num_layers=6, layer_group_size=6)}
        if name not in sizes:
            raise ModelLoadError(f"unknown Toto 2.0 size {name!r}; use one of {', '.join(sizes)}")
        return cls(**{**base, **sizes[name]})

    def to_dict(self) -> dict:
        d = asdict(self)
        return {**d.pop("extra"), **d}

    @classmethod
    def from_dict(cls, raw: dict, source: str = "config") -> "Toto2Config":
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise ModelLoadError(f"{source}: not a Toto 2.0 config.json (no {', '.join(missing)}); pass Toto 2.0 "
                                 "weights (e.g. Datadog/Toto-2.0-22m) to --model toto2")
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in raw.items() if k in known}
        try:
            return cls(**values, extra={k: v for k, v in raw.items() if k not in known})
        except TypeError as exc:
            raise ModelLoadError(f"{source}: {exc}") from None

    @classmethod
    def from_file(cls, path: str | Path) -> "Toto2Config":
        p = Path(path)
        try:
            raw = json.loads(p.read_text())
        except FileNotFoundError:
            raise ModelLoadError(f"{p}: config.json not found; put Toto 2.0's config.json next to "
                                 "model.safetensors") from None
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{p}: not a readable JSON config ({exc}); download config.json again") from None
        if not isinstance(raw, dict):
            raise ModelLoadError(f"{p}: expected a JSON object; download config.json again")
        return cls.from_dict(raw, str(p))
