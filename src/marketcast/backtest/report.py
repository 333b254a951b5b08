"""Reports of a backtest: JSON per symbol, the Markdown summary, trades.csv and, on request (``--plots``), equity
PNGs (the terminal tables are in :mod:`marketcast.backtest.tables`). Drawing costs more than the whole default
backtest (importing matplotlib alone about half a second), so plots are drawn only when asked for.

Everything is rendered in memory first and written only after all of it succeeded, each file through a
temporary name and an atomic rename; the CLI writes into the hidden staging folder of
:func:`marketcast.fileio.output_folder`, which replaces the output folder only after the run store recorded the
run, so a failed or stopped run never leaves a half-written output.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from marketcast.backtest import context as seen_context
from marketcast.backtest.benchmark import DESCRIPTION as BENCHMARK_DESCRIPTION
from marketcast.backtest.benchmark import NAME as BENCHMARK_NAME
from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.markdown import markdown_summary
from marketcast.backtest.returns import DEFINITIONS as RETURN_DEFINITIONS
from marketcast.backtest.returns import DETAILS as RETURN_DETAILS
from marketcast.backtest.strategies import STRATEGIES
from marketcast.backtest.verdict import build as verdict_of
from marketcast.fileio import write_files
from marketcast.forecast.exposure import exposure_json


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


def _calibration(result: SymbolResult) -> dict:
    """Which windows traded on recalibrated samples (1-based window numbers, as the note says), and the
    coverage and PIT report of the samples the strategies saw (:func:`marketcast.backtest.engine.report_calibration`)."""
    done = np.flatnonzero(result.calibrated) if result.calibrated is not None else np.array([], dtype=int)
    return {"method": result.config.calibrate, "min_windows": result.config.calibration_min_windows,
            "calibrated_windows": int(len(done)), "first_calibrated_window": int(done[0] + 1) if len(done) else None,
            "note": result.calibration_note, **(result.calibration_report or {})}


def context_seen(result: SymbolResult) -> dict:
    """The real bars of history the scored windows read (min and max), the ``--context`` asked for, how many
    windows read fewer, and the warning line, if any (:mod:`marketcast.backtest.context`)."""
    return {**seen_context.summary(result.context_seen, result.config.context),
            "warning": result.context_warning or None}


def calibration_only_json(result: SymbolResult) -> dict:
    """The per-symbol JSON of ``--calibration-only``: identity, forecast skill and the calibration block (no
    strategy ran)."""
    return _clean({"symbol": result.symbol, "runs": result.windows, "generated_at": result.generated_at,
                   "asset_class": result.asset_class, "first_decision": result.decision_times[0].isoformat(),
                   "last_settle": result.settle_times[-1].isoformat(), "model": result.forecast_meta.get("model"),
                   "calibration_only": True, "context_seen": context_seen(result), "skill": result.skill,
                   "calibration": _calibration(result), **exposure_json(result.forecast_meta)})


def signed_drawdown(metrics: dict) -> dict:
    """A record as a reader sees it: ``max_drawdown`` as a fall, <= 0, as quantstats and every table print it
    (:mod:`marketcast.backtest.metrics` keeps the positive size its Calmar ratio and the trading gates use)."""
    value = metrics.get("max_drawdown")
    return {**metrics, "max_drawdown": None if value is None else 0.0 - abs(value)}


def mc_keys(error, close_calls: int | None = None, strategy: bool = False) -> dict:
    """A return's Monte Carlo error beside its metrics (:mod:`marketcast.backtest.montecarlo`): ``mc_se``,
    ``mc_band`` (95 % band of a re-run with another seed), ``mc_batch_returns``, ``mc_exponent`` (the measured
    scaling), ``mc_unreliable`` (biased batches) and, for a ``strategy``, its
    ``close_calls``; None where there is no estimate (fewer than 32 samples)."""
    keys = {"mc_se": None if error is None else error.se, "mc_band": None if error is None else error.band,
            "mc_batch_returns": None if error is None else list(error.batch_values),
            "mc_exponent": None if error is None else error.exponent,
            "mc_unreliable": None if error is None else error.unreliable}
    return {**keys, "close_calls": close_calls} if strategy else keys


def symbol_json(result: SymbolResult) -> dict:
    """The per-symbol JSON: the original system's keys (``runs``, ``strategies``, ``metrics.walk_forward_oos_*``,
    ``best_strategy``) plus the honest extras (asset class and why, periods per year and how, the benchmark,
    the selection rule, PSR, bootstrap intervals, alpha/beta/IR)."""
    cfg = result.config
    wf = result.walk_forward
    wfm = wf["metrics"]
    ann = result.annualisation
    mc = result.monte_carlo
    return _clean({
        "symbol": result.symbol,
        "runs": result.windows,
        "generated_at": result.generated_at,
        "asset_class": result.asset_class,
        "asset_class_reason": result.asset_reason,
        "first_decision": result.decision_times[0].isoformat(),
        "last_settle": result.settle_times[-1].isoformat(),
        "annualisation": f"sqrt({ann.periods_per_year:g})",
        "periods_per_year": ann.periods_per_year,
        "periods_per_year_how": ann.how,
        "bar_interval": ann.interval.label,
        "calendar": ann.calendar,
        "data_warnings": list(ann.warnings),
        # what the weights may have seen (marketcast.forecast.exposure): tuned weights' sample label ("in sample",
        # "out of sample", "out of sample, other symbol"), a dated card's pretraining label, provenance "unknown"
        **exposure_json(result.forecast_meta),
        "config": {
            "model": result.forecast_meta.get("model"),
            "context": cfg.context, "num_samples": cfg.num_samples, "seed": cfg.seed, "point": cfg.point,
            "ci_band": list(cfg.ci_band), "ci_multiplier": cfg.ci_multiplier, "fill_mode": cfg.fill_mode,
            "same_bar": cfg.same_bar, "exit": cfg.exit, "hold": cfg.hold, "fee_per_side": result.costs.fee,
            "spread": result.costs.spread, "slippage": result.costs.slippage, "borrow_rate": result.costs.borrow_rate,
            "maxdiff_min_history": cfg.maxdiff_min_history, "maxdiff_grid": cfg.maxdiff_grid,
            "select_lookback": cfg.selection.lookback, "min_trades": cfg.selection.min_trades,
            "bootstrap_reps": cfg.bootstrap_reps,
            "confidence": cfg.confidence, "cscv_splits": cfg.cscv_splits, "spa": cfg.spa,
            "calibrate": cfg.calibrate, "calibration_min_windows": cfg.calibration_min_windows,
            "sizing": cfg.sizing, "kelly_cap": cfg.kelly_cap, "risk_per_trade": cfg.risk_per_trade,
            "min_context": cfg.min_context,
            "kelly_fraction": cfg.kelly_fraction,
            "equity": cfg.equity,  # --equity: day trades refused under $25,000 (backtest/day_trades.py); None: off
        },
        "context_seen": context_seen(result),
        "calibration": _calibration(result),
        "costs": result.costs.describe(),
        "walk_forward": {"rule": cfg.selection.describe(), "lookback": cfg.selection.lookback,
                         "min_trades": cfg.selection.min_trades, **signed_drawdown(wfm),
                         **mc_keys(None if mc is None else mc.walk_forward)},
        "benchmark": {"name": BENCHMARK_NAME, "description": BENCHMARK_DESCRIPTION,
                      **signed_drawdown(result.benchmark.metrics)},
        "strategies": {name: {**signed_drawdown(run.metrics), **mc_keys(
            None if mc is None else mc.strategies[name], None if mc is None else mc.close_calls[name], True),
            # kelly / cvar: the skill measured after the last window and the next decision's size
            **({} if run.skill is None else {"sizing": {**run.skill.describe(), "next_size": run.next_size}})}
            for name, run in result.strategies.items()},
        "strategy_descriptions": {name: STRATEGIES[name].description for name in result.strategies},
        "metrics": {
            **result.skill,
            "market_return": result.market_return,
            "benchmark_return": result.benchmark.metrics["return"],
            # the selection rule's pick at each window (see "walk_forward"): out of sample, unlike
            # best_strategy's own numbers (picked on the windows it is scored on)
            "walk_forward_oos_return": wfm["return"],
            "walk_forward_oos_sharpe": wfm["sharpe"],
            "walk_forward_oos_psr": wfm["psr"],
            "walk_forward_oos_sharpe_ci_low": wfm["sharpe_ci_low"],
            "walk_forward_oos_sharpe_ci_high": wfm["sharpe_ci_high"],
            "walk_forward_oos_alpha": wfm["alpha"],
            "walk_forward_oos_beta": wfm["beta"],
            "walk_forward_oos_information_ratio": wfm["information_ratio"],
            "walk_forward_turnover": wfm["turnover"],
            "walk_forward_picks": wf["picked"],
            # Monte Carlo error of the walk-forward return (marketcast.backtest.montecarlo; None under 32 samples)
            "walk_forward_oos_return_mc_se": None if mc is None else mc.walk_forward.se,
            "walk_forward_oos_return_mc_band": None if mc is None else mc.walk_forward.band,
        },
        "monte_carlo": None if mc is None else mc.as_dict(),
        **({"seeds": result.seeds} if result.seeds else {}),
        "best_strategy": result.best_strategy,
        "best_strategy_is": ("in-sample: picked on the windows it is scored on; never a strategy with fewer than "
                             f"{cfg.selection.min_trades} trades (min_trades)"),
        "strategies_compared": len(result.strategies),
        # multiple testing (marketcast.backtest.overfit) over the strategies the rule could pick: deflated Sharpe,
        # the walk-forward rule's PSR and DSR, PBO (CSCV), SPA against buy & hold (close->close, intraday), cash
        "selection": result.overfit.as_dict(),
        # the verdict strip (marketcast.backtest.verdict): the figures every surface prints first, with statuses
        "verdict": verdict_of(result),
        "next_decisions": None if result.latest_view is None else {
            "decision_time": pd.Timestamp(result.latest_view.timestamp).isoformat(),
            "close": result.latest_view.close,
            "decisions": {n: {"side": d.side, "entry_limit": d.entry_limit, "take_profit": d.take_profit}
                          for n, d in result.next_decisions.items()},
        },
        # which return each section uses (marketcast.backtest.returns): the strategies trade open t+1 -> close
        # t+1, buy & hold holds overnight; "skill" (the MAE/MASE/CRPS keys of "metrics") scores forecasts of bar
        # t+1 from close t
        "return_definitions": dict(RETURN_DEFINITIONS),
        "return_definitions_detail": dict(RETURN_DETAILS),
        "forecast_meta": {k: v for k, v in result.forecast_meta.items() if isinstance(v, (str, int, float, bool, type(None)))},
    })


def render_outputs(results: Sequence[SymbolResult], plots: bool = False) -> dict[str, bytes]:
    """File name -> content for every output of the run (nothing written yet); equity PNGs when ``plots``."""
    files: dict[str, bytes] = {}
    for r in results:
        files[f"{r.symbol}.json"] = (json.dumps(symbol_json(r), indent=2) + "\n").encode()
    if plots:
        from marketcast.backtest.plots import equity_png  # matplotlib: only when asked for

        files.update({f"{r.symbol}_equity.png": equity_png(r) for r in results})
    files["summary.md"] = markdown_summary(results, plots).encode()
    trades = pd.concat([r.trades() for r in results], ignore_index=True)
    files["trades.csv"] = csv_text(trades).encode()
    return files


def csv_text(frame: pd.DataFrame, float_format: str = "%.10g") -> str:
    """``frame.to_csv(index=False, float_format=...)``, the same text in half the time: each column is formatted
    in one pass and the csv module quotes and joins the rows (pandas formats value by value through its
    formatter objects, which for 40,000 trades took longer than simulating them)."""
    columns = []
    for name in frame.columns:
        values = frame[name]
        if values.dtype.kind == "f":
            columns.append([float_format % x if x == x else "" for x in values.tolist()])
        elif values.dtype.kind in "iub":
            columns.append([str(x) for x in values.tolist()])
        else:
            columns.append(["" if x is None or x != x else str(x) for x in values.tolist()])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(frame.columns)
    writer.writerows(zip(*columns))
    return out.getvalue()


def write_outputs(results: Sequence[SymbolResult], output_dir: str | Path, plots: bool = False) -> list[Path]:
    """Render everything, then write the files into ``output_dir`` all or nothing."""
    return write_files(output_dir, render_outputs(results, plots))
