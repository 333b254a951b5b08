"""``marketcast backtest`` as one function: what the user asked for (:class:`Job`) in, the results and the files
written out (:class:`Done`).

The steps: settings checked before any work, bars read and cut (:func:`marketcast.backtest.prepare.prepare`),
one batched engine call per distinct config, the forecast fans computed and stored on the results (the report
layer only draws them), the reports rendered into a hidden folder that becomes the run's own folder under
``--output-dir`` (named by its run id, :func:`marketcast.fileio.run_folder`) only once the run is recorded. The rooms above the backtest come in as arguments: ``page`` draws the
HTML tearsheet (the report layer), ``record`` stores the run (the run store); the backtest imports neither.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

from marketcast.backtest import fans
from marketcast.backtest.config import STRATEGY_NAMES, BacktestConfig
from marketcast.backtest.costs import BP
from marketcast.backtest.engine import SymbolResult, run_many
from marketcast.backtest.montecarlo import seed_spread
from marketcast.backtest.period import Period
from marketcast.backtest.prepare import DataOptions, load_inputs, prepare
from marketcast.backtest.selection import SelectionRule
from marketcast.console import progress_steps
from marketcast.data import DEFAULT_SYMBOLS
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError

MANY_WINDOWS = 10**9  # stands for a count the data decides, while the other settings are checked up front


class Page(Protocol):
    """The HTML tearsheet, from the report layer: drawn from the results (their fans included) before anything is
    written (a failure leaves no file), then written into the output folder."""

    def draw(self, results: list[SymbolResult], whole: list[Bars]) -> None: ...

    def write(self, folder: Path) -> str:
        """Write the drawn page into the run folder ``folder`` (the shared Plotly file goes to the output root, its
        parent); returns its file name."""


#: Stores the run under the id given (the run folder's name); returns it, None when the store is off.
Record = Callable[[list[SymbolResult], list[Bars], dict, str], Optional[str]]


@dataclass
class Job:
    """The backtest command's options, by their names (see ``marketcast backtest --help``)."""

    symbols: Optional[list[str]] = None
    windows: object = None
    start: Optional[str] = None
    end: Optional[str] = None
    model: str = "baseline"
    weights: Optional[str] = None
    device: str = "cpu"
    dtype: str = "float32"
    context: int = 512
    samples: int = 256
    seed: int = 0
    seeds: int = 1
    point: str = "median"
    fill_mode: str = "touch"
    same_bar: str = "pessimistic"
    maxdiff_grid: str = "atr"
    fee: Optional[float] = None
    half_spread_bps: Optional[float] = None
    spread: Optional[float] = None
    slippage_bps: Optional[float] = None
    borrow_rate: Optional[float] = None
    ci_low: float = 0.40
    ci_high: float = 0.60
    ci_multiplier: float = 1.0
    strategies: Optional[str] = None
    asset_class: Optional[list[str]] = None
    periods_per_year: Optional[float] = None
    select_lookback: int = 0
    min_trades: int = 0
    cscv_splits: Optional[int] = None
    spa: bool = True
    calibrate: str = "none"
    calibration_min_windows: int = 50
    sizing: str = "fixed"
    kelly_cap: float = 1.0
    risk_per_trade: float = 0.01
    min_context: Optional[int] = None
    kelly_fraction: float = 0.25
    exit: str = "close"
    hold: bool = False
    data_dir: Optional[Path] = None
    on_duplicate: str = "error"
    timezone: Optional[str] = None
    on_bad_line: str = "error"
    output_dir: Path = Path("out/backtest")
    as_json: bool = False
    plots: bool = False
    html: bool = False
    trades_per_page: int = 100  # rows of the tearsheet's trade list at a time: report.paging.TRADES_PER_PAGE
    fan_date: Optional[list[str]] = None
    calibration_only: bool = False
    allow_in_sample: bool = False
    require_clean: bool = False  # refuse in-sample, pretraining-exposed or unknown-provenance windows
    verbose: int = 0  # 0: the verdict strip and the headline; 1: every table with its notes (commands/backtest.py)

    def config(self, period: Period) -> BacktestConfig:
        """The engine's settings, checked before anything is read (a period's window count is known once the
        bars are, and checked again then)."""
        for name in ("fee", "half_spread_bps", "spread", "slippage_bps", "borrow_rate"):
            value = getattr(self, name)
            if value is not None and not value >= 0:  # in the option's own unit, before anything runs
                rule = "must be a number" if value != value else "must not be negative"
                raise ConfigError(f"--{name.replace('_', '-')} {rule}, got {value:g}")
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise ConfigError(f"--seeds must be a whole number >= 1, got {self.seeds!r}; pass 1 for one run, or N to "
                              "re-run with seeds --seed .. --seed + N - 1 and report the spread")
        if self.spread is not None and self.half_spread_bps is not None:
            raise ConfigError("give --spread or --half-spread-bps, not both")
        spread = self.spread if self.half_spread_bps is None else 2.0 * self.half_spread_bps * BP
        strategies = STRATEGY_NAMES if self.strategies is None else tuple(
            s.strip() for s in self.strategies.split(",") if s.strip())
        return BacktestConfig(
            windows=period.fixed or MANY_WINDOWS, context=self.context, num_samples=self.samples, seed=self.seed,
            point=self.point, ci_band=(self.ci_low, self.ci_high), ci_multiplier=self.ci_multiplier,
            fill_mode=self.fill_mode, same_bar=self.same_bar, maxdiff_grid=self.maxdiff_grid, fee=self.fee,
            spread=spread, slippage=None if self.slippage_bps is None else self.slippage_bps * BP,
            borrow_rate=self.borrow_rate, strategies=strategies,
            selection=SelectionRule(self.select_lookback or None, self.min_trades), cscv_splits=self.cscv_splits,
            spa=self.spa, calibrate=self.calibrate, calibration_min_windows=self.calibration_min_windows,
            sizing=self.sizing, kelly_cap=self.kelly_cap, risk_per_trade=self.risk_per_trade,
            min_context=self.min_context, kelly_fraction=self.kelly_fraction, exit=self.exit,
            hold=self.hold)

    def data(self) -> DataOptions:
        return DataOptions(self.data_dir, self.asset_class, self.on_duplicate, self.on_bad_line,
                           self.periods_per_year, timezone=self.timezone)


