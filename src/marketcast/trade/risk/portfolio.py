"""Turn gated signals into sized orders under position, exposure and per-symbol caps.

Exposure is gross (|qty| * price) as a fraction of equity; what the loop already holds or has working
(open orders included) counts against every cap before anything new is added.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Mapping

from marketcast.trade.risk.rules import round_qty

if TYPE_CHECKING:  # the loop hands its signals down; policy never imports the loop
    from marketcast.trade.loop.planner import Signal


@dataclass(frozen=True)
class PortfolioConfig:
    max_positions: int = 5
    max_exposure: float = 1.2  # gross exposure cap, fraction of equity (120 %)
    per_symbol_cap: float = 0.5  # one symbol's notional at most this fraction of equity


@dataclass(frozen=True)
class Allocation:
    signal: Signal
    qty: float
    price: float  # the entry limit (or close for market entries) used for sizing

    @property
    def notional(self) -> float:
        return self.qty * self.price


def allocate(
    signals: list[Signal],
    equity: float,
    cfg: PortfolioConfig,
    held_exposure: float = 0.0,
    held_symbols: frozenset[str] = frozenset(),
    steps: Mapping[str, Decimal] | None = None,
    prices: Mapping[str, float] | None = None,
    cap: float | None = None,
    power: Mapping[str, float] | None = None,
    draws: Mapping[str, float] | None = None,
) -> list[Allocation]:
    """Best edge first; each new position gets ``min(per_symbol_cap, remaining exposure / slots)`` of
    equity, at most ``cap`` (the risk limits' notional per order and per symbol), times the signal's ``size``
    (its sizing policy's fraction, 1.0 for fixed; so never more than those caps), rounded down to the symbol's
    quantity step (``steps``, whole units if not given). ``prices`` are the entry prices as the broker will get
    them (on its grid); else the decision's limit or close. Symbols already held or working are skipped.
    ``power`` is the buying power a symbol's entry may draw on at the broker (for crypto the non-marginable
    one, cash), less what the entries before it here draw; ``draws`` what one unit of it draws (the price, for
    a short what the broker values it at)."""
    if equity <= 0:
        return []
    fresh = [s for s in signals if s.symbol not in held_symbols]
    fresh.sort(key=lambda s: (-s.metrics.get("edge", 0.0), s.symbol))
    slots = max(0, cfg.max_positions - len(held_symbols))
    chosen = fresh[:slots]
    remaining = max(0.0, cfg.max_exposure * equity - held_exposure)
    out, drawn = [], 0.0
    for i, s in enumerate(chosen):
        budget = min(cfg.per_symbol_cap * equity, remaining / (len(chosen) - i), cap if cap else float("inf"))
        price = (prices or {}).get(s.symbol) or (s.decision.entry_limit if s.decision.entry_limit is not None
                                                  else s.close)
        unit = (draws or {}).get(s.symbol) or price
        size = budget / price * s.size  # the planner's size fraction (1.0: fixed sizing, the whole budget)
        if power is not None and s.symbol in power:
            size = min(size, max(0.0, power[s.symbol] - drawn) / unit)
        qty = round_qty(size, (steps or {}).get(s.symbol, Decimal(1)))
        if qty <= 0:
            continue
        out.append(Allocation(s, qty, price))
        remaining -= qty * price
        drawn += qty * unit
    return out
