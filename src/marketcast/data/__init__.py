"""OHLCV bars: loading, validation, the embedded default dataset."""

from marketcast.data.asset import ASSET_CLASSES, classify, explain_asset_class, infer_asset_class
from marketcast.data.bars import PRICE_COLUMNS, Bars
from marketcast.data.calendar import annualise, calendar_for, infer_interval
from marketcast.data.embedded import DEFAULT_SYMBOLS, load_embedded, load_symbol
from marketcast.data.load import load_bars

__all__ = [
    "ASSET_CLASSES",
    "DEFAULT_SYMBOLS",
    "PRICE_COLUMNS",
    "Bars",
    "annualise",
    "calendar_for",
    "classify",
    "explain_asset_class",
    "infer_interval",
    "infer_asset_class",
    "load_bars",
    "load_embedded",
    "load_symbol",
]
