"""The tearsheet's charts of one symbol, each a Plotly figure built from :mod:`marketcast.report.series`."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from marketcast.backtest.breadth import rolling_stats, rolling_window, yearly_returns
from marketcast.backtest.engine import SymbolResult, decision_rows
from marketcast.backtest.fans import QUANTILES, Fan
from marketcast.backtest.orders import LONG
from marketcast.data.bars import Bars
from marketcast.report.charts import (
    BENCHMARK_COLOUR, DOWN, PALETTE, UP, WALK_FORWARD_COLOUR, figure, line, linear_ticks, log_ticks, ms, styled,
)
from marketcast.report.downsample import MAX_POINTS, m4_indices
from marketcast.report.series import (
    BUY_AND_HOLD, WALK_FORWARD, drawdown, equity_frame, fan_path, monthly_returns, return_histogram, rolling_beta,
    rolling_skill, skill_window, walk_forward_trades,
)

EXIT_WIN, EXIT_LOSS = "exit, net gain", "exit, net loss"
LOW_LEGEND = {"orientation": "h", "y": -0.2, "x": 0, "font": {"size": 11}}  # below an x axis title
CANDLE_WINDOWS = 250  # the most recent windows drawn as candles: enough to read each trade
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
HEADLINE = {WALK_FORWARD: {"color": WALK_FORWARD_COLOUR, "width": 2.6},
            BUY_AND_HOLD: {"color": BENCHMARK_COLOUR, "width": 2.0, "dash": "dash"}}


def _style(name: str, k: int) -> dict:
    return {"line": HEADLINE.get(name, {"color": PALETTE[k % len(PALETTE)], "width": 1.1}),
            "opacity": 1.0 if name in HEADLINE else 0.75}


def equity_chart(result: SymbolResult) -> go.Figure:
    """Every strategy's equity with the walk-forward pick and buy and hold on top; log scale when the
    curves span more than a factor of 10."""
    eq = equity_frame(result)
    fig = figure(f"{result.symbol}: equity against buy & hold (start = 1, net of costs)", "equity")
    order = [c for c in eq.columns if c not in HEADLINE] + list(HEADLINE)
    for k, name in enumerate(order):
        fig.add_trace(line(eq.index, eq[name].to_numpy(), name, hovertemplate="%{y:.4f}", **_style(name, k)))
    _log_when_wide(fig, eq.to_numpy())
    return fig


def _log_when_wide(fig: go.Figure, values: np.ndarray) -> None:
    """A log y axis with full-value ticks (:func:`log_ticks`) when the curves span more than a factor of 10."""
    values = values[np.isfinite(values)]
    low, high = max(float(values.min()), 1e-12), float(values.max())
    if high / low > 10:
        fig.update_yaxes(**log_ticks(low, high))


def is_log(fig: go.Figure) -> bool:
    """Whether the chart's (first) y axis came out logarithmic (:func:`_log_when_wide`): its caption says so."""
    return fig.layout.yaxis.type == "log"


def overview_chart(result: SymbolResult, height: int = 360) -> go.Figure:
    """The first chart: the walk-forward record's equity against buy and hold, each drawdown shaded between
    the record's running peak and its equity."""
    eq = equity_frame(result)
    wf = eq[WALK_FORWARD].to_numpy()
    peak = np.maximum.accumulate(wf)
    keep = m4_indices(wf, MAX_POINTS)  # the same points for the peak and the equity, so the shading meets both
    x = ms(eq.index)[keep]
    fig = figure(f"{result.symbol}: walk-forward equity against buy & hold (start = 1, net of costs)", "equity",
                 height=height, margin={"l": 64, "r": 16, "t": 44, "b": 36})
    fig.add_trace(go.Scatter(x=x, y=peak[keep], name="running peak", mode="lines", hoverinfo="skip",
                             line={"color": "rgba(214,39,40,0.35)", "width": 0.8}, showlegend=False))
    fig.add_trace(go.Scatter(x=x, y=wf[keep], name=WALK_FORWARD, mode="lines", fill="tonexty",
                             fillcolor="rgba(214,39,40,0.16)", hovertemplate="%{y:.4f}", **_style(WALK_FORWARD, 0)))
    fig.add_trace(line(eq.index, eq[BUY_AND_HOLD].to_numpy(), BUY_AND_HOLD, hovertemplate="%{y:.4f}",
                       **_style(BUY_AND_HOLD, 1)))
    _log_when_wide(fig, eq[[WALK_FORWARD, BUY_AND_HOLD]].to_numpy().ravel())
    return fig


