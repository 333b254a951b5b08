"""``marketcast backtest``: walk-forward backtest of every strategy on each symbol, with reports."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from marketcast.backtest.config import CALIBRATIONS, MAXDIFF_GRIDS, STRATEGY_NAMES, BacktestConfig
from marketcast.backtest.costs import BP
from marketcast.backtest.engine import run_many
from marketcast.backtest.fills import FILL_MODES, SAME_BAR_MODES
from marketcast.backtest.period import Period, windows_of
from marketcast.backtest.selection import DEFAULT_LOOKBACK, DEFAULT_MIN_TRADES, SelectionRule
from marketcast.backtest.sizing import POLICIES
from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.console import console, print_json, progress_steps
from marketcast.data import DEFAULT_SYMBOLS, load_bars, load_symbol
from marketcast.data.asset import asset_classes
from marketcast.data.read import SUFFIXES
from marketcast.errors import ConfigError
from marketcast.forecast.aggregate import SPEC_HELP, validate_spec
from marketcast.forecast.registry import load_forecaster

DEFAULT_OUTPUT = Path("out/backtest")
MANY_WINDOWS = 10**9  # stands for a count the data decides, while the other settings are checked up front


#: The point spec's forms as --help lists them (the full grammar: marketcast.forecast.aggregate).
POINT_FORMS = ("median", "mean", "pNN", "quantile_Q", "trimmed_mean_F", "...")


def _point(value: str) -> str:
    """``--point``: refused by click (one line, exit 2) when :func:`validate_spec` does not parse it."""
    try:
        return validate_spec(value)
    except ConfigError as exc:
        raise typer.BadParameter(f"{exc}.") from None


def _strategies(value: str | None) -> tuple[str, ...]:
    if value is None:
        return STRATEGY_NAMES
    names = tuple(s.strip() for s in value.split(",") if s.strip())
    return names


def _check_costs(**given: float | None) -> None:
    """A negative cost option is one line and exit 2, in the option's own unit, before anything runs."""
    for name, value in given.items():
        if value is not None and not value >= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must not be negative, got {value:g}")


def _spread(spread: float | None, half_spread_bps: float | None) -> float | None:
    """The full quoted spread from ``--spread`` (a fraction) or ``--half-spread-bps``; None: the default."""
    if spread is not None and half_spread_bps is not None:
        raise ConfigError("give --spread or --half-spread-bps, not both")
    return spread if half_spread_bps is None else 2.0 * half_spread_bps * BP


def _file_arguments(symbols: list[str]) -> dict[str, Path]:
    """The arguments that name a file (an existing file, or a name ending in .csv/.parquet) -> their path; a
    file that does not exist is a one-line error."""
    files = {}
    for arg in symbols:
        path = Path(arg).expanduser()
        if path.is_file() or path.suffix.lower() in SUFFIXES:
            if not path.is_file():
                raise ConfigError(f"{arg}: no such file; pass a symbol or the path of a .csv/.parquet file of bars")
            files[arg] = path
    return files


def _run(bars: list, configs: list[BacktestConfig], forecaster, step, calibration_only: bool = False) -> list:
    """:func:`run_many` over symbols whose window counts may differ (``--windows all``, ``--start/--end``): one
    batched call per distinct config, results in the symbols' order."""
    results: list = [None] * len(bars)
    for config in dict.fromkeys(configs):
        at = [i for i, c in enumerate(configs) if c == config]
        for i, r in zip(at, run_many([bars[i] for i in at], forecaster, config, on_step=step,
                                     calibration_only=calibration_only)):
            results[i] = r
    return results


def _windows_text(configs: list[BacktestConfig]) -> str:
    """``12 windows``, or ``40-252 windows`` when the symbols' periods hold different counts."""
    counts = sorted({c.windows for c in configs})
    return f"{counts[0]} windows" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} windows"


def _calibration_only(bars: list, forecaster, configs: list[BacktestConfig], as_json: bool, html: bool,
                      plots: bool, started: float) -> None:
    """``--calibration-only``: the forecasts' skill and calibration tables (or JSON), nothing written."""
    from marketcast.backtest.report import calibration_only_json
    from marketcast.backtest.tables import calibration_table, skill_table

    if html or plots:
        raise ConfigError(f"--calibration-only writes no files; drop {'--html' if html else '--plots'}")
    with progress_steps(len(bars) + len(set(configs)), "calibration") as step:
        results = _run(bars, configs, forecaster, step, calibration_only=True)
    if as_json:
        print_json([calibration_only_json(r) for r in results])
        return
    console.print(skill_table(results))
    console.print(calibration_table(results))
    console.print(f"[dim]{len(results)} symbol{'s' if len(results) != 1 else ''} × {_windows_text(configs)}, "
                  f"calibration only, {time.perf_counter() - started:.1f} s[/dim]")


