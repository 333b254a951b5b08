"""Issue 29 item 4: every report names the return each table uses, and the names match the code: recomputed
from the bars with the stated definition, the engine's and the JSON's numbers agree to 1e-12."""

import io
import json
import re
from dataclasses import replace

import numpy as np
import pytest
from rich.console import Console

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import decision_ends, run_backtest
from marketcast.backtest.execution import DEFAULT_EXIT
from marketcast.backtest.fills import WASH
from marketcast.backtest.markdown import markdown_summary
from marketcast.backtest.report import render_outputs, symbol_json
from marketcast.backtest.returns import CLOSE_TO_CLOSE, DEFINITIONS, SENTENCE, SKILL, STRATEGY
from marketcast.backtest.tables import (
    SKILL_NOTE, in_sample_note, in_sample_table, selection_note, skill_table, track_note, track_record_table,
)

from .helpers import MomentumForecaster, random_bars

WINDOWS = 60
# maxdiff's grid is not what is under test here (its market entries are the others')
NAMES = ("simple", "all_signals", "buy_hold", "unprofit_shutdown", "ci_guard", "entry_takeprofit", "highlow")
COSTLY = BacktestConfig(windows=WINDOWS, context=16, num_samples=16, fee=0.001, spread=0.0004, slippage=0.0,
                        borrow_rate=0.0, strategies=NAMES)
FREE = BacktestConfig(windows=WINDOWS, context=16, num_samples=16, fee=0.0, spread=0.0, slippage=0.0, borrow_rate=0.0,
                      strategies=NAMES, exit="close")


@pytest.fixture(scope="module")
def bars():
    return random_bars(120, seed=7)


@pytest.fixture(scope="module")
def costly(bars):
    return run_backtest(bars, MomentumForecaster(), COSTLY)


@pytest.fixture(scope="module")
def free(bars):
    return run_backtest(bars, MomentumForecaster(), FREE)


def _prices(bars, config):
    f = bars.frame
    o, h, lo, c = (f[k].to_numpy(dtype=np.float64) for k in ("open", "high", "low", "close"))
    t = decision_ends(len(bars), config)
    t = t[:-1] if config.include_latest else t  # the last bar's window is decided, never settled
    assert len(t) == WINDOWS
    return o, h, lo, c, t


def test_the_json_names_the_return_of_every_section(costly):
    doc = symbol_json(costly)
    defs = doc["return_definitions"]
    assert defs == DEFINITIONS
    assert set(defs) >= {"strategies", "walk_forward", "benchmark", "relative", "selection", "skill", "market_return",
                         "benchmark_return", "walk_forward_oos", "trades"}
    for section in ("strategies", "walk_forward", "benchmark", "selection"):  # the JSON's own sections
        assert section in doc
    assert defs["strategies"] == defs["walk_forward"] == defs["walk_forward_oos"] == defs["trades"] == STRATEGY
    assert STRATEGY == "open t+1 -> open t+2, or -> close t+1 under --exit close (what the strategy earns)"
    assert defs["benchmark"] == defs["benchmark_return"] == defs["market_return"] == CLOSE_TO_CLOSE
    assert CLOSE_TO_CLOSE == "close t -> close t+1"
    assert defs["skill"] == CLOSE_TO_CLOSE and "not a return" in doc["return_definitions_detail"]["skill"]
    assert set(doc["return_definitions_detail"]) == set(defs)
    for key in ("runs", "strategies", "benchmark", "metrics", "walk_forward", "best_strategy", "selection"):
        assert key in doc  # the existing keys stay
    json.dumps(doc)


def test_buy_and_hold_is_close_to_close_from_the_first_settle_open(costly, bars):
    o, _, _, c, t = _prices(bars, COSTLY)
    cost = costly.costs.per_side
    assert cost > 0
    expected = c[t + 1] / c[t] - 1.0  # close t -> close t+1 ...
    expected[0] = c[t[0] + 1] / o[t[0] + 1] - 1.0  # ... except the first window: from the open of t+1
    expected[0] = (1.0 + expected[0]) * (1.0 - cost) - 1.0
    expected[-1] = (1.0 + expected[-1]) * (1.0 - cost) - 1.0
    np.testing.assert_allclose(costly.benchmark.returns, expected, rtol=0, atol=1e-12)
    doc = symbol_json(costly)
    assert abs(doc["benchmark"]["return"] - (np.prod(1.0 + expected) - 1.0)) < 1e-12
    assert abs(doc["metrics"]["benchmark_return"] - (np.prod(1.0 + expected) - 1.0)) < 1e-12
    # not what a strategy holding each bar earns: the overnight gaps are in it
    intraday = c[t + 1] / o[t + 1] - 1.0
    assert np.abs(costly.benchmark.returns[1:-1] - intraday[1:-1]).max() > 1e-4


