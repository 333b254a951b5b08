"""Each strategy's decision for hand-made forecast views (close_t = 100), stocks and crypto."""

from dataclasses import replace

import pytest

from marketcast.backtest.maxdiff import MaxDiffState
from marketcast.backtest.orders import FLAT, LONG, SHORT, Bar, Costs, Decision
from marketcast.backtest.strategies import FORECAST_DRIVEN, STRATEGIES, StrategyParams, advance, decide, initial_state
from marketcast.backtest.views import WindowView

STOCK = StrategyParams(allow_short=True, costs=Costs(0.001))
CRYPTO = StrategyParams(allow_short=False, costs=Costs(0.001))


def view(c, h, lo, band=None):
    band = band or (c, c)
    return WindowView(timestamp=None, close=100.0, close_ret=c, high_ret=h, low_ret=lo,
                      band_low=band[0], band_high=band[1])


UP = view(0.01, 0.02, -0.005)
DOWN = view(-0.01, 0.005, -0.02)
ALL_UP = view(0.005, 0.01, 0.002)
ALL_DOWN = view(-0.002, -0.001, -0.01)


def test_registry_has_the_eight_names_in_order():
    assert tuple(STRATEGIES) == ("simple", "all_signals", "buy_hold", "unprofit_shutdown", "ci_guard",
                                 "entry_takeprofit", "highlow", "maxdiff")


def test_simple():
    assert decide("simple", UP, None, STOCK) == Decision(LONG)
    assert decide("simple", DOWN, None, STOCK) == Decision(SHORT)
    assert decide("simple", view(0.0, 0.01, -0.01), None, STOCK) == Decision(SHORT)  # not > 0
    assert decide("simple", DOWN, None, CRYPTO) == Decision(FLAT)


def test_all_signals():
    assert decide("all_signals", ALL_UP, None, STOCK) == Decision(LONG)
    assert decide("all_signals", ALL_DOWN, None, STOCK) == Decision(SHORT)
    assert decide("all_signals", ALL_DOWN, None, CRYPTO) == Decision(FLAT)
    assert decide("all_signals", UP, None, STOCK) == Decision(FLAT)  # low < 0


def test_buy_hold_is_always_long():
    for v in (UP, DOWN, ALL_DOWN):
        assert decide("buy_hold", v, None, CRYPTO) == Decision(LONG)


def test_forecast_blind_means_the_orders_never_move_with_the_forecast():
    """``reads_forecast`` tells the truth: over forecasts up, down, mixed and wide, a forecast-blind strategy
    decides one order, and every forecast-driven one (:data:`FORECAST_DRIVEN`) at least two."""
    views = [UP, DOWN, ALL_UP, ALL_DOWN, view(0.01, 0.03, -0.002, band=(0.004, 0.016)),
             view(-0.01, 0.002, -0.03, band=(-0.016, -0.004))]
    for name, strategy in STRATEGIES.items():
        orders = {decide(name, v, initial_state(name), STOCK) for v in views}
        assert (len(orders) > 1) is strategy.reads_forecast, (name, orders)
    assert FORECAST_DRIVEN == tuple(n for n in STRATEGIES if n != "buy_hold")


def test_unprofit_shutdown_state_machine():
    assert decide("unprofit_shutdown", UP, initial_state("unprofit_shutdown"), STOCK) == Decision(LONG)
    assert decide("unprofit_shutdown", UP, False, STOCK) == Decision(FLAT)
    assert decide("unprofit_shutdown", DOWN, True, STOCK) == Decision(SHORT)
    # a long call is right when bar t+1 closes above its open, wrong otherwise (a flat bar is wrong)
    s = decide("simple", UP, None, STOCK)
    assert advance("unprofit_shutdown", None, UP, Bar(100, 102, 99, 101), s, STOCK) is True
    assert advance("unprofit_shutdown", True, UP, Bar(100, 102, 99, 99.5), s, STOCK) is False
    assert advance("unprofit_shutdown", True, UP, Bar(100, 102, 99, 100), s, STOCK) is False
    # the call is judged even when crypto could not act on it (flat instead of short)
    assert advance("unprofit_shutdown", False, DOWN, Bar(100, 101, 98, 99), Decision(FLAT), CRYPTO) is True


