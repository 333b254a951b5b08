"""Datadog Toto (Toto-Open-Base-1.0) with a static KV cache, shape buckets and guarded torch.compile."""

from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.forecaster import TotoForecaster, create
from marketcast.forecast.toto.model import TotoModel

__all__ = ["TotoConfig", "TotoForecaster", "TotoModel", "create"]
