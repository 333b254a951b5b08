"""Forecasters: one protocol, a weight-free baseline, Toto, Kronos and the adapters.

The names below are imported on first use (PEP 562), so that ``marketcast.forecast.registry`` alone (the model
names ``marketcast --help`` lists) does not import numpy and pandas with the package.
"""

from __future__ import annotations

from importlib import import_module

#: ``aggregate`` (the function) is not among them: the submodule of that name would shadow it once imported, so
#: import it from :mod:`marketcast.forecast.aggregate`.
_WHERE = {
    "quantile": "aggregate", "validate_spec": "aggregate",
    "INPUT_FIELDS": "base", "OUTPUT_FIELDS": "base", "ContextBatch": "base", "Forecast": "base",
    "Forecaster": "base", "make_batch": "base",
    "MODEL_NAMES": "registry", "load_forecaster": "registry",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