def test_a_market_entry_earns_open_to_close_of_the_next_bar(free, bars):
    o, _, _, c, t = _prices(bars, FREE)
    intraday = c[t + 1] / o[t + 1] - 1.0  # open t+1 -> close t+1
    np.testing.assert_allclose(free.strategies["buy_hold"].returns, intraday, rtol=0, atol=1e-12)
    simple = free.strategies["simple"]
    side = simple.decisions.side.astype(np.float64)
    assert (side != 0).all() and (side > 0).any() and (side < 0).any()
    np.testing.assert_allclose(simple.returns, side * intraday, rtol=0, atol=1e-12)
    doc = symbol_json(free)
    for name, r in (("buy_hold", intraday), ("simple", side * intraday)):
        assert abs(doc["strategies"][name]["return"] - (np.prod(1.0 + r) - 1.0)) < 1e-12
    closes = c[t + 1] / c[t] - 1.0
    assert np.abs(free.strategies["buy_hold"].returns - closes).max() > 1e-4  # not close -> close


def test_under_the_default_exit_a_market_entry_earns_open_to_next_open(bars):
    """The default rule (next-open): buy_hold, long in every window, enters at the open of t+1 and exits at the
    open of t+2; the next window's long entry meets that queued close and is refused as a wash, so every other
    window trades and the refused ones earn 0."""
    assert DEFAULT_EXIT == "next-open"
    run = run_backtest(bars, MomentumForecaster(), replace(FREE, exit=DEFAULT_EXIT)).strategies["buy_hold"]
    o, _, _, c, t = _prices(bars, FREE)
    n = len(bars)
    exit_price = np.where(t + 2 < n, o[np.minimum(t + 2, n - 1)], c[t + 1])  # the last window: marked at its close
    overnight = exit_price / o[t + 1] - 1.0  # open t+1 -> open t+2
    refused = run.settlements.reason == WASH
    np.testing.assert_array_equal(refused, np.arange(WINDOWS) % 2 == 1)
    np.testing.assert_allclose(run.returns[~refused], overnight[~refused], rtol=0, atol=1e-12)
    assert (run.returns[refused] == 0).all()
    assert np.abs(overnight - (c[t + 1] / o[t + 1] - 1.0)).max() > 1e-4  # not open -> close


def test_skill_scores_forecasts_of_the_next_close_against_close_to_close(free, bars):
    _, h, lo, c, t = _prices(bars, FREE)
    v = free.views
    for field, realised in (("close", c[t + 1]), ("high", h[t + 1]), ("low", lo[t + 1])):
        actual = realised / c[t] - 1.0  # close t -> close (high, low) t+1: a forecast error, not a return
        point = getattr(v, f"{field}_ret")
        assert abs(free.skill[f"{field}_val_loss"] - np.abs(point - actual).mean()) < 1e-12
        assert abs(free.skill[f"{field}_naive_mae"] - np.abs(actual).mean()) < 1e-12
    assert abs(free.market_return - (c[t[-1] + 1] / c[t[0]] - 1.0)) < 1e-12


def _terminal(table) -> str:
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(table)
    return " ".join(out.getvalue().split())


def test_the_terminal_states_which_return_each_table_uses(costly):
    track = _terminal(track_record_table(costly))
    assert SENTENCE in track
    assert SENTENCE in track_note(costly)
    assert f"returns {STRATEGY}" in _terminal(in_sample_table(costly))
    assert f"against buy & hold ({CLOSE_TO_CLOSE}" in in_sample_note(costly)
    assert STRATEGY in selection_note(costly) and CLOSE_TO_CLOSE in selection_note(costly)
    assert SKILL in SKILL_NOTE and SKILL in _terminal(skill_table([costly]))


def test_summary_md_states_which_return_each_table_uses(costly):
    md = markdown_summary([costly])
    assert f"**Which return each table uses.** {SENTENCE}" in md
    assert md.count(SENTENCE) == 2  # the page's head and the symbol's track record note
    assert f"Every column: the strategy's returns, {STRATEGY}." in md
    assert f"returns {STRATEGY}" in md and SKILL in md
    assert re.search(rf"Market {re.escape(CLOSE_TO_CLOSE)}, compounded from the close of the first decision bar", md)
    files = render_outputs([costly])
    assert json.loads(files[f"{costly.symbol}.json"])["return_definitions"] == DEFINITIONS
