"""Name -> forecaster factory, imported lazily so the baseline never pays for torch models."""

from __future__ import annotations

from importlib import import_module

from marketcast.errors import ConfigError
from marketcast.forecast.base import Forecaster

# Each factory has the signature
#   create(*, weights: str | None, device: str, dtype: str, compile: str | None, seed: int) -> Forecaster
# weights: None/"auto" = the public checkpoint (HF cache or hub), a local folder, or "random".
# compile: None = read marketcast.runtime.settings; "eager" = off; else a torch.compile mode.
FACTORIES = {
    "baseline": "marketcast.forecast.baseline:create",
    "toto": "marketcast.forecast.toto:create",
    "kronos": "marketcast.forecast.kronos:create",
    "toto2": "marketcast.forecast.toto2:create",
}
MODEL_NAMES = tuple(FACTORIES)


def load_forecaster(
    name: str,
    *,
    weights: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    compile: str | None = None,
    seed: int = 0,
) -> Forecaster:
    """Build the named forecaster (``baseline``, ``toto``, ``kronos`` or ``toto2``)."""
    if name not in FACTORIES:
        raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    module, attr = FACTORIES[name].split(":")
    factory = getattr(import_module(module), attr)
    return factory(weights=weights, device=device, dtype=dtype, compile=compile, seed=seed)


def import_models() -> None:
    """Import every model package, so that each has registered its public checkpoints with
    :mod:`marketcast.forecast.hub` (which never imports them itself)."""
    for spec in FACTORIES.values():
        import_module(spec.split(":")[0])
