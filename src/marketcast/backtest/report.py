"""Reports of a backtest: rich tables, JSON per symbol, a Markdown summary, trades.csv and equity PNGs.

Everything is rendered in memory first and written only after all of it succeeded, each file through a
temporary name and an atomic rename, so a failed run never leaves a half-written output.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from rich import box
from rich.table import Table

from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.plots import equity_png
from marketcast.errors import MarketcastError


def _clean(value):
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def symbol_json(result: SymbolResult) -> dict:
    """The per-symbol JSON (key names of the original system, plus the honest extras)."""
    cfg = result.config
    best = result.best_strategy
    wf = result.walk_forward
    return _clean({
        "symbol": result.symbol,
        "runs": result.windows,
        "generated_at": result.generated_at,
        "asset_class": result.asset_class,
        "first_decision": result.decision_times[0].isoformat(),
        "last_settle": result.settle_times[-1].isoformat(),
        "annualisation": f"sqrt({252 if result.asset_class != 'crypto' else 365})",
        "config": {
            "model": result.forecast_meta.get("model"),
            "context": cfg.context, "num_samples": cfg.num_samples, "seed": cfg.seed, "point": cfg.point,
            "ci_band": list(cfg.ci_band), "ci_multiplier": cfg.ci_multiplier, "fill_mode": cfg.fill_mode,
            "same_bar": cfg.same_bar, "fee_per_side": cfg.costs(result.asset_class).fee,
            "spread": cfg.spread, "maxdiff_min_history": cfg.maxdiff_min_history,
        },
        "strategies": {name: run.metrics for name, run in result.strategies.items()},
        "metrics": {
            **result.skill,
            "market_return": result.market_return,
            # trade, at each window, the strategy best over the earlier windows: out of sample, unlike
            # best_strategy's own numbers (picked on the windows it is scored on)
            "walk_forward_oos_return": wf["metrics"]["return"],
            "walk_forward_oos_sharpe": wf["metrics"]["sharpe"],
            "walk_forward_turnover": wf["metrics"]["turnover"],
            "walk_forward_picks": wf["picked"],
        },
        "best_strategy": best,
        "next_decisions": None if result.latest_view is None else {
            "decision_time": pd.Timestamp(result.latest_view.timestamp).isoformat(),
            "close": result.latest_view.close,
            "decisions": {n: {"side": d.side, "entry_limit": d.entry_limit, "take_profit": d.take_profit}
                          for n, d in result.next_decisions.items()},
        },
        "forecast_meta": {k: v for k, v in result.forecast_meta.items() if isinstance(v, (str, int, float, bool, type(None)))},
    })


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:+.2f}%"


def _num(x, fmt="{:+.2f}") -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def summary_table(result: SymbolResult) -> Table:
    """``Backtest summary for SYMBOL (N windows)``: one row per strategy, the best one starred.

    Sized for an 80-column terminal; Calmar, turnover and final-day return are in the JSON and Markdown.
    """
    ann = 365 if result.asset_class == "crypto" else 252
    wf = result.walk_forward["metrics"]
    table = Table(title=f"Backtest summary for {result.symbol} ({result.windows} windows)",
                  caption=f"net of costs; Sharpe/Sortino × sqrt({ann}); market close-to-close "
                          f"{_pct(result.market_return)}; {result.decision_times[0]:%Y-%m-%d} → "
                          f"{result.settle_times[-1]:%Y-%m-%d}; * = best here (in-sample pick); trading the "
                          f"best-so-far each day: {_pct(wf['return'])}, Sharpe {_num(wf['sharpe'])}",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("strategy", "return", "annual", "Sharpe", "Sortino", "max DD", "win", "expo", "trades"):
        table.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=True)
    best = result.best_strategy
    for name, run in result.strategies.items():
        m = run.metrics
        table.add_row(
            f"[bold green]{name}*[/]" if name == best else name,
            _pct(m["return"]), _pct(m["annual_return"]), _num(m["sharpe"]), _num(m["sortino"]),
            _pct(-m["max_drawdown"] or 0.0), _num(m["win_rate"], "{:.0%}"), f"{m['exposure']:.0%}", str(m["trades"]),
        )
    return table


def skill_table(results: Sequence[SymbolResult]) -> Table:
    """Forecast skill per symbol: MAE (returns, in %), MASE vs no-change, CRPS (in %)."""
    table = Table(title="Forecast skill for bar t+1 (MASE < 1 beats no-change)", box=box.SIMPLE_HEAD,
                  collapse_padding=True,
                  pad_edge=False)
    for col in ("symbol", "model", "MAE c/h/l %", "MASE c/h/l", "CRPS c %"):
        table.add_column(col, justify="left" if col in ("symbol", "model") else "right", no_wrap=True)
    for r in results:
        s = r.skill
        table.add_row(
            r.symbol, str(r.forecast_meta.get("model", "?")),
            " / ".join(f"{100 * s[k]:.3f}" for k in ("close_val_loss", "high_val_loss", "low_val_loss")),
            " / ".join(_num(s[k], "{:.3f}") for k in ("mase_close", "mase_high", "mase_low")),
            f"{100 * s['crps_close']:.3f}",
        )
    return table


def markdown_summary(results: Sequence[SymbolResult]) -> str:
    """A Markdown page with one strategy table per symbol and the skill table."""
    lines = ["# Backtest summary", ""]
    if results:
        cfg = results[0].config
        lines += [f"Generated {results[0].generated_at}. Model `{results[0].forecast_meta.get('model')}`, "
                  f"{cfg.num_samples} samples, seed {cfg.seed}, point forecast `{cfg.point}`, context {cfg.context}, "
                  f"fill mode `{cfg.fill_mode}`, same-bar `{cfg.same_bar}`. Returns are net of fees and half "
                  "the spread per side; each decision at bar t is settled on bar t+1.", ""]
    for r in results:
        ann = 365 if r.asset_class == "crypto" else 252
        lines += [f"## {r.symbol} ({r.windows} windows, {r.decision_times[0]:%Y-%m-%d} → "
                  f"{r.settle_times[-1]:%Y-%m-%d})", "",
                  f"Sharpe and Sortino annualised by sqrt({ann}). Market close-to-close over the same bars: "
                  f"{_pct(r.market_return)}. Best strategy: **{r.best_strategy}** (picked on these same windows). "
                  f"Trading, each day, the strategy best over the earlier windows (out of sample): "
                  f"{_pct(r.walk_forward['metrics']['return'])}, Sharpe {_num(r.walk_forward['metrics']['sharpe'])}.", "",
                  "| strategy | return | annual | Sharpe | Sortino | max DD | Calmar | win rate | exposure | trades | turnover | final day |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, run in r.strategies.items():
            m = run.metrics
            lines.append(f"| {name} | {_pct(m['return'])} | {_pct(m['annual_return'])} | {_num(m['sharpe'])} | "
                         f"{_num(m['sortino'])} | {_pct(-m['max_drawdown'] or 0.0)} | {_num(m['calmar'])} | "
                         f"{_num(m['win_rate'], '{:.0%}')} | {m['exposure']:.0%} | {m['trades']} | "
                         f"{m['turnover']:.2f} | {_pct(m['final_day'])} |")
        s = r.skill
        lines += ["", f"Forecast skill: MAE close/high/low {s['close_val_loss']:.5f} / {s['high_val_loss']:.5f} / "
                  f"{s['low_val_loss']:.5f}; MASE {_num(s['mase_close'], '{:.3f}')} / "
                  f"{_num(s['mase_high'], '{:.3f}')} / {_num(s['mase_low'], '{:.3f}')}; "
                  f"CRPS close {s['crps_close']:.5f}.", "", f"![equity]({r.symbol}_equity.png)", ""]
    return "\n".join(lines)


def render_outputs(results: Sequence[SymbolResult]) -> dict[str, bytes]:
    """File name -> content for every output of the run (nothing written yet)."""
    files: dict[str, bytes] = {}
    for r in results:
        files[f"{r.symbol}.json"] = (json.dumps(symbol_json(r), indent=2) + "\n").encode()
        files[f"{r.symbol}_equity.png"] = equity_png(r)
    files["summary.md"] = markdown_summary(results).encode()
    trades = pd.concat([r.trades() for r in results], ignore_index=True)
    files["trades.csv"] = trades.to_csv(index=False, float_format="%.10g").encode()
    return files


def write_outputs(results: Sequence[SymbolResult], output_dir: str | Path) -> list[Path]:
    """Render everything, then write each file atomically into ``output_dir``."""
    files = render_outputs(results)
    folder = Path(output_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MarketcastError(f"{folder}: cannot create output directory ({exc.strerror})") from None
    written = []
    for name, content in files.items():
        final = folder / name
        tmp = folder / f".{name}.tmp-{os.getpid()}"
        try:
            tmp.write_bytes(content)
            os.replace(tmp, final)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise MarketcastError(f"{final}: cannot write ({exc.strerror})") from None
        written.append(final)
    return written
