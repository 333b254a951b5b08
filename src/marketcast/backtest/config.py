"""Every knob of a backtest in one frozen object, validated once, so runs are reproducible from it."""

from __future__ import annotations

from dataclasses import dataclass

from marketcast.backtest.execution import DEFAULT_EXIT, check_exit
from marketcast.backtest.fills import FILL_MODES, SAME_BAR_MODES
from marketcast.backtest.costs import Costs, check_costs
from marketcast.backtest.overfit import check_splits
from marketcast.backtest.selection import SelectionRule
from marketcast.backtest.sizing import POLICIES
from marketcast.data.validate import MIN_BARS
from marketcast.errors import ConfigError
from marketcast.forecast.aggregate import validate_spec
from marketcast.forecast.registry import MAX_SAMPLES

MAXDIFF_GRIDS = ("atr", "percent")
CALIBRATIONS = ("none", "conformal", "quantile")  # marketcast.calibrate.recalibrate.METHODS (scipy-free import)
MIN_CALIBRATION_WINDOWS = 10
STRATEGY_NAMES = (
    "simple",
    "all_signals",
    "buy_hold",
    "unprofit_shutdown",
    "ci_guard",
    "entry_takeprofit",
    "highlow",
    "maxdiff",
)


@dataclass(frozen=True)
class BacktestConfig:
    """Settings of one walk-forward run (defaults are what ``marketcast backtest`` uses).

    windows:       number of settled decision bars t per symbol (the last ``windows`` bars that have a t+1).
    context:       bars per forecast window ending at t (fewer are left-padded and masked by ``make_batch``).
    min_context:   real bars a scored window must hold (``--min-context``, at least 3 and at most ``context``);
                   windows with fewer are skipped (:mod:`marketcast.backtest.context`). None = the model's own
                   minimum (``Forecaster.min_context``; the baseline's is 3).
    num_samples:   forecast sample paths per window; ``seed`` makes them reproducible.
    point:         aggregation spec turning samples into the point forecast strategies act on.
    ci_band:       quantiles (of the close-return samples) that ``ci_guard`` requires to exclude zero.
    fee / spread / slippage / borrow_rate: per-side fee, full quoted spread (half paid per side), per-side
                   slippage, all fractions, and the short-borrow rate a year; None = the asset class's default
                   (:mod:`marketcast.backtest.costs`).
    selection:     the walk-forward pick (:mod:`marketcast.backtest.selection`), shared with the live planner:
                   its lookback (``--select-lookback``) and ``min_trades`` (``--min-trades``, default 10), the
                   trades a strategy needs to be picked or called best, and a series to get a PSR and a CI.
    bootstrap_reps / confidence: resamples and level of each Sharpe ratio's bootstrap interval.
    cscv_splits:   blocks of the PBO's cross-validation (:mod:`marketcast.backtest.overfit`; even, 2 to
                   ``windows``); None = 16, or the largest even number the windows allow.
    spa:           compute the SPA / reality-check p-values (:mod:`marketcast.backtest.spa`, numpy).
    maxdiff_grid:  MaxDiff's offset grid (:mod:`marketcast.backtest.maxdiff`): "atr" (default) = -1.0 .. +1.0
                   times each window's ATR% (14-bar average true range over close_t, bars <= t), "percent" =
                   the fixed -1 % .. +1 % grid.
    calibrate:     walk-forward recalibration of every field's samples before the strategies see them
                   (:func:`marketcast.calibrate.recalibrate.recalibrate`, from windows settled before each
                   decision): "none" (default), "conformal" or "quantile".
    calibration_min_windows: settled windows before the first recalibrated one (10 to ``windows``); earlier
                   windows trade on the raw samples (``SymbolResult.calibrated`` says which).
    exit:          the execution rule (:mod:`marketcast.backtest.execution`, ``--exit``): "close" (default) exits a
                   stock at its session's close (market-on-close), "next-open" at the next session's open, as
                   ``trade run`` does; a bar without a closing auction exits at the next bar's open under both.
    hold:          score the walk-forward pick held while its decision stays on its side (``--hold``,
                   :mod:`marketcast.backtest.holding`, as ``trade replay --hold`` trades it); False (default):
                   each window's trade is entered and exited on its own.
    sizing:        position size per trade from the trade's sample returns (:mod:`marketcast.backtest.sizing`):
                   "fixed" (1.0, default), "kelly" (``kelly_fraction`` x b* mu / sigma^2, capped at
                   ``kelly_cap``) or "cvar" (the 95 % expected shortfall loses ``risk_per_trade`` of equity),
                   with b* the strategy's skill measured on the windows before (0 before 20 filled orders).
    """

    windows: int = 70
    context: int = 512
    num_samples: int = 256
    seed: int = 0
    point: str = "median"
    ci_band: tuple[float, float] = (0.40, 0.60)
    ci_multiplier: float = 1.0
    fill_mode: str = "touch"
    same_bar: str = "pessimistic"
    fee: float | None = None
    spread: float | None = None
    slippage: float | None = None
    borrow_rate: float | None = None
    strategies: tuple[str, ...] = STRATEGY_NAMES
    maxdiff_min_history: int = 10
    maxdiff_grid: str = "atr"
    include_latest: bool = True
    selection: SelectionRule = SelectionRule()
    bootstrap_reps: int = 1000
    confidence: float = 0.95
    cscv_splits: int | None = None
    spa: bool = True
    calibrate: str = "none"
    calibration_min_windows: int = 50
    sizing: str = "fixed"
    kelly_cap: float = 1.0
    risk_per_trade: float = 0.01
    min_context: int | None = None
    kelly_fraction: float = 0.25
    exit: str = DEFAULT_EXIT
    hold: bool = False

    def __post_init__(self) -> None:
        if self.windows < 1:
            raise ConfigError(f"--windows must be >= 1, got {self.windows}")
        if self.context < 2:
            raise ConfigError(f"--context must be >= 2, got {self.context}")
        if not 1 <= self.num_samples <= MAX_SAMPLES:  # a sweep spec's num_samples too
            raise ConfigError(f"--samples must be 1 to {MAX_SAMPLES:,}, got {self.num_samples:,}")
        self._check_min_context()
        validate_spec(self.point)
        lo, hi = self.ci_band
        if not 0.0 <= lo < hi <= 1.0:
            raise ConfigError(f"CI band must satisfy 0 <= low < high <= 1, got {lo:g}, {hi:g}")
        if self.ci_multiplier < 0:
            raise ConfigError(f"--ci-multiplier must be >= 0, got {self.ci_multiplier:g}")
        if self.fill_mode not in FILL_MODES:
            raise ConfigError(f"--fill-mode must be one of {', '.join(FILL_MODES)}, got {self.fill_mode!r}")
        if self.same_bar not in SAME_BAR_MODES:
            raise ConfigError(f"--same-bar must be one of {', '.join(SAME_BAR_MODES)}, got {self.same_bar!r}")
        check_costs(self.fee, self.spread, self.slippage, self.borrow_rate)
        unknown = [s for s in self.strategies if s not in STRATEGY_NAMES]
        if unknown or not self.strategies:
            raise ConfigError(
                f"unknown strategies {', '.join(unknown) or '(none given)'}; choose from {', '.join(STRATEGY_NAMES)}"
            )
        if self.bootstrap_reps < 10:
            raise ConfigError(f"bootstrap_reps must be >= 10, got {self.bootstrap_reps}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"confidence must lie in (0, 1), got {self.confidence:g}")
        if self.cscv_splits is not None:
            check_splits(self.cscv_splits, self.windows)
        if self.maxdiff_min_history < 1:
            raise ConfigError(f"maxdiff_min_history must be >= 1, got {self.maxdiff_min_history}")
        if self.maxdiff_grid not in MAXDIFF_GRIDS:
            raise ConfigError(f"--maxdiff-grid must be one of {', '.join(MAXDIFF_GRIDS)}, got {self.maxdiff_grid!r}")
        self._check_calibration()
        self._check_sizing()
        check_exit(self.exit)

    def _check_min_context(self) -> None:
        n = self.min_context
        if n is None:
            return
        if isinstance(n, bool) or not isinstance(n, int) or n < MIN_BARS:
            raise ConfigError(f"--min-context {n!r}: a window needs at least {MIN_BARS} real bars; give a whole number "
                              f">= {MIN_BARS} (default: the model's own minimum)")
        if n > self.context:
            raise ConfigError(f"--min-context {n} exceeds --context {self.context}: no window holds more than "
                              "--context bars; lower --min-context or raise --context")

    def _check_calibration(self) -> None:
        if self.calibrate not in CALIBRATIONS:
            raise ConfigError(f"--calibrate must be one of {', '.join(CALIBRATIONS)}, got {self.calibrate!r}")
        n = self.calibration_min_windows
        if isinstance(n, bool) or not isinstance(n, int) or n < MIN_CALIBRATION_WINDOWS:
            raise ConfigError(f"--calibration-min-windows must be a whole number >= {MIN_CALIBRATION_WINDOWS}, "
                              f"got {n!r}; a quantile of fewer settled windows is noise")
        if self.calibrate != "none" and n > self.windows:
            raise ConfigError(f"--calibration-min-windows {n} exceeds --windows {self.windows}: no window would "
                              f"be calibrated; lower it or raise --windows")

    def _check_sizing(self) -> None:
        if self.sizing not in POLICIES:
            raise ConfigError(f"--sizing must be one of {', '.join(POLICIES)}, got {self.sizing!r}")
        for flag, value, example in (("--kelly-cap", self.kelly_cap, "1 (all of the capital)"),
                                     ("--risk-per-trade", self.risk_per_trade, "0.01"),
                                     ("--kelly-fraction", self.kelly_fraction, "0.25 (quarter Kelly)")):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
                raise ConfigError(f"{flag} must be in (0, 1], got {value!r}; pass a fraction such as {example}")

    def costs(self, asset_class: str, periods_per_year: float | None = None) -> Costs:
        """The costs of ``asset_class`` with this run's overrides; borrow per bar needs ``periods_per_year``."""
        return Costs.for_asset(asset_class, fee=self.fee, spread=self.spread, slippage=self.slippage,
                               borrow_rate=self.borrow_rate, periods_per_year=periods_per_year)