@dataclass
class Done:
    """A finished backtest: its results (in the symbols' order), the files written (in ``folder``, the run's own
    folder under the output root) and the run recorded."""

    results: list[SymbolResult]
    configs: list[BacktestConfig]
    started: float
    written: list[Path] = field(default_factory=list)
    run_id: Optional[str] = None
    folder: Optional[Path] = None

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def windows_text(self) -> str:
        """``12 windows``, or ``40-252 windows`` when the symbols' periods hold different counts."""
        counts = sorted({c.windows for c in self.configs})
        return f"{counts[0]} windows" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} windows"


def run_configs(bars: Sequence[Bars], configs: Sequence[BacktestConfig], forecaster, step,
                calibration_only: bool = False) -> list[SymbolResult]:
    """:func:`run_many` over symbols whose window counts may differ (``--windows all``, ``--start/--end``): one
    batched call per distinct config, results in the symbols' order."""
    results: list = [None] * len(bars)
    for config in dict.fromkeys(configs):
        at = [i for i, c in enumerate(configs) if c == config]
        for i, r in zip(at, run_many([bars[i] for i in at], forecaster, config, on_step=step,
                                     calibration_only=calibration_only)):
            results[i] = r
    return results


def add_seeds(results: list[SymbolResult], bars: Sequence[Bars], configs: Sequence[BacktestConfig], forecaster,
              step, seeds: int) -> None:
    """``--seeds N``: re-run with seeds seed + 1 .. seed + N - 1 (the same forecaster: only the samples change)
    and store each return's spread on the first run's results (``SymbolResult.seeds``, in the JSON, summary.md
    and the run store's record); the files and the store hold the first seed's run. The re-runs skip the SPA
    test, whose p-value they would not report."""
    if seeds < 2:
        return
    others = [run_configs(bars, [replace(c, seed=c.seed + k, spa=False) for c in configs], forecaster, step)
              for k in range(1, seeds)]
    for i, r in enumerate(results):
        r.seeds = seed_spread(r, [run[i] for run in others])


