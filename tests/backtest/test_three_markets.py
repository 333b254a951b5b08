"""The issue's check on three markets with the defaults: a GOOG-like hourly stock across a split jump, EURUSD
hourly (24/5) and BTC daily (24/7), each a file path given to ``marketcast backtest``: every symbol gets a DSR
and a PBO, nothing with fewer than ``min_trades`` trades is called best, every metric is finite or None, and
the annual figures of these sub-year runs are marked."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from marketcast.commands import main

from .helpers import goog_hourly


def walk(index: pd.DatetimeIndex, start: float, vol: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    close = start * np.exp(np.cumsum(rng.normal(0.0, vol, len(index))))
    open_ = np.r_[start, close[:-1]]
    wick = np.abs(rng.normal(0.0, vol / 3, len(index)))
    return pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * (1 + wick),
                         "low": np.minimum(open_, close) * (1 - wick), "close": close,
                         "volume": np.full(len(index), 1e6)}, index=index.rename("timestamp"))


def numbers(node):
    """Every number in a JSON tree."""
    if isinstance(node, dict):
        for v in node.values():
            yield from numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from numbers(v)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield node


def test_goog_eurusd_hourly_and_btc_daily_get_dsr_pbo_and_honest_figures(tmp_path, capsys):
    goog_hourly().to_csv(tmp_path / "GOOG.csv")
    fx = pd.date_range("2024-01-07 22:00", "2024-03-29 20:00", freq="h", tz="UTC")
    fx = fx[~((fx.dayofweek == 5) | ((fx.dayofweek == 4) & (fx.hour >= 21)) | ((fx.dayofweek == 6) & (fx.hour < 22)))]
    walk(fx, 1.09, 0.0008, 1).to_csv(tmp_path / "EURUSD.csv")
    walk(pd.date_range("2023-01-01", "2024-06-30", freq="D", tz="UTC"), 30_000.0, 0.03, 2).to_csv(
        tmp_path / "BTC.csv")
    paths = [str(tmp_path / f"{s}.csv") for s in ("GOOG", "EURUSD", "BTC")]
    assert main(["backtest", *paths, "--json", "--output-dir", str(tmp_path / "out")]) == 0
    report = json.loads(capsys.readouterr().out)
    symbols = {s["symbol"]: s for s in report}
    assert set(symbols) == {"GOOG", "EURUSD", "BTC"}
    classes = {}
    for name in ("GOOG", "EURUSD", "BTC"):
        sym = symbols[name]
        classes[name] = sym["asset_class"]
        sel = sym["selection"]
        eligible = sum(m["trades"] >= 10 for m in sym["strategies"].values())  # the trials: what the rule could pick
        assert 0.0 <= sel["dsr_pick"] <= 1.0 and 0.0 <= sel["pbo"] <= 1.0 and sel["trials"] == eligible, (name, sel)
        assert 1.0 <= sel["effective_trials"] <= eligible + 1e-9, (name, sel)
        assert all(math.isfinite(x) for x in numbers(sym)), name
        best = sym["best_strategy"]  # None when no strategy has min_trades trades
        assert best is None or sym["strategies"][best]["trades"] >= 10, (name, best)
        annual = [v for k, v in sym["strategies"]["simple"].items() if k in ("annual_return", "calmar")]
        assert annual and all(v is None for v in annual), (name, annual)  # under a year: not annualised
    assert classes == {"GOOG": "stock", "EURUSD": "forex", "BTC": "crypto"}