def test_ci_guard_band_and_multiplier():
    v = view(0.002, 0.01, -0.01, band=(0.001, 0.003))
    assert decide("ci_guard", v, None, STOCK) == Decision(LONG)
    wide = StrategyParams(ci_multiplier=3.0)  # centre 0.002 +- 0.003 now includes zero
    assert decide("ci_guard", v, None, wide) == Decision(FLAT)
    down = view(-0.002, 0.01, -0.01, band=(-0.003, -0.001))
    assert decide("ci_guard", down, None, STOCK) == Decision(SHORT)
    assert decide("ci_guard", down, None, CRYPTO) == Decision(FLAT)
    assert decide("ci_guard", view(0.002, 0.01, -0.01, band=(-0.001, 0.003)), None, STOCK) == Decision(FLAT)


def test_entry_takeprofit_targets_the_forecast_extreme():
    assert decide("entry_takeprofit", UP, None, STOCK) == Decision(LONG, None, pytest.approx(102.0))
    d = decide("entry_takeprofit", DOWN, None, STOCK)
    assert d.side == SHORT and d.entry_limit is None and d.take_profit == pytest.approx(98.0)
    assert decide("entry_takeprofit", DOWN, None, CRYPTO) == Decision(FLAT)


def test_highlow_enters_at_the_forecast_extreme():
    d = decide("highlow", UP, None, STOCK)
    assert d.side == LONG and d.entry_limit == pytest.approx(99.5) and d.take_profit is None
    d = decide("highlow", DOWN, None, STOCK)
    assert d.side == SHORT and d.entry_limit == pytest.approx(100.5)
    assert decide("highlow", DOWN, None, CRYPTO) == Decision(FLAT)


def test_maxdiff_bias_prices_and_offsets():
    zero = MaxDiffState.initial()
    d = decide("maxdiff", UP, zero, STOCK)  # |+2 %| > |-0.5 %|: long, buy 99.5, sell 102
    assert (d.side, d.entry_limit, d.take_profit) == (LONG, pytest.approx(99.5), pytest.approx(102.0))
    d = decide("maxdiff", DOWN, zero, STOCK)  # short: sell 100.5, buy back 98
    assert (d.side, d.entry_limit, d.take_profit) == (SHORT, pytest.approx(100.5), pytest.approx(98.0))
    assert decide("maxdiff", DOWN, zero, CRYPTO) == Decision(FLAT)
    # learned offsets e = +0.3 %, x = -0.5 %: entry moves towards the market, take profit closer
    state = MaxDiffState(zero.scores.copy(), count=50)
    from marketcast.backtest.maxdiff import GRID_ENTRY, GRID_EXIT
    k = int(((GRID_ENTRY == 0.003) & (GRID_EXIT == -0.005)).nonzero()[0][0])
    state.scores[k] = 1.0
    pct = replace(STOCK, maxdiff_grid="percent")
    d = decide("maxdiff", UP, state, pct)
    assert d.entry_limit == pytest.approx(99.5 * 1.003) and d.take_profit == pytest.approx(102.0 * 0.995)
    d = decide("maxdiff", DOWN, state, pct)
    assert d.entry_limit == pytest.approx(100.5 * 0.997) and d.take_profit == pytest.approx(98.0 * 1.005)
    # the default "atr" grid: the same pair is m_e = +0.3, m_x = -0.5 times the view's ATR% (here 2 %)
    d = decide("maxdiff", replace(UP, atr=0.02), state, STOCK)
    assert d.entry_limit == pytest.approx(99.5 * 1.006) and d.take_profit == pytest.approx(102.0 * 0.99)
    assert decide("maxdiff", UP, state, STOCK).entry_limit == pytest.approx(99.5)  # no range known: zero offsets
    # below the minimum history the offsets stay zero
    young = MaxDiffState(state.scores, count=3)
    assert decide("maxdiff", UP, young, pct).entry_limit == pytest.approx(99.5)
