"""``marketcast backtest``: walk-forward backtest of every strategy on each symbol, with reports.

The command parses its options into a :class:`~marketcast.backtest.job.Job`, runs it with the tearsheet and the
run store's recorder passed in (:func:`~marketcast.backtest.job.run_job`), and prints the tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from marketcast.backtest.config import CALIBRATIONS, MAXDIFF_GRIDS
from marketcast.backtest.fills import FILL_MODES, SAME_BAR_MODES
from marketcast.backtest.job import Done, Job, run_job
from marketcast.backtest.selection import DEFAULT_LOOKBACK, DEFAULT_MIN_TRADES
from marketcast.backtest.sizing import POLICIES, sizing_note
from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.console import console, print_json
from marketcast.data import DEFAULT_SYMBOLS
from marketcast.errors import ConfigError
from marketcast.fileio import LATEST
from marketcast.forecast.aggregate import SPEC_HELP, validate_spec
from marketcast.report.paging import TRADES_PER_PAGE

DEFAULT_OUTPUT = Path("out/backtest")
#: The point spec's forms as --help lists them (the full grammar: marketcast.forecast.aggregate).
POINT_FORMS = ("median", "mean", "pNN", "quantile_Q", "trimmed_mean_F", "...")


def _point(value: str) -> str:
    """``--point``: refused by click (one line, exit 2) when :func:`validate_spec` does not parse it."""
    try:
        return validate_spec(value)
    except ConfigError as exc:
        raise typer.BadParameter(f"{exc}.") from None


Symbols = Annotated[Optional[list[str]], typer.Argument(
    help=f"Symbols to test, or paths of .csv/.parquet files of bars (a file's symbol is its stem; default: "
         f"the embedded {' and '.join(DEFAULT_SYMBOLS)}).")]
Point = Annotated[str, typer.Option(
    callback=_point, metavar=choice_list(POINT_FORMS),
    help=f"Aggregation spec of the point forecast, e.g. trimmed_mean_10 (forms: {SPEC_HELP}).")]
FillMode = Annotated[str, typer.Option(
    callback=options.one_of(FILL_MODES), metavar=choice_list(FILL_MODES),
    help="Limit fills: touch (low <= limit) or penetrate (through by 1 bp).")]
SameBar = Annotated[str, typer.Option(
    callback=options.one_of(SAME_BAR_MODES), metavar=choice_list(SAME_BAR_MODES),
    help="Limit entry and take profit in one bar: pessimistic or nearest.")]
MaxdiffGrid = Annotated[str, typer.Option(
    callback=options.one_of(MAXDIFF_GRIDS), metavar=choice_list(MAXDIFF_GRIDS),
    help="MaxDiff's offset grid: atr = -1.0 .. +1.0 times each window's ATR% (14-bar average true range over "
         "the close, from bars <= t), percent = the fixed -1 % .. +1 % grid.")]
HalfSpreadBps = Annotated[Optional[float], typer.Option(
    help="Half the quoted spread, paid per side, in basis points (default: stock 1, crypto 5, forex 0.5, "
         "future 0.25).")]
Spread = Annotated[Optional[float], typer.Option(
    help="The full quoted spread as a fraction, half paid per side (the sweep grid's `spread`); an "
         "alternative to --half-spread-bps.")]
SlippageBps = Annotated[Optional[float], typer.Option(
    help="Slippage per side in basis points (default: stock 1, crypto 2, forex 0.2, future 0.25).")]
BorrowRate = Annotated[Optional[float], typer.Option(
    help="Short-borrow rate a year as a fraction, charged per bar held short as rate / periods a year "
         "(default: stock 0.005; crypto, forex and futures 0).")]
CiLow = Annotated[float, typer.Option(help="Lower quantile of ci_guard's band.")]
CiHigh = Annotated[float, typer.Option(help="Upper quantile of ci_guard's band.")]
CiMultiplier = Annotated[float, typer.Option(help="Widen ci_guard's band about its centre by this factor.")]
Strategies = Annotated[Optional[str], typer.Option(help="Comma-separated subset of strategies (default all).")]
SelectLookback = Annotated[int, typer.Option(
    help="Settled windows the walk-forward pick (and the live planner) looks back over; 0 = all.")
    ]
MinTrades = Annotated[int, typer.Option(
    help="Trades a strategy needs in the lookback to be picked or called best (and a series to get a PSR "
         "and a Sharpe CI).")
    ]
CscvSplits = Annotated[Optional[int], typer.Option(
    help="Blocks of the windows for the probability of backtest overfitting (CSCV): even, 2 to --windows; "
         "default 16, or the largest even number the windows allow.")]
Spa = Annotated[bool, typer.Option(
    help="Hansen's SPA p-values of the best strategy against buy & hold and cash (1,900 resamples).")
    ]
Calibrate = Annotated[str, typer.Option(
    callback=options.one_of(CALIBRATIONS), metavar=choice_list(CALIBRATIONS),
    help="Recalibrate every field's samples walk-forward before the strategies see them, from windows "
         "settled before each decision: none, conformal or quantile (marketcast.calibrate.recalibrate).")
    ]
CalibrationMinWindows = Annotated[int, typer.Option(
    help="Settled windows before the first calibrated one (10 to --windows); earlier windows trade raw.")
    ]
Sizing = Annotated[str, typer.Option(
    callback=options.one_of(POLICIES), metavar=choice_list(POLICIES),
    help="Position size per trade from its sample returns: fixed (1.0), kelly (--kelly-fraction x b* mu / "
         "sigma^2, capped at --kelly-cap) or cvar (the 95% expected shortfall loses --risk-per-trade of equity); "
         "b* is the strategy's skill measured on earlier windows (0 before 20 filled orders; -v prints it).")]
KellyCap = Annotated[float, typer.Option(help="Largest Kelly size, in (0, 1] (1: all of the allowed capital).")]
KellyFraction = Annotated[float, typer.Option(
    help="kelly sizing: the fraction of the Kelly size b* mu / sigma^2 taken, in (0, 1] (0.25: quarter Kelly).")]
RiskPerTrade = Annotated[float, typer.Option(
    help="cvar sizing: the equity fraction a trade's 95% tail may lose, in (0, 1].")]
Seeds = Annotated[int, typer.Option(
    help="Re-run with N seeds (--seed .. --seed + N - 1) and report the spread of every return; the files and "
         "the run store hold the first seed's run and the spread.")]
OutputDir = Annotated[Path, typer.Option(help="Root of the run folders: each run writes its JSON, Markdown, trades.csv "
                                              "and PNGs into ROOT/<run id>/, and ROOT/latest links the newest.")]
Html = Annotated[bool, typer.Option("--html", help="Also write report.html: a tearsheet that opens offline (Plotly "
                                                  "from one file in the output root; see docs/reports.md).")]
CalibrationOnly = Annotated[bool, typer.Option(
    "--calibration-only", help="Forecast skill and calibration only (coverage, PIT): no strategies, fills or "
                               "selection; prints tables or --json and writes no files.")]
#: ``--verbose`` counts (``-v``): 0 prints the verdict strip and the headline, 1 every table with its notes (the
#: output before the strip). A count, because typer has no option with an optional value (click's ``flag_value``
#: is not passed through by typer 0.29); a higher count names no level and is refused before any work (exit 2).
VERBOSE_LEVELS = 1


def _verbose(value: int) -> int:
    if value > VERBOSE_LEVELS:
        raise typer.BadParameter(f"level {value} (-{'v' * value}) is unknown: give --verbose (or -v) once for every "
                                 "table with its notes, or leave it out for the verdict strip and the headline.")
    return value


Verbose = Annotated[int, typer.Option(
    "--verbose", "-v", count=True, callback=_verbose,
    help="Also print every table (in sample, multiple testing, calibration) with its notes; without it: the "
         "verdict strip, the headline table and the forecast skill (the JSON and summary.md keep every number).")]
AllowInSample = Annotated[bool, typer.Option(
    "--allow-in-sample", help="Score tuned --weights (with a tuning.json) on windows up to their --until too, "
                              "marked in sample (default: refused).")]
RequireClean = Annotated[bool, typer.Option(
    "--require-clean", help="Refuse (exit 2) rather than label any window in sample, inside (or possibly inside) the "
                            "checkpoint's pretraining data, or weights of unknown provenance.")]


def backtest(
    symbols: Symbols = None, windows: options.Windows = None, start: options.Start = None, end: options.End = None,
    model: options.Model = "baseline", weights: options.Weights = None, device: options.Device = "cpu",
    dtype: options.Dtype = "float32", context: options.Context = 512, samples: options.Samples = 256,
    seed: options.Seed = 0, point: Point = "median", fill_mode: FillMode = "touch", same_bar: SameBar = "pessimistic",
    maxdiff_grid: MaxdiffGrid = "atr", fee: options.Fee = None,
    half_spread_bps: HalfSpreadBps = None, spread: Spread = None,
    slippage_bps: SlippageBps = None, borrow_rate: BorrowRate = None, ci_low: CiLow = 0.40, ci_high: CiHigh = 0.60,
    ci_multiplier: CiMultiplier = 1.0, strategies: Strategies = None, asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None, select_lookback: SelectLookback = DEFAULT_LOOKBACK,
    min_trades: MinTrades = DEFAULT_MIN_TRADES, cscv_splits: CscvSplits = None, spa: Spa = True,
    calibrate: Calibrate = "none", calibration_min_windows: CalibrationMinWindows = 50, sizing: Sizing = "fixed",
    kelly_cap: KellyCap = 1.0, kelly_fraction: KellyFraction = 0.25, risk_per_trade: RiskPerTrade = 0.01,
    min_context: options.MinContext = None, exit: options.Exit = "close", hold: options.Hold = False,
    data_dir: options.DataDir = None,
    on_duplicate: options.OnDuplicate = "error", on_bad_line: options.OnBadLine = "error",
    timezone: options.Timezone = None,
    output_dir: OutputDir = DEFAULT_OUTPUT, as_json: options.AsJson = False, plots: options.Plots = False,
    html: Html = False, trades_per_page: options.TradesPerPage = TRADES_PER_PAGE,
    fan_date: options.FanDates = None, calibration_only: CalibrationOnly = False,
    allow_in_sample: AllowInSample = False, seeds: Seeds = 1, verbose: Verbose = 0,
    require_clean: RequireClean = False,
) -> None:
    """Walk-forward backtest: forecast bar t+1 from bars <= t, decide, settle on bar t+1."""
    job = Job(**locals())  # the parameters, by name: nothing else is bound yet
    from marketcast.runs.record import record_backtest

    done = run_job(job, Tearsheet(trades_per_page) if html else None, record_backtest)
    if calibration_only:
        show_calibration(done, as_json)
    else:
        show(job, done)


class Tearsheet:
    """report.html, drawn by the report layer from the fans the backtest stored, as ``report RUN`` draws it
    (plotly: imported only with --html)."""

    html = ""

    def __init__(self, trades_per_page: int) -> None:
        self.trades_per_page = trades_per_page

    def draw(self, results, whole) -> None:
        from marketcast.report.tearsheet import symbol_reports, tearsheet_html

        self.html = tearsheet_html(symbol_reports(results, whole), trades_per_page=self.trades_per_page)

    def write(self, folder: Path) -> str:
        from marketcast.report.page import write_page
        from marketcast.report.tearsheet import PAGE_NAME

        write_page(folder / PAGE_NAME, self.html, bundle_dir=folder.parent)
        return PAGE_NAME


def show_calibration(done: Done, as_json: bool) -> None:
    """``--calibration-only``: the forecasts' skill and calibration tables (or JSON), nothing written."""
    from marketcast.backtest.report import calibration_only_json
    from marketcast.backtest.tables import calibration_table, skill_table

    if as_json:
        print_json([calibration_only_json(r) for r in done.results])
        return
    console.print(skill_table(done.results))
    console.print(calibration_table(done.results))
    for r in done.results:
        if r.context_warning:
            console.print(f"[yellow]warning:[/] {r.symbol}: {r.context_warning}", highlight=False, soft_wrap=True)
    n = len(done.results)
    console.print(f"[dim]{n} symbol{'s' if n != 1 else ''} × {done.windows_text()}, calibration only, "
                  f"{done.elapsed:.1f} s[/dim]")