def rolling_chart(result: SymbolResult) -> go.Figure:
    """The walk-forward record's trailing Sharpe ratio (left) and volatility (right), both annualised
    (:func:`marketcast.backtest.breadth.rolling_stats`)."""
    w = rolling_window(result.windows, result.periods_per_year)
    roll = rolling_stats(result.walk_forward["returns"], result.settle_times, result.periods_per_year, w)
    fig = figure(f"{result.symbol}: walk-forward rolling Sharpe ratio and volatility ({w} windows)", "Sharpe ratio",
                 margin={"l": 64, "r": 72, "t": 48, "b": 40})  # room for the right axis' title
    fig.add_trace(line(roll.index, roll["sharpe"].to_numpy(), f"Sharpe ratio ({w} windows)",
                       hovertemplate="%{y:.2f}", line={"color": WALK_FORWARD_COLOUR, "width": 1.6}))
    fig.add_trace(line(roll.index, roll["volatility"].to_numpy(), f"volatility ({w} windows, right)", yaxis="y2",
                       hovertemplate="%{y:.1%}", line={"color": "#555555", "width": 1.3, "dash": "dot"}))
    vol = roll["volatility"].to_numpy()
    top = float(np.nanmax(vol)) if np.isfinite(vol).any() else 0.0
    fig.update_layout(yaxis2={"title": {"text": "volatility (annualised)"}, "overlaying": "y", "side": "right",
                              "tickformat": ".0%", "showgrid": False, **linear_ticks(0.0, top or 0.01)})
    fig.add_hline(y=0.0, line={"color": "#bbbbbb", "width": 1})
    return fig


def drawdown_chart(result: SymbolResult) -> go.Figure:
    """Underwater curves: the walk-forward record, buy and hold, and the in-sample best strategy."""
    eq = equity_frame(result)
    names = [WALK_FORWARD, BUY_AND_HOLD] + ([result.best_strategy] if result.best_strategy else [])
    fig = figure(f"{result.symbol}: drawdown from the running peak", "drawdown")
    for k, name in enumerate(names):
        label = name if name in HEADLINE else f"{name} (in-sample best)"
        shade = {"fill": "tozeroy", "fillcolor": "rgba(214,39,40,0.12)"} if name == WALK_FORWARD else {}
        fig.add_trace(line(eq.index, drawdown(eq[name]), label, hovertemplate="%{y:.2%}", **shade,
                           **_style(name, k)))
    fig.update_yaxes(tickformat=".0%")
    return fig


def monthly_chart(result: SymbolResult) -> go.Figure:
    """The walk-forward record's compounded return per calendar month; each year's total in its label."""
    return _monthly(result.walk_forward["returns"], result.settle_times,
                    f"{result.symbol}: walk-forward monthly returns")


def benchmark_monthly_chart(result: SymbolResult) -> go.Figure:
    """Buy and hold's compounded return per calendar month over the same windows (quantstats'
    ``monthly_heatmap`` of the benchmark)."""
    return _monthly(result.benchmark.returns, result.settle_times, f"{result.symbol}: buy & hold monthly returns")


def _monthly(returns: np.ndarray, times, title: str) -> go.Figure:
    table = monthly_returns(returns, times)
    yearly = yearly_returns(returns, times)
    z = table.to_numpy(dtype=np.float64)
    text = np.where(np.isfinite(z), np.char.mod("%+.1f%%", np.nan_to_num(100 * z)), "")
    fig = figure(title, "", height=max(220, 90 + 26 * len(table)), hovermode="closest")
    fig.add_trace(go.Heatmap(
        z=z, x=list(MONTHS), y=[f"{y} ({100 * r:+.1f}%)" for y, r in yearly.items()], text=text,
        texttemplate="%{text}", colorscale=[[0, DOWN], [0.5, "#f7f7f7"], [1, UP]], zmid=0.0,
        hovertemplate="%{y} %{x}: %{z:.2%}<extra></extra>", colorbar={"thickness": 12, "tickformat": ".1%"},
        xgap=2, ygap=2, name="month"))
    fig.update_xaxes(type="category", showgrid=False, side="top")
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False, automargin=True)
    return fig


