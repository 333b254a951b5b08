"""What a strategy decides at bar t for bar t+1, and what it cost.

One vocabulary for the backtest and the live loop: a :class:`Decision` is settled against bar t+1 by
:func:`marketcast.backtest.fills.settle` in the backtest and by the paper broker in trading, with the same
rules, so a replay reproduces the backtest's fills.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from marketcast.backtest.costs import Costs  # noqa: F401  (re-exported: the costs live in costs.py)

LONG, FLAT, SHORT = 1, 0, -1


class Bar(NamedTuple):
    open: float
    high: float
    low: float
    close: float


@dataclass(frozen=True)
class Decision:
    """A position for bar t+1: ``side`` (+1 long, -1 short, 0 flat), entered at the open (market) or at
    ``entry_limit``; closed at ``take_profit`` if bar t+1 trades through it, else at bar t+1's close."""

    side: int = FLAT
    entry_limit: float | None = None
    take_profit: float | None = None

    def __post_init__(self) -> None:
        if self.side not in (LONG, FLAT, SHORT):
            raise ValueError(f"side must be -1, 0 or 1, got {self.side}")


@dataclass(frozen=True)
class Settlement:
    """The outcome of one decision on bar t+1. ``gross_return`` and ``fees`` are fractions of the entry price
    for the whole allowed capital; ``size`` (:mod:`marketcast.backtest.sizing`, 1.0 = fixed) is the part of it
    the trade used, so the net return on capital is ``size * (gross - fees)``: costs scale with the size."""

    filled: bool
    entry_price: float | None = None
    exit_price: float | None = None
    exit_reason: str | None = None  # "take_profit" | "close" | "next_open" (marketcast.backtest.execution)
    gross_return: float = 0.0
    fees: float = 0.0
    size: float = 1.0

    @property
    def net_return(self) -> float:
        return self.size * (self.gross_return - self.fees)  # 1.0 * x == x exactly: fixed sizing is unchanged


NO_FILL = Settlement(filled=False)
