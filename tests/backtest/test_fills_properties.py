"""Properties of ``settle`` over random bars and orders (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision

COSTS = Costs(0.0005, 0.0002)
pct = st.floats(-0.03, 0.03, allow_nan=False)


@st.composite
def bars(draw):
    o, c = 100 * (1 + draw(pct)), 100 * (1 + draw(pct))
    h = max(o, c) * (1 + abs(draw(pct)))
    lo = min(o, c) * (1 - abs(draw(pct)))
    return Bar(o, h, lo, c)


@st.composite
def decisions(draw):
    side = draw(st.sampled_from([-1, 0, 1]))
    entry = draw(st.one_of(st.none(), pct.map(lambda r: 100 * (1 + r))))
    tp = draw(st.one_of(st.none(), pct.map(lambda r: 100 * (1 + r))))
    return Decision(side, entry, tp)


@settings(max_examples=400, deadline=None)
@given(bars(), decisions())
def test_fills_lie_in_the_bar_and_modes_are_ordered(bar, d):
    touch = settle(d, bar, COSTS, "touch", "pessimistic")
    if touch.filled:
        assert bar.low <= touch.entry_price <= bar.high and bar.low <= touch.exit_price <= bar.high
        assert touch.fees == 2 * COSTS.per_side
    else:
        assert touch.net_return == 0.0
    # penetrate fills a subset of what touch fills
    if settle(d, bar, COSTS, "penetrate").filled:
        assert touch.filled
    # pessimistic never books more than the nearest-extreme ordering
    assert touch.net_return <= settle(d, bar, COSTS, "touch", "nearest").net_return + 1e-15
    # a long entered at the open never sells below it on a take profit
    if touch.filled and touch.exit_reason == "take_profit" and d.side == 1:
        assert touch.exit_price >= touch.entry_price or touch.entry_price != bar.open