def yearly_chart(result: SymbolResult) -> go.Figure:
    """End-of-year returns of the walk-forward record beside buy and hold's (quantstats' ``yearly_returns``
    plot: each calendar year's compounded return; a partial first or last year is its part)."""
    wf = yearly_returns(result.walk_forward["returns"], result.settle_times)
    bh = yearly_returns(result.benchmark.returns, result.settle_times)
    years = [str(y) for y in wf.index]
    fig = figure(f"{result.symbol}: end-of-year returns against buy & hold", "return in the year",
                 hovermode="x unified", barmode="group")
    fig.add_trace(go.Bar(x=years, y=wf.to_numpy(), name=WALK_FORWARD, marker={"color": WALK_FORWARD_COLOUR},
                         hovertemplate="%{y:.2%}"))
    fig.add_trace(go.Bar(x=years, y=bh.to_numpy(), name=BUY_AND_HOLD, marker={"color": BENCHMARK_COLOUR},
                         opacity=0.55, hovertemplate="%{y:.2%}"))
    fig.update_xaxes(type="category")
    fig.update_yaxes(tickformat=".0%")
    return fig


def distribution_chart(result: SymbolResult) -> go.Figure:
    """The distribution of per-window net returns, the record's against buy and hold's on the same bins
    (:func:`marketcast.report.series.return_histogram`), each mean a vertical line."""
    wf, bh = result.walk_forward["returns"], result.benchmark.returns
    edges, wf_share, bh_share = return_histogram(wf, bh)
    mids, width = (edges[:-1] + edges[1:]) / 2, float(edges[1] - edges[0])
    fig = figure(f"{result.symbol}: distribution of per-window returns", "share of windows",
                 hovermode="closest", barmode="overlay", bargap=0.0)
    for name, share, colour in ((BUY_AND_HOLD, bh_share, BENCHMARK_COLOUR), (WALK_FORWARD, wf_share,
                                                                              WALK_FORWARD_COLOUR)):
        fig.add_trace(go.Bar(x=mids, y=share, width=width, name=name, marker={"color": colour}, opacity=0.5,
                             hovertemplate="%{x:.2%}: %{y:.1%} of windows<extra></extra>"))
    for values, colour, dash in ((wf, WALK_FORWARD_COLOUR, "solid"), (bh, BENCHMARK_COLOUR, "dash")):
        fig.add_vline(x=float(np.mean(values)), line={"color": colour, "width": 1.4, "dash": dash})
    fig.update_xaxes(type="linear", tickformat=".1%", title_text="net return of the window")
    fig.update_yaxes(tickformat=".0%")
    fig.update_layout(legend=LOW_LEGEND)
    return fig


def beta_chart(result: SymbolResult) -> go.Figure:
    """The walk-forward record's trailing beta against buy and hold (:func:`marketcast.report.series.
    rolling_beta`) over the rolling Sharpe chart's windows; 1 moves with the market, 0 ignores it."""
    w = rolling_window(result.windows, result.periods_per_year)
    beta = rolling_beta(result.walk_forward["returns"], result.benchmark.returns, result.settle_times, w)
    fig = figure(f"{result.symbol}: walk-forward rolling beta against buy & hold ({w} windows)", "beta")
    fig.add_trace(line(beta.index, beta.to_numpy(), f"beta ({w} windows)", hovertemplate="%{y:.2f}",
                       line={"color": WALK_FORWARD_COLOUR, "width": 1.6}))
    for level in (0.0, 1.0):
        fig.add_hline(y=level, line={"color": "#bbbbbb", "width": 1, "dash": "dot" if level else "solid"})
    return fig


