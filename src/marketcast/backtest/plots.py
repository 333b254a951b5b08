"""Equity-curve PNGs, drawn on a bare Agg canvas (no pyplot state, no display needed)."""

from __future__ import annotations

import io

import pandas as pd

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from marketcast.backtest.metrics import equity_curve


def equity_png(result) -> bytes:
    """PNG bytes of every strategy's equity curve (start 1.0) for one :class:`SymbolResult`, with the
    walk-forward pick (bold) and buy and hold (the benchmark, black dashed)."""
    settled = result.equity()
    settled["walk-forward (out of sample)"] = equity_curve(result.walk_forward["returns"])
    settled["buy & hold (benchmark)"] = result.benchmark.equity
    start = pd.DataFrame(1.0, index=result.decision_times[:1], columns=settled.columns)
    equity = pd.concat([start, settled])  # every curve starts at 1 on the first decision bar
    fig = Figure(figsize=(9, 4.8), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    styles = {"walk-forward (out of sample)": {"linewidth": 2.4, "color": "tab:red"},
              "buy & hold (benchmark)": {"linewidth": 2.0, "color": "black", "linestyle": "--"}}
    for name in equity.columns:
        ax.plot(equity.index, equity[name].to_numpy(), label=name,
                **styles.get(name, {"linewidth": 1.0, "alpha": 0.7}))
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_title(f"{result.symbol}: equity, out of sample and per strategy ({result.windows} windows, net of costs)")
    ax.set_ylabel("equity (start = 1)")
    ax.legend(fontsize=8, ncol=2, loc="best")
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
