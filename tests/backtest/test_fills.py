"""Hand-computed settlements: market and limit entries, gaps, touch vs penetrate, same-bar order, shorts, fees."""

import pytest

from marketcast.backtest.fills import limit_fill, settle
from marketcast.backtest.orders import FLAT, LONG, NO_FILL, SHORT, Bar, Costs, Decision

BAR = Bar(100.0, 105.0, 98.0, 103.0)
COSTS = Costs(fee=0.001, spread=0.002)  # 0.002 per side, 0.004 per round trip


def test_costs_per_side_is_fee_plus_half_spread():
    assert COSTS.per_side == pytest.approx(0.002)
    assert Costs.for_asset("stock").fee == 0.0005
    assert Costs.for_asset("crypto").fee == 0.0025  # Alpaca's tier-1 taker fee (was the 0.0015 maker fee)
    # + crypto's default 2 bp slippage (tests/backtest/test_costs.py has the per-class defaults)
    assert Costs.for_asset("crypto", fee=0.01, spread=0.004).per_side == pytest.approx(0.0122)
    assert Costs.for_asset("crypto", fee=0.01, spread=0.004, slippage=0.0).per_side == pytest.approx(0.012)


def test_market_long_and_short_open_to_close_with_fees():
    s = settle(Decision(LONG), BAR, COSTS)
    assert (s.filled, s.entry_price, s.exit_price, s.exit_reason) == (True, 100.0, 103.0, "close")
    assert s.gross_return == pytest.approx(0.03)
    assert s.fees == pytest.approx(0.004)
    assert s.net_return == pytest.approx(0.026)
    short = settle(Decision(SHORT), BAR, COSTS)
    assert short.gross_return == pytest.approx(-0.03)
    assert short.net_return == pytest.approx(-0.034)


def test_flat_and_unfilled_cost_nothing():
    assert settle(Decision(FLAT), BAR, COSTS) == NO_FILL
    unfilled = settle(Decision(LONG, entry_limit=97.0), BAR, COSTS)
    assert not unfilled.filled and unfilled.net_return == 0.0 and unfilled.fees == 0.0
    assert settle(Decision(SHORT, entry_limit=106.0), BAR, COSTS).net_return == 0.0


def test_buy_limit_inside_the_bar_fills_at_the_limit():
    s = settle(Decision(LONG, entry_limit=99.0), BAR, COSTS)
    assert s.entry_price == 99.0 and s.exit_price == 103.0
    assert s.gross_return == pytest.approx(103 / 99 - 1)


def test_touch_versus_penetrate_at_the_exact_low_and_high():
    assert limit_fill(True, 98.0, BAR, "touch") == 98.0
    assert limit_fill(True, 98.0, BAR, "penetrate") is None  # needs low <= 98 * (1 - 1bp) = 97.9902
    assert limit_fill(True, 98.0099, BAR, "penetrate") == 98.0099  # 98.0099 * 0.9999 = 98.0001 >= low 98
    assert limit_fill(False, 105.0, BAR, "touch") == 105.0
    assert limit_fill(False, 105.0, BAR, "penetrate") is None
    assert limit_fill(False, 104.98, BAR, "penetrate") == 104.98  # 104.98 * 1.0001 = 104.9905 <= 105
    assert settle(Decision(LONG, entry_limit=98.0), BAR, COSTS, fill_mode="penetrate") == NO_FILL


def test_gap_through_the_limit_fills_at_the_open_not_the_limit():
    # buy limit 101 above an open of 100: the order is marketable at the open, so it fills at 100
    s = settle(Decision(LONG, entry_limit=101.0), BAR, COSTS)
    assert s.entry_price == 100.0
    # sell (short entry) limit 99 below the open of 100: fills at the open 100
    s = settle(Decision(SHORT, entry_limit=99.0), BAR, COSTS)
    assert s.entry_price == 100.0 and s.gross_return == pytest.approx(-(103 / 100 - 1))
    # take profit below the open of a long entered at the open: exits at the open, loses only fees
    s = settle(Decision(LONG, take_profit=99.0), BAR, COSTS)
    assert (s.exit_price, s.exit_reason) == (100.0, "take_profit")
    assert s.gross_return == 0.0 and s.net_return == pytest.approx(-0.004)