def candle_chart(result: SymbolResult, bars: Bars, last: int = CANDLE_WINDOWS) -> go.Figure:
    """The settle bars of the last ``last`` windows with the walk-forward record's entries (triangles,
    pointing the way of the trade) and exits (crosses, green for a gain and red for a loss)."""
    rows = decision_rows(result, bars)
    shown = min(last, len(rows))
    frame = bars.frame.iloc[rows[-shown] + 1:rows[-1] + 2]
    start = frame.index[0]
    fig = figure(f"{result.symbol}: the walk-forward record's trades on the last {shown:,} settle bars",
                 "price", height=440, hovermode="closest")
    fig.add_trace(go.Candlestick(x=ms(frame.index), open=frame["open"].to_numpy(), high=frame["high"].to_numpy(),
                                 low=frame["low"].to_numpy(), close=frame["close"].to_numpy(), name=result.symbol,
                                 increasing={"line": {"color": UP}}, decreasing={"line": {"color": DOWN}}))
    trades = [t for t in walk_forward_trades(result) if t.settle_time >= start]
    for side, symbol, colour in ((LONG, "triangle-up", UP), (-LONG, "triangle-down", DOWN)):
        chosen = [t for t in trades if t.side == side]
        if chosen:
            fig.add_trace(go.Scatter(
                x=ms([t.settle_time for t in chosen]), y=np.array([t.entry_price for t in chosen]), mode="markers",
                name=f"{chosen[0].label} entry", text=[f"{t.strategy} {t.label} entry" for t in chosen],
                marker={"symbol": symbol, "size": 10, "color": colour, "line": {"width": 1, "color": "#333"}},
                hovertemplate="%{text} %{y:.2f}<extra></extra>"))
    for name, colour, chosen in ((EXIT_WIN, UP, [t for t in trades if t.net_return > 0]),
                                 (EXIT_LOSS, DOWN, [t for t in trades if t.net_return <= 0])):
        if chosen:  # an x-thin marker is all line: its colour is the line's, not the marker's fill
            fig.add_trace(go.Scatter(
                x=ms([t.settle_time for t in chosen]), y=np.array([t.exit_price for t in chosen]), mode="markers",
                name=name,
                marker={"symbol": "x-thin", "size": 9, "color": colour, "line": {"width": 2, "color": colour}},
                text=[f"{t.strategy} {t.label} exit ({t.exit_reason.replace('_', ' ')}), net {t.net_return:+.2%}"
                      for t in chosen], hovertemplate="%{text} %{y:.2f}<extra></extra>"))
    closed = closed_days(frame.index)
    if len(closed):  # daily bars: no empty slots for weekends and holidays
        fig.update_xaxes(rangebreaks=[{"values": ms(closed), "dvalue": 86_400_000}])
    fig.update_xaxes(rangeslider={"visible": False})
    return fig


def closed_days(index) -> pd.DatetimeIndex:
    """The days between the first and last bar that have no bar, when the bars are daily (else none)."""
    index = pd.DatetimeIndex(index)
    if len(index) < 2 or (index != index.normalize()).any() or pd.Series(index).diff().median() != pd.Timedelta("1D"):
        return pd.DatetimeIndex([], tz=index.tz)
    return pd.date_range(index[0], index[-1], freq="D").difference(index)


def fan_chart(symbol: str, fans: Sequence[Fan], bars: Bars) -> go.Figure:
    """One panel per fan: the closes before it, the P10-P90 and P25-P75 bands and the median of the
    forecast, and the realised closes."""
    titles = [f"from {f.decision_time:%Y-%m-%d %H:%M}".removesuffix(" 00:00") for f in fans]
    fig = styled(make_subplots(rows=1, cols=len(fans), subplot_titles=titles),
                 f"{symbol}: forecast fans against the realised path", "close", hovermode="x",
                 margin={"l": 64, "r": 24, "t": 76, "b": 40})
    lo_out, lo_in, mid, hi_in, hi_out = QUANTILES
    for col, f in enumerate(fans, start=1):
        history, realised = fan_path(f, bars)
        anchor_x, anchor_y = ms([f.decision_time]), np.array([history.iloc[-1]])
        x = np.concatenate([anchor_x, ms(f.times)])
        band = {q: np.concatenate([anchor_y, f.quantiles[q]]) for q in QUANTILES}
        first = col == 1
        for lo, hi, alpha, label in ((lo_out, hi_out, 0.18, "P10-P90"), (lo_in, hi_in, 0.35, "P25-P75")):
            fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]), y=np.concatenate([band[hi], band[lo][::-1]]),
                                     fill="toself", mode="lines", line={"width": 0}, hoverinfo="skip",
                                     fillcolor=f"rgba(31,119,180,{alpha})", name=label, legendgroup=label,
                                     showlegend=first), row=1, col=col)
        fig.add_trace(go.Scatter(x=x, y=band[mid], name="median forecast", legendgroup="median", showlegend=first,
                                 line={"color": "#1f77b4", "dash": "dash"}, mode="lines"), row=1, col=col)
        fig.add_trace(go.Scatter(x=ms(history.index), y=history.to_numpy(), name="close before",
                                 legendgroup="before", showlegend=first, line={"color": BENCHMARK_COLOUR, "width": 1.2},
                                 mode="lines"), row=1, col=col)
        fig.add_trace(go.Scatter(x=np.concatenate([anchor_x, ms(realised.index)]),
                                 y=np.concatenate([anchor_y, realised.to_numpy()]), name="realised",
                                 legendgroup="realised", showlegend=first, mode="lines+markers",
                                 line={"color": "#ff7f0e", "width": 2}, marker={"size": 4}), row=1, col=col)
    fig.update_xaxes(nticks=4)
    return fig


