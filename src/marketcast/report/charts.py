"""Shared chart plumbing: time as numbers, one quiet style, downsampled lines.

Times go to Plotly as milliseconds since the epoch (UTC) on a date axis, so every array is a numpy float
array that Plotly serialises as a compact base64 typed array instead of one ISO string per point.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from marketcast.report.downsample import MAX_POINTS, m4_indices

WALK_FORWARD_COLOUR = "#d62728"
BENCHMARK_COLOUR = "#111111"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
UP, DOWN = "#26a269", "#c01c28"
HEIGHT = 380


def ms(times) -> np.ndarray:
    """UTC milliseconds since the epoch of a DatetimeIndex (what a Plotly date axis reads from numbers)."""
    index = pd.DatetimeIndex(times)
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    return index.asi8.astype(np.float64) / 1e6


def figure(title: str, y_title: str, height: int = HEIGHT, **layout) -> go.Figure:
    """An empty figure in the page's style."""
    return styled(go.Figure(), title, y_title, height, **layout)


def styled(fig: go.Figure, title: str, y_title: str, height: int = HEIGHT, **layout) -> go.Figure:
    """``fig`` in the page's style (no Plotly template: it would add kilobytes to every chart), every x axis a
    date axis."""
    fig.update_layout(**{
        "template": "none", "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "height": height, "margin": {"l": 64, "r": 24, "t": 48, "b": 40}, "hovermode": "x unified",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "legend": {"orientation": "h", "y": -0.14, "x": 0, "font": {"size": 11}},
        "paper_bgcolor": "white", "plot_bgcolor": "white", **layout})
    fig.update_xaxes(type="date", gridcolor="#eeeeee", linecolor="#999999", showline=True)
    fig.update_yaxes(gridcolor="#eeeeee", zerolinecolor="#bbbbbb", linecolor="#999999", showline=True)
    fig.update_layout(yaxis_title_text=y_title)  # the first (left) y axis
    return fig


def line(times, values, name: str, max_points: int = MAX_POINTS, **style) -> go.Scatter:
    """A line with at most ``max_points`` points (M4, :mod:`marketcast.report.downsample`); NaN is dropped."""
    x, y = ms(times), np.asarray(values, dtype=np.float64)
    finite = np.isfinite(y)
    x, y = x[finite], y[finite]
    keep = m4_indices(y, max_points)
    return go.Scatter(x=x[keep], y=y[keep], name=name, mode="lines", **style)


def log_ticks(low: float, high: float) -> dict:
    """A log axis's ticks from ``low`` to ``high`` at 1-2-5 times a power of ten (only the powers past four
    decades), each labelled with its full value ("0.5", "2", "1,000"): Plotly's own log labels print the 2 and
    5 between decades as bare digits that read like the next decade's."""
    lo, hi = math.floor(math.log10(max(low, 1e-300))), math.ceil(math.log10(max(high, 1e-300)))
    steps = (1.0,) if hi - lo > 4 else (1.0, 2.0, 5.0)
    values = [m * 10.0 ** e for e in range(lo, hi + 1) for m in steps]
    values = [v for v in values if low / 1.0001 <= v <= high * 1.0001] or [low, high]
    return {"type": "log", "tickmode": "array", "tickvals": values, "ticktext": [tick_label(v) for v in values]}


def linear_ticks(low: float, high: float, count: int = 5) -> dict:
    """An axis of its own from ``low`` to ``high``: about ``count`` ticks at a round step (1, 2, 2.5 or 5 times
    a power of ten): a second y axis gets round ticks of its own instead of ones that line up with the first
    axis' grid (the rolling chart's volatility read 2/11/20/28 %)."""
    span = max(high - low, 1e-12)
    raw = span / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw * (1 - 1e-9))
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    values = [round(k * step, 12) for k in range(first, last + 1)]
    return {"tickmode": "array", "tickvals": values, "range": [values[0], values[-1]]}


def tick_label(value: float) -> str:
    """A tick's full value: thousands separated above 1, plain decimals below (no "1e-05" or "k")."""
    if value >= 1:
        return f"{value:,.0f}" if value == round(value) else f"{value:,.2f}"
    return f"{value:.12f}".rstrip("0").rstrip(".")


def downsampled(n: int, max_points: int = MAX_POINTS) -> str:
    """A caption's note on how a long series was drawn ('' when it was drawn whole)."""
    if n <= max_points:
        return ""
    return (f" Each curve of {n:,} points is drawn with at most {max_points:,}: per bucket of "
            f"{n / (max_points // 4):.1f} consecutive points its first, last, lowest and highest (M4), so "
            "every peak and trough stays.")
