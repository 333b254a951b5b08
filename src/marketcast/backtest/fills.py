"""Limit-fill rules: an order fills only if bar t+1 trades through its price.

* ``touch``: a buy limit fills when low <= limit (sell: high >= limit), as backtesting.py.
* ``penetrate``: the bar must trade *through* the limit by at least one basis point, as LEAN's strict rule.
* A bar that opens beyond the limit (a gap) fills at the open, never at the better limit price.
* Entry and take-profit in one bar: OHLC cannot tell which came first. ``pessimistic`` (default) books the
  worse of the two paths; ``nearest`` assumes the extreme nearer the open came first (O-L-H-C or O-H-L-C).
  A take-profit only exists once the entry has filled, so after an entry inside the bar it fills at its
  limit (never at a gap open that happened before the entry), and it fills after all when the bar closes
  beyond it (the price must have crossed it after the entry).
"""

from __future__ import annotations

from marketcast.backtest.orders import FLAT, NO_FILL, Bar, Costs, Decision, Settlement

FILL_MODES = ("touch", "penetrate")
SAME_BAR_MODES = ("pessimistic", "nearest")
PENETRATION = 1e-4  # one basis point


def limit_fill(buy: bool, limit: float, bar: Bar, mode: str = "touch") -> float | None:
    """Fill price of a limit order on ``bar`` (``None`` if it does not fill)."""
    if mode not in FILL_MODES:
        raise ValueError(f"fill mode {mode!r} is not one of {FILL_MODES}")
    margin = PENETRATION if mode == "penetrate" else 0.0
    if buy:
        return min(bar.open, limit) if bar.low <= limit * (1.0 - margin) else None
    return max(bar.open, limit) if bar.high >= limit * (1.0 + margin) else None


def settle(
    decision: Decision,
    bar: Bar,
    costs: Costs,
    fill_mode: str = "touch",
    same_bar: str = "pessimistic",
) -> Settlement:
    """Settle ``decision`` (made at bar t) on bar t+1."""
    if same_bar not in SAME_BAR_MODES:
        raise ValueError(f"same-bar mode {same_bar!r} is not one of {SAME_BAR_MODES}")
    side = decision.side
    if side == FLAT:
        return NO_FILL
    long = side > 0
    if decision.entry_limit is None:
        entry, entered_at_open = bar.open, True
    else:
        entry = limit_fill(long, decision.entry_limit, bar, fill_mode)
        if entry is None:
            return NO_FILL
        entered_at_open = entry == bar.open

    exit_price, reason = bar.close, "close"
    if decision.take_profit is not None:
        tp = limit_fill(not long, decision.take_profit, bar, fill_mode)
        if tp is not None:
            if entered_at_open:
                exit_price, reason = tp, "take_profit"
            else:
                exit_price, reason = _same_bar(long, decision.take_profit, entry, bar, same_bar)

    gross = side * (exit_price / entry - 1.0)
    return Settlement(
        filled=True,
        entry_price=entry,
        exit_price=exit_price,
        exit_reason=reason,
        gross_return=gross,
        fees=2.0 * costs.per_side,
    )


def _same_bar(long: bool, tp: float, entry: float, bar: Bar, same_bar: str) -> tuple[float, str]:
    """Exit of an entry filled inside the bar (at ``entry``) whose take-profit limit ``tp`` the bar also traded.

    A take-profit already marketable at the entry fills there. Else, entry extreme first: it fills at ``tp``;
    take-profit extreme first: it fills only if the price comes back through ``tp`` after the entry, i.e.
    when the close is beyond it; else the position exits at the close.
    """
    if (tp <= entry) if long else (tp >= entry):
        return entry, "take_profit"
    after_entry = min(tp, bar.close) if long else max(tp, bar.close)  # the path with the entry second
    if same_bar == "nearest":
        entry_extreme_first = (bar.open - bar.low) <= (bar.high - bar.open) if long else (
            (bar.high - bar.open) <= (bar.open - bar.low)
        )
        exit_price = tp if entry_extreme_first else after_entry
    else:
        exit_price = after_entry  # the worse of both paths: tp itself is never worse than after_entry
    return (exit_price, "take_profit") if exit_price == tp else (exit_price, "close")