def skill_chart(result: SymbolResult, bars: Bars) -> go.Figure:
    """Trailing MASE of the bar-t+1 point forecasts over time (below 1 beats the naive forecast)."""
    skill = rolling_skill(result, bars)
    w = skill_window(result.windows)
    fig = figure(f"{result.symbol}: forecast skill over time (MASE over the last {w} windows)", "MASE")
    names = {"close": "close vs no change", "high": "high vs excursion", "low": "low vs excursion"}
    for k, (field, label) in enumerate(names.items()):
        fig.add_trace(line(skill.index, skill[field].to_numpy(), label, hovertemplate="%{y:.3f}",
                           line={"color": PALETTE[k], "width": 1.4}))
    fig.add_hline(y=1.0, line={"color": "#888888", "dash": "dot", "width": 1})
    return fig


def reliability_chart(result: SymbolResult) -> go.Figure:
    """Reliability diagram per field: observed frequency of outcomes below the forecast's tau-quantile
    against tau (the PIT's empirical CDF, :func:`marketcast.calibrate.pit.reliability_points`), the central
    intervals' coverage as markers, and the diagonal a calibrated forecast follows."""
    block = result.calibration_report or {}
    fig = figure(f"{result.symbol}: reliability diagram, bar t+1 ({block.get('scope', 'no windows')})",
                 "observed frequency", hovermode="closest", legend=LOW_LEGEND)
    fig.add_trace(go.Scatter(x=np.array([0.0, 1.0]), y=np.array([0.0, 1.0]), mode="lines", name="calibrated",
                             line={"color": "#888888", "dash": "dot", "width": 1}))
    for k, (name, f) in enumerate(block.get("fields", {}).items()):
        colour = PALETTE[k % len(PALETTE)]
        fig.add_trace(go.Scatter(x=np.array(f["reliability"]["nominal"]), y=np.array(f["reliability"]["observed"]),
                                 mode="lines+markers", name=f"{name}: quantile level", line={"color": colour},
                                 marker={"size": 5}, hovertemplate="tau %{x:.2f}: %{y:.1%}<extra></extra>"))
        cov = f["coverage"]
        fig.add_trace(go.Scatter(
            x=np.array([c["nominal"] for c in cov]), y=np.array([c["rate"] for c in cov]), mode="markers",
            name=f"{name}: central interval coverage", marker={"symbol": "diamond", "size": 9, "color": colour},
            error_y={"type": "data", "symmetric": False, "array": np.array([c["hi"] - c["rate"] for c in cov]),
                     "arrayminus": np.array([c["rate"] - c["lo"] for c in cov])},
            hovertemplate="nominal %{x:.0%}: %{y:.1%}<extra></extra>"))
    fig.update_xaxes(type="linear", range=[0, 1], tickformat=".0%", title_text="nominal")
    fig.update_yaxes(range=[0, 1], tickformat=".0%")
    return fig


def pit_chart(result: SymbolResult) -> go.Figure:
    """The PIT histogram per field (10 bins) against the flat line of a calibrated forecast, with the KS and
    chi-square p-values in the legend."""
    block = result.calibration_report or {}
    fig = figure(f"{result.symbol}: PIT histogram, bar t+1", "share of windows", hovermode="closest",
                 barmode="group", legend=LOW_LEGEND)
    for k, (name, f) in enumerate(block.get("fields", {}).items()):
        pit = f["pit"]
        counts = np.asarray(pit["counts"], dtype=np.float64)
        centres = (np.arange(pit["bins"]) + 0.5) / pit["bins"]
        fig.add_trace(go.Bar(x=centres, y=counts / max(pit["n"], 1), name=f"{name} (KS p={pit['ks_p']:.2f}, "
                                                                          f"χ² p={pit['chi2_p']:.2f})",
                             marker={"color": PALETTE[k % len(PALETTE)]},
                             hovertemplate="PIT %{x:.2f}: %{y:.1%}<extra></extra>"))
        if k == 0:
            fig.add_hline(y=1.0 / pit["bins"], line={"color": "#888888", "dash": "dot", "width": 1})
    fig.update_xaxes(type="linear", range=[0, 1], title_text="PIT")
    fig.update_yaxes(tickformat=".0%")
    return fig
