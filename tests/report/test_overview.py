"""What the tearsheet says first, read back from the page of a real 40-window backtest of SP500 and NASDAQ:
the headline line, the equity-against-buy-and-hold chart with its shaded drawdowns, the provenance box, the
metrics table, the drawdown periods and the sortable trade list. (Their positions in a real browser are
measured by ``benchmarks/html_check.py``.)"""

import dataclasses
import html
import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from marketcast.backtest.breadth import rolling_stats
from marketcast.backtest.tables import pct
from marketcast.report.charts import log_ticks, tick_label
from marketcast.report.figures import _log_when_wide
from marketcast.report.overview import METRIC_ROWS, price, weights_of
from marketcast.report.page import SORT, sortable_table
from marketcast.report.series import BUY_AND_HOLD, WALK_FORWARD, walk_forward_trades
from marketcast.report.tearsheet import symbol_section
from tests.report.pagedata import figures, trace


def _section(page: str, k: int) -> str:
    return page.split('<section class="symbol"')[k + 1].split('<section ')[0]


def _table(text: str, table_id: str) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """Headers, cell texts and sort keys (data-sort, else the text) of the table ``table_id``."""
    block = re.search(f'<table[^>]*id="{table_id}"[^>]*>(.*?)</table>', text, re.S).group(1)
    heads = re.findall(r"<th(?: data-num)?>(.*?)</th>", block)
    rows = re.findall(r"<tr>(.*?)</tr>", block.split("<tbody>")[1])
    cells = [re.findall(r'<td(?: data-sort="([^"]*)")?>(.*?)</td>', row) for row in rows]
    return heads, [[html.unescape(t) for _, t in row] for row in cells], \
        [[html.unescape(k or t) for k, t in row] for row in cells]


def test_the_headline_chart_and_trust_box_come_before_any_table(page, reports):
    for k, rep in enumerate(reports):
        text = _section(page, k)
        key = f"s{k}-{rep.result.symbol}"
        order = [text.index(f'id="{key}-headline"'), text.index('<div class="hero">'),
                 text.index(f'id="{key}-overview"'), text.index('data-check="trust"'), text.index("<table")]
        assert order == sorted(order)  # the chart and the trust box side by side in the hero box


def test_the_headline_states_the_record_against_buy_and_hold(page, reports):
    for k, rep in enumerate(reports):
        r = rep.result
        wf, bh = r.walk_forward["metrics"], r.benchmark.metrics
        line = html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<p class="headline"[^>]*>(.*?)</p>',
                                                                 _section(page, k)).group(1)))
        assert line.startswith(f"Walk-forward {pct(wf['return'])} over 40 windows (annual n/a (< 1 year))")
        assert f"Sharpe {wf['sharpe']:+.2f}" in line
        assert f"max DD {pct(-wf['max_drawdown'])}" in line and wf["max_drawdown"] > 0  # shown negative
        assert f"vs buy & hold {100 * (wf['return'] - bh['return']):+.2f} pts (buy & hold {pct(bh['return'])}" in line
        o = r.overfit  # the walk-forward rule: its PSR against 0 and its DSR over the one rule tried, labelled
        assert (f"PSR {o.psr_walk_forward:.2f} (walk-forward, against 0), DSR {o.dsr_walk_forward:.2f} over 1 "
                "selection rule" in line) == (o.psr_walk_forward is not None)


def test_the_trust_box_names_costs_weights_windows_period_and_asset_class(page, reports):
    for k, rep in enumerate(reports):
        r = rep.result
        box = html.unescape(re.search(r'<aside class="trust".*?</aside>', _section(page, k), re.S).group(0))
        assert r.costs.note() in box and "fee 5 bp + half-spread 1 bp + slippage 1 bp" in box
        assert "baseline: no learned weights" in box and "RANDOM WEIGHTS" not in box
        assert "40 walk-forward windows of 1d bars; context 64 bars, 32 samples, seed 0" in box
        assert f"{r.decision_times[0]:%Y-%m-%d} → {r.settle_times[-1]:%Y-%m-%d} UTC" in box
        assert f"stock: {r.asset_reason}" in box
        assert "annual figures n/a (< 1 year): 40 bars, 252 a year" in box  # a warning of its own


@pytest.mark.parametrize("meta, random", [
    ({"model": "toto", "source": "random(seed=0)"}, True),
    ({"model": "kronos-small-random"}, True),
    ({"model": "toto", "source": "Datadog/Toto-Open-Base-1.0"}, False),
    ({"model": "baseline"}, False),
])
def test_random_weights_get_a_red_banner(reports, meta, random):
    assert weights_of(meta)[1] is random
    result = dataclasses.replace(reports[0].result, forecast_meta=meta)
    text = symbol_section(dataclasses.replace(reports[0], result=result), "s0-SP500")
    assert ('class="banner" data-check="random-weights"' in text) is random
    assert html.escape(meta.get("source", meta["model"])) in text


