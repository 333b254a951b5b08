"""Benchmark: is Kelly sizing from measured skill still an on/off switch, and does the size fall with the spread?

Runs the baseline backtest with ``--sizing kelly`` (quarter Kelly within an ES_95 budget of 1 % of equity, cap 1)
on the embedded daily files (the default 70 windows; 1,000 windows; the earlier period 2005-2008) and on a
synthetic heavy-tailed, skewed daily series (:func:`marketcast.backtest.sizing_check.skewed_series`: GARCH(1,1)
volatility, Jones-Faddy skew-t innovations with skewness -1.2 and excess kurtosis 8), and prints, over every order
a strategy placed (side not flat, all strategies pooled): the share at the cap, the share at 0, and the Spearman
rank correlation of size with the forecast's spread (the 10-90 % width of the close samples) among the sizes
strictly between 0 and the cap; next to it the same run with the ES budget off (``risk_per_trade`` 1: Kelly alone,
the rule before) and the same orders sized at face value (skill 1:
:func:`marketcast.backtest.sizing.order_sizes` of the same samples). Writes benchmarks/results/sizing_bench.json
(docs/backtest.md quotes it).

    PYTHONPATH=src python benchmarks/sizing_bench.py [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, write_report  # noqa: E402

from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.engine import run_backtest  # noqa: E402
from marketcast.backtest.sizing import order_sizes  # noqa: E402
from marketcast.backtest.sizing_check import earlier_period, figures, placed_orders, skewed_series  # noqa: E402
from marketcast.data import load_symbol  # noqa: E402
from marketcast.forecast.baseline import BaselineForecaster  # noqa: E402


def face_value(result) -> np.ndarray:
    """Every placed order's size at face value (skill 1, the same rule), in :func:`placed_orders`' order."""
    samples = {f: s[:result.windows] for f, s in result.sample_returns.items()}
    cfg = result.config
    face = []
    for run in result.strategies.values():
        o = run.decisions
        size = order_sizes(o.side, o.entry_limit, o.take_profit, result.views.close, samples, "kelly",
                           kelly_cap=cfg.kelly_cap, kelly_fraction=cfg.kelly_fraction,
                           risk_per_trade=cfg.risk_per_trade, skill=1.0)
        face.append(size[o.side != 0])
    return np.concatenate(face)


def cases():
    for symbol in ("SP500", "NASDAQ"):
        bars = load_symbol(symbol)
        yield f"{symbol} default (70 windows)", bars, 70
        yield f"{symbol} 1,000 windows", bars, 1000
        yield f"{symbol} 2005-2008", *earlier_period(bars)
    for seed in (0, 1):
        yield f"synthetic skewed, heavy-tailed (seed {seed}), 1,000 windows", skewed_series(seed=seed), 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "sizing_bench.json"))
    args = parser.parse_args(argv)
    from marketcast.console import console

    rows = []
    header = (f"{'case':58} {'orders':>6} {'cap':>6} {'zero':>6} {'inner':>6} {'rho':>7} | {'cap':>6} {'inner':>6} "
              f"{'rho':>7} | {'cap@1':>6} {'rho@1':>7}")
    print(f"{'':58} {'':6} {'kelly within the ES budget':>36} | {'kelly alone (before)':>22} | {'skill 1':>14}")
    print(header)
    for label, bars, windows in cases():
        # under close: the rule the docs' figures and tests/backtest/test_calibrated_sizing.py were measured under
        config = BacktestConfig(sizing="kelly", windows=windows, spa=False, bootstrap_reps=10, exit="close")
        result = run_backtest(bars, BaselineForecaster(), config)
        alone = run_backtest(bars, BaselineForecaster(), replace(config, risk_per_trade=1.0))
        sizes, widths = placed_orders(result)
        row = {"case": label, "windows": windows, "orders": len(sizes),
               "measured": figures(sizes, widths, config.kelly_cap),
               "kelly_alone": figures(placed_orders(alone)[0], widths, config.kelly_cap),
               "face_value": figures(face_value(result), widths, config.kelly_cap),
               "skill": {n: s.describe() for n, s in result.skills.items()}}
        rows.append(row)
        m, a, f = row["measured"], row["kelly_alone"], row["face_value"]
        rho, rho0, rho1 = ("n/a" if x["spearman_inner"] is None else f"{x['spearman_inner']:+.3f}" for x in (m, a, f))
        print(f"{label:58} {len(sizes):6d} {m['at_cap']:6.1%} {m['at_zero']:6.1%} {m['inner']:6d} {rho:>7} | "
              f"{a['at_cap']:6.1%} {a['inner']:6d} {rho0:>7} | {f['at_cap']:6.1%} {rho1:>7}")
    write_report(args.out, {"benchmark": "sizing", "policy": "kelly 0.25 within an ES_95 budget of 1 % of equity, "
                            "cap 1, baseline forecaster; kelly_alone: the ES budget off (risk_per_trade 1), the rule "
                            "before",
                            "rows": rows}, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
