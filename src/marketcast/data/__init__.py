"""OHLCV bars: loading, validation, the embedded default dataset."""

from marketcast.data.asset import DEFAULT_FEE, PERIODS_PER_YEAR, infer_asset_class
from marketcast.data.bars import PRICE_COLUMNS, Bars
from marketcast.data.embedded import DEFAULT_SYMBOLS, load_embedded, load_symbol
from marketcast.data.load import load_bars

__all__ = [
    "DEFAULT_FEE",
    "DEFAULT_SYMBOLS",
    "PERIODS_PER_YEAR",
    "PRICE_COLUMNS",
    "Bars",
    "infer_asset_class",
    "load_bars",
    "load_embedded",
    "load_symbol",
]
