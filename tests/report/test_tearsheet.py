"""The tearsheet's HTML, read back without a browser: every section, its data, and nothing fetched."""

import html
import re

import numpy as np
import pytest

from marketcast.backtest import BacktestConfig, run_many
from marketcast.backtest.fans import add_fans
from marketcast.backtest.tables import interval, pct, selection_rows, track_rows
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.report.charts import DOWN, UP, ms
from marketcast.report.downsample import MAX_POINTS
from marketcast.report.figures import EXIT_LOSS, EXIT_WIN
from marketcast.report.page import bundle_name, chart, plotly_js, table
from marketcast.report.series import (
    WALK_FORWARD, BUY_AND_HOLD, fan_path, monthly_returns, rolling_skill, walk_forward_trades,
)
from marketcast.report.tearsheet import symbol_reports, tearsheet_html
from tests.backtest.helpers import random_bars
from tests.report.pagedata import figures, trace

SECTIONS = ("overview", "equity", "drawdown", "rolling", "beta", "distribution", "yearly", "monthly", "benchmark-monthly",
            "candles", "fans", "skill", "reliability", "pit")


def _points(t: dict) -> int:
    for key in ("close", "y", "z"):
        if key in t:
            return len(t[key])
    return 0


def test_every_symbol_has_every_chart_and_every_trace_has_data(page, reports):
    figs = figures(page)
    assert list(figs) == [f"s{i}-{rep.result.symbol}-{s}" for i, rep in enumerate(reports) for s in SECTIONS]
    for chart_id, fig in figs.items():
        assert fig["data"], chart_id
        assert all(_points(t) > 0 for t in fig["data"]), chart_id
        assert re.search(f'<div id="{chart_id}" class="plot">', page)


def test_equity_and_drawdown_curves_are_the_runs(page, reports):
    figs = figures(page)
    for i, rep in enumerate(reports):
        r = rep.result
        eq = figs[f"s{i}-{r.symbol}-equity"]
        assert len(eq["data"]) == len(r.strategies) + 2
        wf, bh = trace(eq, WALK_FORWARD), trace(eq, BUY_AND_HOLD)
        assert wf["x"][0] == ms(r.decision_times[:1])[0] and wf["x"][-1] == ms(r.settle_times[-1:])[0]
        assert wf["y"][0] == 1.0 and wf["y"][-1] == pytest.approx(1 + r.walk_forward["metrics"]["return"])
        assert bh["y"][-1] == pytest.approx(1 + r.benchmark.metrics["return"])
        for name, run in r.strategies.items():
            assert trace(eq, name)["y"][-1] == pytest.approx(1 + run.metrics["return"])
        dd = trace(figs[f"s{i}-{r.symbol}-drawdown"], WALK_FORWARD)
        assert -dd["y"].min() == pytest.approx(r.walk_forward["metrics"]["max_drawdown"])


def test_the_heatmap_is_the_walk_forward_monthly_table(page, reports):
    figs = figures(page)
    for i, rep in enumerate(reports):
        r = rep.result
        heat = figs[f"s{i}-{r.symbol}-monthly"]["data"][0]
        expected = monthly_returns(r.walk_forward["returns"], r.settle_times)
        np.testing.assert_array_equal(heat["z"], expected.to_numpy())
        year = expected.index[0]
        total = np.prod(1 + expected.loc[year].dropna()) - 1
        assert heat["y"][0] == f"{year} ({100 * total:+.1f}%)"


def test_candles_are_the_settle_bars_with_the_walk_forward_trades(page, reports):
    figs = figures(page)
    for i, rep in enumerate(reports):
        r, frame = rep.result, rep.bars.frame
        fig = figs[f"s{i}-{r.symbol}-candles"]
        candles = fig["data"][0]
        shown = frame.loc[r.settle_times[0]:r.settle_times[-1]]
        assert candles["type"] == "candlestick" and len(candles["close"]) == r.windows == 40
        np.testing.assert_array_equal(candles["x"], ms(shown.index))
        np.testing.assert_array_equal(candles["close"], shown["close"].to_numpy())
        np.testing.assert_array_equal(candles["low"], shown["low"].to_numpy())
        trades = walk_forward_trades(r)
        entries = [t for t in fig["data"] if t["name"].endswith("entry")]
        wins, losses = trace(fig, EXIT_WIN), trace(fig, EXIT_LOSS)
        assert sum(len(t["y"]) for t in entries) == len(trades) == len(wins["y"]) + len(losses["y"])
        np.testing.assert_array_equal(wins["y"], [t.exit_price for t in trades if t.net_return > 0])
        np.testing.assert_array_equal(losses["y"], [t.exit_price for t in trades if t.net_return <= 0])
        # an x-thin cross is drawn by its line: the line carries the colour the caption promises
        assert wins["marker"]["line"]["color"] == wins["marker"]["color"] == UP
        assert losses["marker"]["line"]["color"] == losses["marker"]["color"] == DOWN
        closed = fig["layout"]["xaxis"]["rangebreaks"][0]["values"]
        assert len(closed) == (shown.index[-1] - shown.index[0]).days + 1 - len(shown)  # weekends, holidays


