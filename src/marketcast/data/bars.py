"""The one bar schema every part of marketcast reads."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from marketcast.data.asset import PERIODS_PER_YEAR

PRICE_COLUMNS = ("open", "high", "low", "close")


@dataclass(frozen=True)
class Bars:
    """OHLCV bars of one symbol.

    ``frame`` has a UTC ``DatetimeIndex`` named ``timestamp`` (strictly increasing) and float64 columns
    ``open, high, low, close`` plus ``volume`` when the source had it.
    """

    symbol: str
    frame: pd.DataFrame
    asset_class: str = "stock"  # "stock" | "crypto"
    source: str = ""

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def periods_per_year(self) -> int:
        return PERIODS_PER_YEAR[self.asset_class]

    @property
    def is_crypto(self) -> bool:
        return self.asset_class == "crypto"

    def head(self, n: int) -> "Bars":
        """The first ``n`` bars (used to cut history at a decision bar)."""
        return Bars(self.symbol, self.frame.iloc[:n], self.asset_class, self.source)

    def slice(self, start, end) -> "Bars":
        """Bars with timestamps in [start, end] (inclusive, label based)."""
        return Bars(self.symbol, self.frame.loc[start:end], self.asset_class, self.source)
