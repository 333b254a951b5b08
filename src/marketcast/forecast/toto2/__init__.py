"""Datadog Toto 2.0 in-project: u-μP transformer, nine quantiles, weight-compatible with ``toto-2``."""

from marketcast.forecast.toto2.config import QUANTILES, Toto2Config
from marketcast.forecast.toto2.forecaster import Toto2Forecaster, create
from marketcast.forecast.toto2.model import Toto2Model

__all__ = ["QUANTILES", "Toto2Config", "Toto2Forecaster", "Toto2Model", "create"]
