"""``marketcast models compare``'s work, from its options to the recorded leaderboard: the symbols' bars, each
model backtested over the same windows with the forecast-driven strategies
(:data:`marketcast.backtest.strategies.FORECAST_DRIVEN`, :mod:`marketcast.leaderboard.compare`), its row, the
buy-and-hold benchmark's row, and one run in the store.

Kept out of the command so the command only parses and prints, and so a leaderboard is made without the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from marketcast.errors import ConfigError


@dataclass(frozen=True)
class Leaderboard:
    """The symbols compared on, a row per model (:func:`marketcast.leaderboard.compare.model_row`), the run, and
    buy and hold's row (:func:`marketcast.leaderboard.compare.benchmark_row`; the same windows for every model)."""

    symbols: list[str]
    rows: list[dict]
    run_id: Optional[str]  # None when the run store is off
    benchmark: dict | None = None
    windows: int = 70  # per symbol, the same for every model
    verdicts: list[dict] = field(default_factory=list)  # per model and symbol: {model, symbol, verdict} (the strip)
    skipped: list[dict] = field(default_factory=list)  # --skip-missing: {model, reason} of each model left out


def parse_symbols(symbols: str) -> list[str]:
    """``--symbols SP500,nasdaq`` -> ``["SP500", "NASDAQ"]``; empty or repeated is one line, exit 2."""
    tickers = [s.strip().upper() for s in symbols.split(",") if s.strip()]
    if not tickers:
        raise ConfigError("--symbols is empty; give a comma-separated list, e.g. --symbols SP500,NASDAQ")
    if len(set(tickers)) != len(tickers):
        raise ConfigError(f"--symbols repeats a symbol ({symbols}); list each once")
    return tickers


def common_windows(bars, windows) -> int:
    """``--windows``: N (default 70), or ``all``: every window each symbol's history allows, cut to the fewest of
    them so every symbol and every model is scored on windows of one count (the first needs the baseline's three
    real bars of context)."""
    from marketcast.backtest.config import BacktestConfig
    from marketcast.backtest.period import ALL, Period, windows_of
    from marketcast.forecast.baseline import BaselineForecaster

    if windows is None:
        return BacktestConfig.windows
    if windows != ALL:
        return int(windows)
    return min(windows_of(b, Period(ALL), BaselineForecaster.min_context)[1] for b in bars)


def compare_models(symbols: str, models: Optional[str], weights: Optional[Sequence[str]], *, windows, samples: int,
                   context: int, seed: int, device: str, dtype: str, data_dir: Optional[Path],
                   store: Optional[str], exit_rule: str = "close", skip_missing: bool = False,
                   hold: bool = False) -> Leaderboard:
    """Backtest the same windows with each model (a progress bar on stderr) and record one run.

    ``models`` None: every model whose optional extra is installed. Every model is checked before any runs
    (:func:`marketcast.leaderboard.compare.check_models`): a missing one ends the command, or with
    ``skip_missing`` is left out and said. Every model trades only the forecast-driven strategies: a forecast-blind one trades the same whatever the
    model, so as the walk-forward pick it would make models look alike; buy and hold is the benchmark row."""
    from marketcast.backtest.config import BacktestConfig
    from marketcast.backtest.strategies import FORECAST_DRIVEN
    from marketcast.backtest.verdict import build as verdict_of
    from marketcast.console import progress_steps
    from marketcast.data import load_symbol
    from marketcast.leaderboard.compare import (benchmark_row, check_models, default_models, model_rows, parse_models,
                                                parse_weights, refuse_tuned, run_model)
    from marketcast.leaderboard.record import record_leaderboard
    from marketcast.signals import shielded

    names = parse_models(default_models() if models is None else models)
    chosen = parse_weights(weights, names)
    tickers = parse_symbols(symbols)
    skipped = check_models(names, chosen, skip_missing)  # before any work
    names = [n for n in names if n not in {s["model"] for s in skipped}]
    chosen = {n: w for n, w in chosen.items() if n in names}
    bars = [load_symbol(s, data_dir=data_dir) for s in tickers]
    config = BacktestConfig(windows=common_windows(bars, windows), context=context, num_samples=samples, seed=seed,
                            strategies=FORECAST_DRIVEN, exit=exit_rule, hold=hold)
    refuse_tuned(chosen, bars, config)
    runs = []
    with progress_steps(len(names) * (len(bars) + 2), "models compare") as step:  # load, forecast, simulate
        for name in names:
            step(f"{name}: loading")
            runs.append(run_model(name, bars, config, weights=chosen.get(name), device=device, dtype=dtype,
                                  step=step))
    rows, benchmark = model_rows(runs), benchmark_row(runs[0].results)
    with shielded():
        run_id = record_leaderboard(runs, rows, bars, {"data_dir": data_dir}, store, benchmark, skipped)
    verdicts = [{"model": run.model, "symbol": r.symbol, "verdict": verdict_of(r)} for run in runs for r in run.results]
    return Leaderboard(tickers, rows, run_id, benchmark, config.windows, verdicts, skipped)
