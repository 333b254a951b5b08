"""Kronos (shiyu-coder/Kronos, MIT) rebuilt for marketcast: upstream-compatible weights, KV-cached decoding,
compile-once step functions, sample paths instead of a mean. See docs/kronos.md."""

from marketcast.forecast.kronos.config import MODELS, TOKENIZERS, KronosConfig, TokenizerConfig
from marketcast.forecast.kronos.forecaster import KronosForecaster, SeriesPaths, create
from marketcast.forecast.kronos.loading import from_config, from_pretrained, save_pretrained
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.tokenizer import KronosTokenizer

__all__ = ["MODELS", "TOKENIZERS", "Kronos", "KronosConfig", "KronosForecaster", "KronosTokenizer", "SeriesPaths",
           "TokenizerConfig", "create", "from_config", "from_pretrained", "save_pretrained"]