def test_take_profit_after_a_market_entry():
    s = settle(Decision(LONG, take_profit=104.0), BAR, COSTS)
    assert (s.exit_price, s.exit_reason) == (104.0, "take_profit")
    assert s.gross_return == pytest.approx(0.04)
    s = settle(Decision(LONG, take_profit=106.0), BAR, COSTS)
    assert (s.exit_price, s.exit_reason) == (103.0, "close")
    s = settle(Decision(SHORT, take_profit=99.0), BAR, COSTS)
    assert (s.exit_price, s.exit_reason) == (99.0, "take_profit")
    assert s.gross_return == pytest.approx(0.01)


def test_same_bar_long_pessimistic_books_the_worse_exit():
    d = Decision(LONG, entry_limit=99.0, take_profit=104.0)
    s = settle(d, BAR, COSTS)  # take profit 104 vs close 103: the worse for a long is the close
    assert (s.entry_price, s.exit_price, s.exit_reason) == (99.0, 103.0, "close")
    s = settle(d, Bar(100.0, 105.0, 98.0, 104.5), COSTS)  # close 104.5 beats 104: book the take profit
    assert (s.exit_price, s.exit_reason) == (104.0, "take_profit")
    assert s.gross_return == pytest.approx(104 / 99 - 1)


def test_same_bar_long_nearest_uses_the_extreme_closer_to_the_open():
    d = Decision(LONG, entry_limit=99.0, take_profit=104.0)
    s = settle(d, BAR, COSTS, same_bar="nearest")  # low is 2 away, high 5: low first, then the take profit
    assert (s.exit_price, s.exit_reason) == (104.0, "take_profit")
    d = Decision(LONG, entry_limit=99.0, take_profit=100.8)
    s = settle(d, Bar(100.0, 101.0, 95.0, 100.5), COSTS, same_bar="nearest")  # high first: no take profit
    assert (s.entry_price, s.exit_price, s.exit_reason) == (99.0, 100.5, "close")


def test_same_bar_short_both_modes():
    d = Decision(SHORT, entry_limit=101.5, take_profit=99.0)
    bar = Bar(100.0, 102.0, 95.0, 97.0)  # high 2 away (entry first), low 5 away
    for mode in ("pessimistic", "nearest"):  # pessimistic: max(99, 97) = 99 is the worse exit for a short
        s = settle(d, bar, COSTS, same_bar=mode)
        assert (s.entry_price, s.exit_price, s.exit_reason) == (101.5, 99.0, "take_profit")
        assert s.gross_return == pytest.approx(-(99 / 101.5 - 1))
    d = Decision(SHORT, entry_limit=104.0, take_profit=99.0)
    s = settle(d, BAR, COSTS)  # entry 104 (not at the open); max(99, 103) = 103 -> close
    assert (s.entry_price, s.exit_price, s.exit_reason) == (104.0, 103.0, "close")
    assert s.gross_return == pytest.approx(1 / 104)
    s = settle(d, BAR, COSTS, same_bar="nearest")  # low (2 away) came first, before the entry at 104
    assert s.exit_reason == "close"


def test_take_profit_after_an_entry_inside_the_bar_fills_at_its_limit_not_at_a_gap_open():
    """The take-profit exists only once the entry filled: an open beyond it came before, so it cannot count."""
    d = Decision(LONG, entry_limit=99.0, take_profit=101.0)
    bar = Bar(102.0, 103.5, 98.5, 103.0)  # opens above the take-profit, dips to the entry, closes above 101
    for mode in ("pessimistic", "nearest"):
        s = settle(d, bar, COSTS, same_bar=mode)
        assert (s.entry_price, s.exit_price, s.exit_reason) == (99.0, 101.0, "take_profit"), mode
    d = Decision(SHORT, entry_limit=101.0, take_profit=99.0)
    bar = Bar(98.0, 101.5, 96.5, 97.0)
    for mode in ("pessimistic", "nearest"):
        s = settle(d, bar, COSTS, same_bar=mode)
        assert (s.entry_price, s.exit_price, s.exit_reason) == (101.0, 99.0, "take_profit"), mode


def test_nearest_take_profit_extreme_first_still_fills_when_the_close_is_beyond_it():
    d = Decision(LONG, entry_limit=99.0, take_profit=100.8)
    s = settle(d, Bar(100.0, 101.0, 95.0, 100.9), COSTS, same_bar="nearest")  # H, then L (entry), then 100.9
    assert (s.exit_price, s.exit_reason) == (100.8, "take_profit")


def test_bad_modes_raise():
    with pytest.raises(ValueError):
        settle(Decision(LONG), BAR, COSTS, same_bar="optimistic")
    with pytest.raises(ValueError):
        limit_fill(True, 99.0, BAR, "cross")
    with pytest.raises(ValueError):
        Decision(2)