def run_job(job: Job, page: Page | None = None, record: Record | None = None) -> Done:
    """Run the backtest ``job`` asks for and write its reports (``--calibration-only``: nothing written)."""
    from marketcast.backtest.report import write_outputs
    from marketcast.fileio import check_root, new_run_id, run_folder
    from marketcast.forecast.registry import load_forecaster
    from marketcast.signals import finished, shielded

    started = time.perf_counter()
    period = Period.of(job.windows, job.start, job.end, default=BacktestConfig.windows)
    config = job.config(period)
    if job.calibration_only and job.seeds > 1:
        raise ConfigError("--seeds re-runs the strategies, which --calibration-only does not run; drop --seeds")
    if job.calibration_only and (job.html or job.plots):
        raise ConfigError(f"--calibration-only writes no files; drop {'--html' if job.html else '--plots'}")
    if not job.calibration_only:  # a folder that cannot be written is said now, not after the forecasts
        check_root(job.output_dir, "--output-dir")
    dates = fans.parse_dates(job.fan_date)
    if dates and not job.html:
        raise ConfigError("--fan-date draws a fan in the HTML tearsheet; add --html")
    inputs = load_inputs(list(job.symbols or DEFAULT_SYMBOLS), job.data())
    forecaster = load_forecaster(job.model, weights=job.weights, device=job.device, dtype=job.dtype, seed=job.seed)
    min_context = getattr(forecaster, "min_context", 2)
    prepared = prepare(inputs.bars, period, config, min_context=min_context, weights=job.weights,
                       allow_in_sample=job.allow_in_sample, model=job.model, require_clean=job.require_clean)
    bars, configs = prepared.bars, prepared.configs
    for b, c in zip(bars, configs):  # a typo'd fan date fails in a second, not after the forecasts
        fans.check_span(dates, b, c, prepared.min_context)
    if job.calibration_only:
        with progress_steps(len(bars) + len(set(configs)), "calibration") as step:
            return Done(run_configs(bars, configs, forecaster, step, calibration_only=True), configs, started)
    per_run = len(bars) + len(set(configs))
    with progress_steps(per_run * job.seeds + 1 + (page is not None), "backtest") as step:
        done = Done(run_configs(bars, configs, forecaster, step), configs, started)
        add_seeds(done.results, bars, configs, forecaster, step, job.seeds)
        prepared.label(done.results)
        fans.add_fans(done.results, prepared.whole, forecaster, dates)  # stored with the run: reports only draw
        if page is not None:  # drawn before anything is written: a failure leaves no file behind
            step("drawing the HTML tearsheet")
            page.draw(done.results, prepared.whole)
        step("writing reports and plots" if job.plots else "writing reports")
        # everything goes into a hidden folder under output_dir, named the run's id only once the run store holds
        # the run too: a failure or a signal leaves no folder and no temporary file
        run_id = new_run_id("backtest")
        with run_folder(job.output_dir, run_id) as out:
            names = [p.name for p in write_outputs(done.results, out.path, job.plots)]
            if page is not None:
                names.append(page.write(out.path))
            with shielded():  # a signal now waits until the record and the rename are done
                if record is not None:
                    done.run_id = record(done.results, prepared.whole, {
                        "model": job.model, "weights": job.weights, "device": job.device, "dtype": job.dtype,
                        "asset_class": job.asset_class, "data_dir": inputs.data_dir,
                        "on_duplicate": job.on_duplicate, "periods_per_year": job.periods_per_year,
                        "timezone": job.timezone}, run_id)
                out.commit()
                recorded = f" and was recorded ({done.run_id})" if done.run_id else ""
                finished(f"the run finished{recorded}; its reports are in {job.output_dir / run_id}")
    done.folder = job.output_dir / run_id
    done.written = [done.folder / name for name in names]
    return done