def backtest(
    symbols: Annotated[Optional[list[str]], typer.Argument(
        help=f"Symbols to test, or paths of .csv/.parquet files of bars (a file's symbol is its stem; default: "
             f"the embedded {' and '.join(DEFAULT_SYMBOLS)}).")] = None,
    windows: options.Windows = None,
    start: options.Start = None,
    end: options.End = None,
    model: options.Model = "baseline",
    weights: options.Weights = None,
    device: options.Device = "cpu",
    dtype: options.Dtype = "float32",
    context: options.Context = 512,
    samples: options.Samples = 256,
    seed: options.Seed = 0,
    point: Annotated[str, typer.Option(
        callback=_point, metavar=choice_list(POINT_FORMS),
        help=f"Aggregation spec of the point forecast, e.g. trimmed_mean_10 (forms: {SPEC_HELP}).")] = "median",
    fill_mode: Annotated[str, typer.Option(
        callback=options.one_of(FILL_MODES), metavar=choice_list(FILL_MODES),
        help="Limit fills: touch (low <= limit) or penetrate (through by 1 bp).")] = "touch",
    same_bar: Annotated[str, typer.Option(
        callback=options.one_of(SAME_BAR_MODES), metavar=choice_list(SAME_BAR_MODES),
        help="Limit entry and take profit in one bar: pessimistic or nearest.")] = "pessimistic",
    maxdiff_grid: Annotated[str, typer.Option(
        callback=options.one_of(MAXDIFF_GRIDS), metavar=choice_list(MAXDIFF_GRIDS),
        help="MaxDiff's offset grid: atr = -1.0 .. +1.0 times each window's ATR% (14-bar average true range over "
             "the close, from bars <= t), percent = the fixed -1 % .. +1 % grid.")] = "atr",
    fee: Annotated[Optional[float], typer.Option(
        help="Fee per side as a fraction (default per asset class: stock 0.0005, crypto 0.0025 = Alpaca's tier-1 "
             "taker fee, forex 0.00003, future 0.00001; see docs/backtest.md#costs).")] = None,
    half_spread_bps: Annotated[Optional[float], typer.Option(
        help="Half the quoted spread, paid per side, in basis points (default: stock 1, crypto 5, forex 0.5, "
             "future 0.25).")] = None,
    spread: Annotated[Optional[float], typer.Option(
        help="The full quoted spread as a fraction, half paid per side (the sweep grid's `spread`); an "
             "alternative to --half-spread-bps.")] = None,
    slippage_bps: Annotated[Optional[float], typer.Option(
        help="Slippage per side in basis points (default: stock 1, crypto 2, forex 0.2, future 0.25).")] = None,
    borrow_rate: Annotated[Optional[float], typer.Option(
        help="Short-borrow rate a year as a fraction, charged per bar held short as rate / periods a year "
             "(default: stock 0.005; crypto, forex and futures 0).")] = None,
    ci_low: Annotated[float, typer.Option(help="Lower quantile of ci_guard's band.")] = 0.40,
    ci_high: Annotated[float, typer.Option(help="Upper quantile of ci_guard's band.")] = 0.60,
    ci_multiplier: Annotated[float, typer.Option(help="Widen ci_guard's band about its centre by this factor.")] = 1.0,
    strategies: Annotated[Optional[str], typer.Option(help="Comma-separated subset of strategies (default all).")] = None,
    asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None,
    select_lookback: Annotated[int, typer.Option(
        help="Settled windows the walk-forward pick (and the live planner) looks back over; 0 = all.")
    ] = DEFAULT_LOOKBACK,
    min_trades: Annotated[int, typer.Option(
        help="Trades a strategy needs in the lookback to be picked or called best (and a series to get a PSR "
             "and a Sharpe CI).")
    ] = DEFAULT_MIN_TRADES,
    cscv_splits: Annotated[Optional[int], typer.Option(
        help="Blocks of the windows for the probability of backtest overfitting (CSCV): even, 2 to --windows; "
             "default 16, or the largest even number the windows allow.")] = None,
    spa: Annotated[bool, typer.Option(
        help="Hansen's SPA p-value of the best strategy against buy & hold (arch; about a second to import).")
    ] = True,
    calibrate: Annotated[str, typer.Option(
        callback=options.one_of(CALIBRATIONS), metavar=choice_list(CALIBRATIONS),
        help="Recalibrate every field's samples walk-forward before the strategies see them, from windows "
             "settled before each decision: none, conformal or quantile (marketcast.calibrate.recalibrate).")
    ] = "none",
    calibration_min_windows: Annotated[int, typer.Option(
        help="Settled windows before the first calibrated one (10 to --windows); earlier windows trade raw.")
    ] = 50,
    sizing: Annotated[str, typer.Option(
        callback=options.one_of(POLICIES), metavar=choice_list(POLICIES),
        help="Position size per trade from its sample returns: fixed (1.0), kelly (mu / sigma^2, capped at "
             "--kelly-cap) or cvar (the 95% expected shortfall loses --risk-per-trade of equity).")] = "fixed",
    kelly_cap: Annotated[float, typer.Option(help="Largest Kelly size, in (0, 1] (0.25: quarter Kelly).")] = 0.25,
    risk_per_trade: Annotated[float, typer.Option(
        help="cvar sizing: the equity fraction a trade's 95% tail may lose, in (0, 1].")] = 0.01,
    data_dir: options.DataDir = None,
    on_duplicate: options.OnDuplicate = "error",
    on_bad_line: options.OnBadLine = "error",
    output_dir: Annotated[Path, typer.Option(help="Where JSON, Markdown, trades.csv and PNGs go.")] = DEFAULT_OUTPUT,
    as_json: Annotated[bool, typer.Option("--json", help="Print the per-symbol JSON instead of tables.")] = False,
    plots: options.Plots = False,
    html: Annotated[bool, typer.Option("--html", help="Also write report.html: a self-contained tearsheet that "
                                                      "opens offline (see docs/reports.md).")] = False,
    fan_date: options.FanDates = None,
    calibration_only: Annotated[bool, typer.Option(
        "--calibration-only", help="Forecast skill and calibration only (coverage, PIT): no strategies, fills or "
                                   "selection; prints tables or --json and writes no files.")] = False,
    allow_in_sample: Annotated[bool, typer.Option(
        "--allow-in-sample", help="Score tuned --weights (with a tuning.json) on windows up to their --until too, "
                                  "marked in sample (default: refused).")] = False,
) -> None:
    """Walk-forward backtest: forecast bar t+1 from bars <= t, decide, settle on bar t+1."""
    from marketcast.backtest import fans
    from marketcast.backtest.report import symbol_json, write_outputs
    from marketcast.backtest.tables import (
        calibration_table,
        in_sample_table,
        selection_table,
        selection_verdict,
        skill_table,
        track_record_table,
    )
    from marketcast.fileio import output_folder
    from marketcast.runs.record import record_backtest
    from marketcast.signals import shielded

    started = time.perf_counter()
    _check_costs(fee=fee, half_spread_bps=half_spread_bps, spread=spread, slippage_bps=slippage_bps,
                 borrow_rate=borrow_rate)
    period = Period.of(windows, start, end, default=BacktestConfig.windows)
    config = BacktestConfig(  # a period's window count is known once the bars are: checked again then
        windows=period.fixed or MANY_WINDOWS, context=context, num_samples=samples, seed=seed, point=point,
        ci_band=(ci_low, ci_high), ci_multiplier=ci_multiplier, fill_mode=fill_mode, same_bar=same_bar,
        maxdiff_grid=maxdiff_grid,
        fee=fee, spread=_spread(spread, half_spread_bps),
        slippage=None if slippage_bps is None else slippage_bps * BP, borrow_rate=borrow_rate,
        strategies=_strategies(strategies),
        selection=SelectionRule(select_lookback or None, min_trades),
        cscv_splits=cscv_splits, spa=spa, calibrate=calibrate, calibration_min_windows=calibration_min_windows,
        sizing=sizing, kelly_cap=kelly_cap, risk_per_trade=risk_per_trade,
    )
    given = list(symbols or DEFAULT_SYMBOLS)
    files = _file_arguments(given)
    names = [files[s].stem.upper() if s in files else s.upper() for s in given]
    if len(set(names)) != len(names):
        raise ConfigError(f"symbols repeat: {', '.join(names)}")
    classes = asset_classes(asset_class, names)
    bars = [load_bars(files[s], symbol=n, asset_class=classes[n], on_duplicate=on_duplicate,
                      periods_per_year=periods_per_year, on_bad_line=on_bad_line)
            if s in files else
            load_symbol(n, data_dir=data_dir, asset_class=classes[n], on_duplicate=on_duplicate,
                        periods_per_year=periods_per_year, on_bad_line=on_bad_line)
            for s, n in zip(given, names)]
    folders = {str(p.resolve().parent) for p in files.values()}
    if files and data_dir is None and len(folders) == 1 and len(files) == len(given):
        data_dir = Path(folders.pop())  # the run store finds the files again as <SYMBOL>.csv in their folder
    forecaster = load_forecaster(model, weights=weights, device=device, dtype=dtype, seed=seed)
    dates = fans.parse_dates(fan_date)
    if dates and not html:
        raise ConfigError("--fan-date draws a fan in the HTML tearsheet; add --html")
    min_context = getattr(forecaster, "min_context", 2)
    cut = [windows_of(b, period, min_context) for b in bars]
    whole, bars = bars, [b for b, _ in cut]  # the period's bars run; the files' bars are what the store hashes
    configs = [config if period.fixed else replace(config, windows=w) for _, w in cut]
    for b, c in zip(bars, configs):
        fans.check_span(dates, b, c, min_context)
    from marketcast.forecast.tuning import guard_windows, read_tuning, sample_meta, sample_text  # tuned weights

    tuning = read_tuning(weights)  # never scored on the bars they were tuned on, unless asked and then marked
    guard_windows(tuning, [(b.symbol, w.frame, b.frame.index[max(len(b) - 1 - c.windows, 0):len(b) - 1])
                                         for b, w, c in zip(bars, whole, configs)], allow_in_sample)
    if calibration_only:
        _calibration_only(bars, forecaster, configs, as_json, html=html, plots=plots, started=started)
        return
    with progress_steps(len(bars) + len(set(configs)) + 1 + html, "backtest") as step:
        results = _run(bars, configs, forecaster, step)
        for r in results:  # every report (terminal, JSON, summary.md, tearsheet) reads the label from here
            r.forecast_meta = {**r.forecast_meta, **sample_meta(tuning, r.symbol, r.decision_times)}
        fans.add_fans(results, whole, forecaster, dates)  # stored with the run: `report RUN` only draws them
        if html:  # drawn before anything is written: a failure leaves no file behind
            step("drawing the HTML tearsheet")
            from marketcast.report.page import write_page  # plotly: only with --html
            from marketcast.report.tearsheet import PAGE_NAME, symbol_reports, tearsheet_html

            page = tearsheet_html(symbol_reports(results, whole))  # as `report RUN` draws it
        step("writing reports and plots" if plots else "writing reports")
        # everything goes into a hidden folder beside output_dir, which replaces it only once the run store
        # holds the run too: a failure or a signal leaves output_dir as it was and no temporary file
        with output_folder(output_dir) as out:
            names = [p.name for p in write_outputs(results, out.path, plots)]
            if html:
                names.append(PAGE_NAME)
                write_page(out.path / PAGE_NAME, page)
            with shielded():  # a signal now waits until the record and the rename are done
                run_id = record_backtest(results, whole, {
                    "model": model, "weights": weights, "device": device, "dtype": dtype, "asset_class": asset_class,
                    "data_dir": data_dir, "on_duplicate": on_duplicate, "periods_per_year": periods_per_year})
                out.commit()
    written = [output_dir / name for name in names]
    elapsed = time.perf_counter() - started
    if as_json:
        print_json([{**symbol_json(r), **({"run_id": run_id} if run_id else {})} for r in results])
        return
    for r in results:
        console.print(track_record_table(r))
        if r.calibration_note:
            console.print(f"[dim]{r.symbol}: {r.calibration_note}[/dim]", highlight=False)
        for warning in r.annualisation.warnings:
            console.print(f"[yellow]warning:[/] {r.symbol}: {warning}")
        if sample_text(r.forecast_meta, r.windows):
            console.print(f"{r.symbol}: {sample_text(r.forecast_meta, r.windows)}", highlight=False, markup=False)
        console.print(in_sample_table(r))
        console.print(selection_table(r))
        if selection_verdict(r):
            console.print(f"[bold yellow]{selection_verdict(r)}[/]", highlight=False)
        console.print()
    console.print(skill_table(results))
    console.print(calibration_table(results))
    console.print(f"[dim]{len(results)} symbol{'s' if len(results) != 1 else ''} × {_windows_text(configs)}, "
                  f"model {model}, {samples} samples, "
                  f"{elapsed:.1f} s; wrote {len(written)} files to {output_dir}/[/dim]")
    if html:
        console.print(f"tearsheet: {written[-1]}", highlight=False)
    if run_id:  # the last line, so `marketcast backtest ... | tail -1` names the run for `report` / `runs show`
        console.print(f"run {run_id}", highlight=False, markup=False, soft_wrap=True)
