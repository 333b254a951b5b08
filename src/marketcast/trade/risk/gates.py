"""Entry gates: a signal becomes an order only if every one of these passes.

Each failing gate adds a reason, so the dry-run plan and the records say why a symbol was skipped. The
quote's gates (``require_quote``, its age and spread) are in :mod:`marketcast.trade.risk.freshness`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from marketcast.backtest.orders import FLAT

if TYPE_CHECKING:  # the loop hands its signals down; risk never imports the loop
    from marketcast.trade.loop.planner import Signal


@dataclass(frozen=True)
class GateConfig:
    min_edge: float = 0.001  # expected return after round-trip costs, as a fraction
    min_sharpe: float = 0.0  # walk-forward Sharpe of the chosen strategy must exceed this
    max_drawdown: float = 0.25  # walk-forward drawdown must stay below this
    min_dollar_volume: float = 1_000_000.0  # mean close * volume over the last 20 bars
    require_quote: bool = True  # with ADD_LATEST on a broker that has quotes: no entry without a real one


@dataclass(frozen=True)
class GateResult:
    passed: bool
    reasons: tuple[str, ...] = ()


def dollar_volume(close: np.ndarray, volume: np.ndarray, window: int = 20) -> float:
    """Mean traded value over the last ``window`` bars (0 when volume is unknown)."""
    c, v = np.asarray(close, np.float64)[-window:], np.asarray(volume, np.float64)[-window:]
    return float(np.mean(c * v)) if len(c) else 0.0


def check_entry(signal: Signal, dollar_vol: float, cfg: GateConfig) -> GateResult:
    """Apply every gate; ``passed`` only if none failed."""
    m = signal.metrics
    reasons = []
    if signal.decision.side == FLAT:
        reasons.append("flat decision")
    if m.get("edge", 0.0) < cfg.min_edge:
        reasons.append(f"edge {m.get('edge', 0.0):.4%} < {cfg.min_edge:.4%}")
    if m.get("sharpe", 0.0) <= cfg.min_sharpe:
        reasons.append(f"sharpe {m.get('sharpe', 0.0):.2f} <= {cfg.min_sharpe:.2f}")
    if m.get("max_drawdown", 0.0) >= cfg.max_drawdown:
        # drawdowns read negative wherever a user sees them (as quantstats); the gate keeps the depth
        reasons.append(f"drawdown {-m.get('max_drawdown', 0.0):.1%} <= -{cfg.max_drawdown:.1%}")
    if dollar_vol < cfg.min_dollar_volume:
        reasons.append(f"dollar volume {dollar_vol:,.0f} < {cfg.min_dollar_volume:,.0f}")
    return GateResult(not reasons, tuple(reasons))