def show(job: Job, done: Done) -> None:
    """Per symbol one line of what ran, the verdict strip (:mod:`marketcast.backtest.verdict`) and the headline
    table, then the forecast skill and the run's id last; ``--verbose`` adds every table and its notes (what the
    command printed before the strip existed). The JSON keeps every number."""
    from marketcast.backtest.report import symbol_json
    from marketcast.backtest.tables import (
        calibration_table, in_sample_table, seeds_table, selection_table, selection_verdict, skill_table,
        title, track_record_table,
    )
    from marketcast.backtest.verdict import build, terminal_lines
    from marketcast.forecast.cards import pretraining_text, provenance_text
    from marketcast.forecast.tuning import sample_text

    results, elapsed = done.results, done.elapsed
    if job.as_json:
        print_json([{**symbol_json(r), **({"run_id": done.run_id} if done.run_id else {})} for r in results])
        return
    notes = job.verbose >= 1
    for r in results:
        if not notes:
            console.print(f"[bold]{title(r)}[/bold]", highlight=False)
        for line in terminal_lines(r.symbol, build(r)):  # soft_wrap: a long answer stays one line in a log
            console.print(line, highlight=False, soft_wrap=True)
        console.print(track_record_table(r, notes))
        if r.calibration_note:
            console.print(f"[dim]{r.symbol}: {r.calibration_note}[/dim]", highlight=False)
        if notes and r.config.sizing != "fixed":
            console.print(f"{r.symbol}: {sizing_note(r.config, r.skills)}", style="dim", highlight=False, markup=False)
        for warning in r.annualisation.warnings:
            console.print(f"[yellow]warning:[/] {r.symbol}: {warning}")
        if r.context_warning:  # one line, so a script can count it
            console.print(f"[yellow]warning:[/] {r.symbol}: {r.context_warning}", highlight=False, soft_wrap=True)
        if sample_text(r.forecast_meta, r.windows):
            console.print(f"{r.symbol}: {sample_text(r.forecast_meta, r.windows)}", highlight=False, markup=False)
        if provenance_text(r.forecast_meta):
            console.print(f"{r.symbol}: {provenance_text(r.forecast_meta)}", highlight=False, markup=False,
                          soft_wrap=True)
        if pretraining_text(r.forecast_meta, r.windows):
            console.print(f"{r.symbol}: {pretraining_text(r.forecast_meta, r.windows)}", highlight=False,
                          markup=False, soft_wrap=True)
        if notes:
            console.print(in_sample_table(r, notes))
            if r.seeds:
                console.print(seeds_table(r, notes))
            console.print(selection_table(r, notes))
        if notes and selection_verdict(r):
            console.print(f"[bold yellow]{selection_verdict(r)}[/]", highlight=False)
        console.print()
    console.print(skill_table(results, notes))
    if notes:
        console.print(calibration_table(results, notes))
    else:
        console.print("[dim]every table with its notes: --verbose; the strip's rule and labels: "
                      "docs/backtest.md#verdict[/dim]", highlight=False)
    console.print(f"[dim]{len(results)} symbol{'s' if len(results) != 1 else ''} × {done.windows_text()}, "
                  f"model {job.model}, {job.samples} samples, "
                  f"{elapsed:.1f} s[/dim]", highlight=False)
    console.print(f"wrote {len(done.written)} files to {done.folder}/ ({job.output_dir / LATEST} links it)",
                  highlight=False, markup=False, soft_wrap=True)
    if job.html:
        console.print(f"tearsheet: {done.written[-1]}", highlight=False)
    if done.run_id:  # the last line, so `marketcast backtest ... | tail -1` names the run for `report` / `runs show`
        console.print(f"run {done.run_id}", highlight=False, markup=False, soft_wrap=True)