def test_the_metrics_table_is_the_backtests_numbers_at_quantstats_breadth(page, reports):
    assert len(METRIC_ROWS) >= 40
    for k, rep in enumerate(reports):
        r, p = rep.result, rep.result.periods_per_year
        text = _section(page, k)
        body = re.search(r'id="s\d-\w+-metrics"><table>.*?<tbody>(.*?)</tbody>', text, re.S).group(1)
        rows = {html.unescape(c[0]): [html.unescape(x) for x in c[1:]]
                for c in (re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body))}
        assert len(rows) == len(METRIC_ROWS)
        series = {0: r.walk_forward["returns"], 1: r.benchmark.returns}
        for col, x in series.items():
            vol = np.std(x, ddof=1) * math.sqrt(p)  # by hand
            assert rows["Volatility (annualised)"][col] == f"{100 * vol:.2f}%"
            assert rows["Best window"][col] == pct(x.max()) and rows["Worst window"][col] == pct(x.min())
            assert rows["CAGR"][col] == rows["Calmar ratio"][col] == "n/a (< 1 year)"
            equity = np.cumprod(np.r_[1.0, 1.0 + x])
            assert rows["Max drawdown"][col] == pct((equity / np.maximum.accumulate(equity) - 1).min())
            gains, losses = x[x > 0].sum(), -x[x < 0].sum()
            assert rows["Omega ratio"][col] == f"{gains / losses:.2f}"
        wf = r.walk_forward["metrics"]
        assert rows["Total return"] == [pct(wf["return"]), pct(r.benchmark.metrics["return"])]
        assert rows["Trades"][0] == f"{wf['trades']:,}" and rows["Beta (vs buy & hold)"][1] == "—"


def test_the_drawdown_table_lists_the_deepest_periods_first(page, reports):
    for k, rep in enumerate(reports):
        r = rep.result
        heads, cells, keys = _table(_section(page, k), f"s{k}-{r.symbol}-drawdowns")
        assert heads[:4] == ["start", "valley", "end (back at the peak)", "depth"]
        depths = [float(row[3]) for row in keys]
        assert depths == sorted(depths) and len(depths) <= 10
        assert depths[0] == pytest.approx(-r.walk_forward["metrics"]["max_drawdown"])  # the deepest is the max DD
        for row in cells:
            assert row[0] <= row[1] and (row[2] == "not recovered" or row[1] < row[2])
            assert int(row[4]) >= 1


def test_the_trade_list_is_every_walk_forward_trade_and_sorts_by_number(page, reports):
    for k, rep in enumerate(reports):
        r = rep.result
        text = _section(page, k)
        heads, cells, keys = _table(text, f"s{k}-{r.symbol}-trades")
        trades = walk_forward_trades(r)
        assert len(cells) == len(trades) > 0
        assert [row[2] for row in cells] == [t.strategy for t in trades]
        net = np.array([float(row[7]) for row in keys])
        np.testing.assert_array_equal(net, [t.net_return for t in trades])
        # flat windows earn 0, so the trades compound to the walk-forward return
        assert np.prod(1 + net) - 1 == pytest.approx(r.walk_forward["metrics"]["return"], rel=1e-12)
        assert re.search(f'<table class="sortable" id="s{k}-{r.symbol}-trades"><thead><tr><th data-num>#</th>', text)
    assert SORT.strip() in page


def test_a_sortable_table_keys_only_the_cells_that_need_it():
    text = sortable_table([("when", False), ("net", True)], [["2024-01-02", ("+1.0%", 0.01)]], "t")
    assert text == ('<table class="sortable" id="t"><thead><tr><th>when</th><th data-num>net</th></tr></thead>'
                    '<tbody><tr><td>2024-01-02</td><td data-sort="0.01">+1.0%</td></tr></tbody></table>')


def test_prices_keep_the_decimals_their_size_needs():
    assert [price(2919.354), price(1.123456), price(0.0123456)] == ["2919.35", "1.1235", "0.012346"]


def test_the_overview_chart_shades_the_fall_from_the_running_peak(page, reports):
    figs = figures(page)
    for k, rep in enumerate(reports):
        r = rep.result
        fig = figs[f"s{k}-{r.symbol}-overview"]
        peak, wf, bh = trace(fig, "running peak"), trace(fig, WALK_FORWARD), trace(fig, BUY_AND_HOLD)
        assert [t["name"] for t in fig["data"]] == ["running peak", WALK_FORWARD, BUY_AND_HOLD]
        assert wf["fill"] == "tonexty"  # filled down from the peak line drawn just before it
        np.testing.assert_array_equal(peak["x"], wf["x"])
        np.testing.assert_array_equal(peak["y"], np.maximum.accumulate(wf["y"]))
        assert wf["y"][-1] == pytest.approx(1 + r.walk_forward["metrics"]["return"])
        assert bh["y"][-1] == pytest.approx(1 + r.benchmark.metrics["return"])


def test_the_rolling_chart_is_the_backtests_rolling_sharpe(page, reports):
    figs = figures(page)
    for k, rep in enumerate(reports):
        r = rep.result
        roll = rolling_stats(r.walk_forward["returns"], r.settle_times, r.periods_per_year)
        fig = figs[f"s{k}-{r.symbol}-rolling"]
        sharpe = [t for t in fig["data"] if t["name"].startswith("Sharpe ratio")][0]
        np.testing.assert_allclose(sharpe["y"], roll["sharpe"].dropna().to_numpy())
        assert "(20 windows)" in sharpe["name"]  # half of the 40 windows (half a year would be 126)


def test_log_ticks_print_full_values():
    ticks = log_ticks(0.3, 40.0)
    assert ticks["tickvals"] == pytest.approx([0.5, 1, 2, 5, 10, 20])
    assert ticks["ticktext"] == ["0.5", "1", "2", "5", "10", "20"]
    wide = log_ticks(0.002, 5e4)  # more than four decades: the powers of ten only
    assert wide["ticktext"] == ["0.01", "0.1", "1", "10", "100", "1,000", "10,000"]
    assert tick_label(1e-5) == "0.00001" and tick_label(2.5) == "2.50"
    fig = go.Figure()
    _log_when_wide(fig, np.array([0.8, 1.0, 12.0]))
    assert fig.layout.yaxis.type == "log" and list(fig.layout.yaxis.ticktext) == ["1", "2", "5", "10"]
    flat = go.Figure()
    _log_when_wide(flat, np.array([0.8, 1.0, 7.0]))
    assert flat.layout.yaxis.type is None  # within a factor of 10: linear