def test_fan_panels_show_the_forecast_and_the_realised_path(page, reports):
    figs = figures(page)
    for i, rep in enumerate(reports):
        fig = figs[f"s{i}-{rep.result.symbol}-fans"]
        realised = [t for t in fig["data"] if t["name"] == "realised"]
        medians = [t for t in fig["data"] if t["name"] == "median forecast"]
        assert len(realised) == len(medians) == len(rep.fans) == 3
        for fan, path, median in zip(rep.fans, realised, medians):
            history, after = fan_path(fan, rep.bars)
            np.testing.assert_array_equal(path["y"], [history.iloc[-1], *after])
            np.testing.assert_array_equal(median["y"][1:], fan.quantiles[0.5])


def test_the_skill_chart_is_the_trailing_mase(page, reports):
    figs = figures(page)
    for i, rep in enumerate(reports):
        fig = figs[f"s{i}-{rep.result.symbol}-skill"]
        skill = rolling_skill(rep.result, rep.bars)
        np.testing.assert_allclose(trace(fig, "close vs no change")["y"], skill["close"].dropna().to_numpy())


def _rows(page: str, after: str, n: int = 1) -> list[list[str]]:
    """The cells of the first table after the ``n``-th occurrence of ``after``."""
    at = -1
    for _ in range(n):
        at = page.index(after, at + 1)
    body = re.search(r"<tbody>(.*?)</tbody>", page[at:], re.S).group(1)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


def test_the_summary_leads_with_the_out_of_sample_record_then_each_strategy_with_its_interval(page, reports):
    r = reports[0].result
    head = _rows(page, "Out of sample: the walk-forward track record")
    assert [row[0] for row in head] == ["walk-forward", "buy &amp; hold"]
    assert head == [[html.escape(c, quote=False) for c in row] for row in track_rows(r)]  # "n/a (&lt; 1 year)"
    assert "<tr class=headline>" in page
    strategies = {row[0].rstrip("*†"): row for row in _rows(page, "In sample:")}
    assert list(strategies) == list(r.strategies)
    for name, row in strategies.items():
        m = r.strategies[name].metrics
        assert row[1] == pct(m["return"]) and row[3] == interval(m)
        if m["sharpe_ci_low"] is not None:
            assert row[3] == f"[{m['sharpe_ci_low']:+.1f}, {m['sharpe_ci_high']:+.1f}]"
    assert _rows(page, "Multiple testing") == [[c.replace("&", "&amp;") for c in row] for row in selection_rows(r)]
    skill = _rows(page, '<section id="skill">')
    assert [row[0] for row in skill] == ["SP500", "NASDAQ"]


def test_the_page_loads_nothing_from_a_network(page):
    assert plotly_js()[:2000] not in page  # the bundle is not inlined: one shared file beside the page
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(link|img|iframe)\b", page) and "@import" not in page and "url(" not in page
    assert len(re.findall(r"<script\b", page)) == 2 + len(figures(page))  # the bundle, the drawing, the figures
    assert re.findall(r'<script[^>]*\bsrc="([^"]*)"', page) == [bundle_name()]  # relative: opens offline


def test_data_cannot_break_out_of_the_page():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1.0], y=[2.0], name="</script><script>alert(1)</script>"))
    block = chart("c", fig, caption="<b>caption</b>")
    assert figures(block)["c"]["data"][0]["name"] == "</script><script>alert(1)</script>"  # JSON reads it back
    assert block.count("</script>") == 1 and "\\u003c" in block
    assert "&lt;b&gt;caption&lt;/b&gt;" in block
    assert table(["<x>"], [["a&b"]]) == ("<table><thead><tr><th>&lt;x&gt;</th></tr></thead><tbody><tr><td>a&amp;b"
                                         "</td></tr></tbody></table>")


def test_the_same_results_give_the_same_bytes(page, reports):
    assert tearsheet_html(reports) == page


def test_a_long_run_is_downsampled_with_its_extremes_kept():
    bars = random_bars(1600, seed=3, symbol="LONG")
    results = run_many([bars], BaselineForecaster(), BacktestConfig(windows=1500, context=32, num_samples=16))
    add_fans(results, [bars], BaselineForecaster())
    page = tearsheet_html(symbol_reports(results, [bars]))
    figs = figures(page)
    r = results[0]
    for name in (*r.strategies, WALK_FORWARD, BUY_AND_HOLD):
        y = trace(figs["s0-LONG-equity"], name)["y"]
        full = np.concatenate([[1.0], np.cumprod(1 + (r.walk_forward["returns"] if name == WALK_FORWARD else
                                                      r.benchmark.returns if name == BUY_AND_HOLD else
                                                      r.strategies[name].returns))])
        assert len(y) <= MAX_POINTS and y.min() == full.min() and y.max() == full.max() and y[-1] == full[-1]
    assert len(figs["s0-LONG-candles"]["data"][0]["close"]) == 250
    assert "Each curve of 1,501 points is drawn with at most 1,000" in page
