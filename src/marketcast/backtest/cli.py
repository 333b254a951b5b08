"""``marketcast backtest`` (engine lands with the backtest issue)."""

from __future__ import annotations

from marketcast.errors import MarketcastError


def backtest() -> None:
    """Walk-forward backtest of every strategy on each symbol."""
    raise MarketcastError("backtest engine not built yet")
