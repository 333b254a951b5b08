"""Name -> forecaster factory, imported lazily so the baseline never pays for torch models, and the names cost
nothing: `marketcast --help` reads :data:`MODEL_NAMES` without numpy or pandas."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from marketcast.errors import ConfigError

if TYPE_CHECKING:  # the names alone cost no numpy/pandas: `marketcast --help` lists them
    from marketcast.forecast.base import Forecaster

# Each factory has the signature
#   create(*, weights: str | None, device: str, dtype: str, compile: str | None, seed: int) -> Forecaster
# weights: None/"auto" = the public checkpoint (HF cache or hub), a local folder, or "random".
# compile: None = read marketcast.runtime.compile_settings; "eager" = off; else a torch.compile mode.
FACTORIES = {
    "baseline": "marketcast.forecast.baseline:create",
    "toto": "marketcast.forecast.toto:create",
    "kronos": "marketcast.forecast.kronos:create",
    "toto2": "marketcast.forecast.toto2:create",
    # adapters through the models' official packages, optional extras (pip install 'marketcast[chronos]', ...):
    # their modules import the package only when the model is built, so listing them here costs nothing
    "chronos2": "marketcast.forecast.adapters.chronos2:create",
    "timesfm": "marketcast.forecast.adapters.timesfm:create",
    "tirex": "marketcast.forecast.adapters.tirex:create",
}
MODEL_NAMES = tuple(FACTORIES)
#: Upper limits of the work one forecast may ask for (``--samples`` paths, ``--horizon`` bars ahead), far above
#: any useful value (the defaults are 512 and 8): a bigger one is a typo that would run for hours or exhaust the
#: memory (``backtest --samples 1000000000``: 10^9 paths a window), refused in one line before any work.
MAX_SAMPLES = 100_000
MAX_HORIZON = 10_000

# Where each model's weights are found, by its loader's own resolution (a local folder, the HF cache offline, the hub
# online) without reading a tensor: each answers the folder or file, or raises the line its factory would.
LOCATORS = {
    "toto": "marketcast.forecast.toto.loading:locate",
    "kronos": "marketcast.forecast.kronos.loading:locate",
    "toto2": "marketcast.forecast.toto2.loading:locate",
    "chronos2": "marketcast.forecast.adapters.chronos2:locate",
    "timesfm": "marketcast.forecast.adapters.timesfm:locate",
    "tirex": "marketcast.forecast.adapters.tirex:locate",
}
# model -> (the package it imports, the extra that installs it); choosing one without it is one line, exit 2
OPTIONAL = {"chronos2": ("chronos", "chronos"), "timesfm": ("timesfm", "timesfm"), "tirex": ("tirex", "tirex")}


def installed(name: str) -> bool:
    """Whether model ``name`` can be built here: always for the in-project models, for an adapter when its
    extra's package is found (looked up, not imported)."""
    from marketcast.forecast.adapters.extras import installed as found

    return name not in OPTIONAL or found(OPTIONAL[name][0])


def check_installed(names) -> None:
    """Refuse, before anything runs, a chosen adapter whose extra is missing (the line its factory would say)."""
    from marketcast.forecast.adapters.extras import missing_message

    for name in names:
        if not installed(name):
            raise ConfigError(missing_message(OPTIONAL[name][0], OPTIONAL[name][1], name))


def missing(name: str, weights: str | None = None) -> str | None:
    """Why model ``name`` with ``weights`` cannot be built here (its extra is not installed, its weights are not
    found), in its loader's own words; None when it can. Nothing is loaded: a command checks every model it
    was asked for before it runs any (``models compare``)."""
    from marketcast.errors import ModelLoadError

    if not installed(name):
        from marketcast.forecast.adapters.extras import missing_message

        return missing_message(OPTIONAL[name][0], OPTIONAL[name][1], name)
    if name not in LOCATORS:  # the baseline: nothing to find
        return None
    module, attr = LOCATORS[name].split(":")
    try:
        getattr(import_module(module), attr)(weights)
    except (ConfigError, ModelLoadError) as exc:
        return str(exc)
    return None


def load_forecaster(
    name: str,
    *,
    weights: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    compile: str | None = None,
    seed: int = 0,
) -> Forecaster:
    """Build the named forecaster (one of :data:`MODEL_NAMES`); an adapter whose extra is missing raises the
    :class:`ConfigError` that names it."""
    if name not in FACTORIES:
        raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    module, attr = FACTORIES[name].split(":")
    factory = getattr(import_module(module), attr)
    return factory(weights=weights, device=device, dtype=dtype, compile=compile, seed=seed)


def import_models() -> None:
    """Import every model package, so that each has registered its public checkpoints with
    :mod:`marketcast.forecast.hub` (which never imports them itself). An adapter module never needs its extra
    to be imported; should one refuse all the same (a :class:`ConfigError` naming the extra), the other models
    still register: a missing extra breaks only the choice of that model."""
    for name, spec in FACTORIES.items():
        try:
            import_module(spec.split(":")[0])
        except ConfigError:
            if name not in OPTIONAL:
                raise
