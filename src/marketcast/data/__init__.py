"""OHLCV bars: loading, validation, the embedded default dataset."""

from marketcast.data.asset import DEFAULT_FEE, PERIODS_PER_YEAR, infer_asset_class
from marketcast.data.bars import PRICE_COLUMNS, Bars

__all__ = ["DEFAULT_FEE", "PERIODS_PER_YEAR", "PRICE_COLUMNS", "Bars", "infer_asset_class"]
