"""Forecasters: one protocol, a weight-free baseline, Toto and Kronos."""

from marketcast.forecast.aggregate import aggregate, quantile, validate_spec
from marketcast.forecast.base import (
    INPUT_FIELDS,
    OUTPUT_FIELDS,
    ContextBatch,
    Forecast,
    Forecaster,
    make_batch,
)
from marketcast.forecast.registry import MODEL_NAMES, load_forecaster

__all__ = [
    "INPUT_FIELDS",
    "OUTPUT_FIELDS",
    "MODEL_NAMES",
    "ContextBatch",
    "Forecast",
    "Forecaster",
    "aggregate",
    "load_forecaster",
    "make_batch",
    "quantile",
    "validate_spec",
]
