"""Walk-forward engine: forecast bar t+1 from bars <= t, decide, settle on bar t+1, for the last N bars t.

Time line of one window (t = a row position of the symbol's frame):

    bars[..t] --make_batch--> forecaster --> WindowView(t) --strategy--> Decision --settle(bar t+1)--> return

Where a settled position exits is the execution rule's (``--exit``, :mod:`marketcast.backtest.execution`,
applied by :class:`Exits`): bar t+1's close, or bar t+2's open with a wash refusal of the next same-side entry
in each strategy's own record; the walk-forward record trades the picks as the loop does (:meth:`Exits.traded`:
no entry while the previous pick's position waits for its exit at the next open).

All windows of a symbol (and of every symbol in :func:`run_many`) go to the forecaster in one batched call.
The window ending at the last bar (no t+1 yet) rides in the same call: its decisions are returned as
``next_decisions`` for the live loop, never scored.

Two optional layers sit between the forecasts and the fills (:class:`BacktestConfig` ``calibrate`` and
``sizing``):

* Calibration (:func:`calibrated_forecast`): before any strategy or the skill table sees them, every field's
  horizon-1 samples are recalibrated walk-forward. Window j (decided at bar t_j) forecasts bar t_j + 1 and
  settles on it; the windows are one bar apart, so j is settled before window k decides exactly when
  j + 1 <= k (horizon 1, step 1 in :func:`marketcast.calibrate.recalibrate.settled_mask`): window k learns
  only from outcomes at bars <= t_k. The first ``calibration_min_windows`` windows keep their raw samples.
* Sizing (:func:`marketcast.backtest.sizing.order_sizes`): each order's size comes from its own window's
  (calibrated) samples and the strategy's skill measured on the windows settled before it
  (:func:`marketcast.backtest.sizing.walk_forward_skill`), and its fill earns ``size x`` the unit-size net
  return (:meth:`Fills.sized`). MaxDiff still learns its offsets from unit-size grid returns: the grid prices
  where to trade, the size how much.

A model with quantiles of its own (``Forecast.quantiles``: Toto 2.0, Chronos-2, ...) keeps them through every
step: ``take``, the floor and the recalibration move the knots with the samples, so the views' median and band
(:mod:`marketcast.backtest.views`), the quantile CRPS (:mod:`marketcast.backtest.skill`) and the coverage of
intervals whose bounds are knots read the model's own quantiles; the sizing and the PIT read the samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from marketcast.backtest import context as seen_context
from marketcast.backtest import execution
from marketcast.backtest.benchmark import buy_and_hold_metrics, buy_and_hold_returns, intraday_returns
from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.costs import Costs
from marketcast.backtest.day_trades import DayTrades
from marketcast.backtest.fills import CLOSE, NEXT_OPEN, REASONS, WASH, Fills, settle_all
from marketcast.backtest.holding import Held, hold
from marketcast.backtest.metrics import equity_curve
from marketcast.backtest.montecarlo import MonteCarlo, monte_carlo
from marketcast.backtest.orders import Bar, Decision
from marketcast.backtest.overfit import SelectionStats, assess
from marketcast.backtest.scoring import score, score_many, sharpe_trust
from marketcast.backtest.selection import SelectionRule
from marketcast.backtest.sizing import OrderSamples, Skill, order_sizes, walk_forward_skill
from marketcast.backtest.skill import FIELDS, excursion_naive, forecast_skill
from marketcast.backtest.strategies import StrategyParams, decide
from marketcast.backtest.vectorised import Orders, walk
from marketcast.backtest.views import ForecastReturns, ForecastViews, WindowView, atr_fraction
from marketcast.data.asset import explain_asset_class
from marketcast.data.bars import Bars
from marketcast.data.calendar import Annualisation
from marketcast.errors import DataError, MarketcastError
from marketcast.forecast.base import ContextBatch, Forecast, Forecaster, make_batch
from marketcast.forecast.floor import FLOOR_FRACTION, floor_paths


@dataclass
class StrategyRun:
    """One strategy on one symbol: what it decided at each t (``decisions[k]``, a :class:`Decision`), how each
    settled (``settlements[k]``, a :class:`Settlement`), and what it earned. Held as arrays (``decisions.side``,
    ``settlements.net``, ...) by the vectorised engine (:mod:`marketcast.backtest.vectorised`)."""

    name: str
    decisions: Orders
    settlements: Fills
    metrics: dict
    offset_array: np.ndarray | None = None
    next_decision: Decision | None = None
    final_state: Any = None
    next_size: float = 1.0
    skill: Skill | None = None  # kelly / cvar: measured skill after the last window (the next decision's)

    @cached_property
    def returns(self) -> np.ndarray:
        return self.settlements.net

    @property
    def sizes(self) -> np.ndarray:
        """The part of the allowed capital each window's trade used (1.0 everywhere with fixed sizing)."""
        size = getattr(self.settlements, "size", None)
        return np.ones(len(self.settlements)) if size is None else size

    @property
    def filled(self) -> np.ndarray:
        return self.settlements.filled

    @cached_property
    def offsets(self) -> list[tuple[float, float] | None]:
        """MaxDiff's learned (entry, exit) offsets per window; None for the other strategies."""
        if self.offset_array is None:
            return [None] * len(self.decisions)
        return [(float(e), float(x)) for e, x in self.offset_array]

    @property
    def equity(self) -> np.ndarray:
        return equity_curve(self.returns)


@dataclass
class BenchmarkRun:
    """Buy and hold over the scored windows (:mod:`marketcast.backtest.benchmark`): per-window returns and
    their metrics."""

    returns: np.ndarray
    metrics: dict
    intraday: np.ndarray | None = None  # buy and hold intraday (benchmark.intraday_returns): a benchmark of SPA

    @property
    def equity(self) -> np.ndarray:
        return equity_curve(self.returns)


@dataclass
class SymbolResult:
    """The backtest of one symbol. ``views[k]`` is the forecast made at ``decision_times[k]``."""

    symbol: str
    asset_class: str
    config: BacktestConfig
    decision_times: pd.DatetimeIndex
    settle_times: pd.DatetimeIndex
    views: ForecastViews
    strategies: dict[str, StrategyRun]
    skill: dict
    market_return: float
    forecast_meta: dict
    annualisation: Annualisation
    benchmark: BenchmarkRun
    asset_reason: str = ""
    latest_view: WindowView | None = None
    generated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    calibrated: np.ndarray | None = None  # bool [windows]: samples recalibrated (None: calibrate = "none")
    calibration_report: dict | None = None  # coverage and PIT per field (report_calibration)
    fans: tuple = ()  # multi-bar forecast fans at a few decision bars (marketcast.backtest.fans), stored with the run
    context_seen: np.ndarray | None = None  # int [windows]: real bars each window's forecast read (backtest.context)
    monte_carlo: MonteCarlo | None = None  # sampling error of the returns (marketcast.backtest.montecarlo)
    seeds: dict | None = None  # --seeds N: the returns over N seeds (marketcast.backtest.montecarlo.seed_spread)
    settle_delay: int = 0  # 1 when an exit may wait for bar t+2's open (execution.waits_for_next_open), else 0
    held: Held | None = None  # --hold: the walk-forward pick's position held (marketcast.backtest.holding)
    traded: dict | None = None  # the picks as the loop trades them (Exits.traded): the walk-forward record

    @property
    def context_text(self) -> str:
        """``3–361 of 512`` when some windows read fewer bars than ``--context``, else ``512``."""
        return seen_context.describe([self.context_seen], self.config.context)

    @property
    def context_warning(self) -> str:
        """How many windows read fewer bars than ``--context`` asked for; '' when none did."""
        return seen_context.warning(self.context_seen, self.config.context)

    @property
    def calibration_note(self) -> str:
        """``conformal calibration from window 51 on (20 of 70 windows)``; '' without calibration."""
        method = getattr(self.config, "calibrate", "none")
        if self.calibrated is None or method == "none":
            return ""
        done = np.flatnonzero(self.calibrated)
        if not len(done):
            return f"{method} calibration: no window past the {self.config.calibration_min_windows}-window warm-up"
        return f"{method} calibration from window {done[0] + 1} on ({len(done)} of {self.windows} windows)"

    @property
    def skills(self) -> dict:
        """Each sized strategy's measured skill after the last window (:class:`Skill`); empty with fixed sizing."""
        return {n: r.skill for n, r in self.strategies.items() if r.skill is not None}

    @property
    def windows(self) -> int:
        return len(self.views)

    @property
    def periods_per_year(self) -> float:
        return self.annualisation.periods_per_year

    @property
    def costs(self) -> Costs:
        """The costs every fill of this run paid (:mod:`marketcast.backtest.costs`)."""
        return self.config.costs(self.asset_class, self.periods_per_year)

    def score(self, returns: np.ndarray, filled: np.ndarray) -> dict:
        """Every reported number of a per-window return series (:func:`marketcast.backtest.scoring.score`)."""
        cfg = self.config
        return score(returns, filled, self.periods_per_year, self.benchmark.returns, cfg.bootstrap_reps,
                     cfg.confidence, cfg.seed, cfg.selection.min_trades)

    @cached_property
    def walk_forward(self) -> dict:
        """Out of sample: trading each window's pick of ``config.selection`` (the live planner's rule, see
        :mod:`marketcast.backtest.selection`) as the loop trades it (:meth:`Exits.traded`: ``refused`` marks the
        windows skipped while the previous pick's position waits for its exit), with its metrics."""
        sel = self.traded or self.config.selection.walk_forward({n: r.returns for n, r in self.strategies.items()},
                                                                {n: r.filled for n, r in self.strategies.items()},
                                                                self.settle_delay)
        if self.held is None:
            return {**sel, "metrics": self.score(sel["returns"], sel["filled"])}
        # --hold: what the picks' position earned held while they agreed; its windows in the market are its
        # exposure, its trades those it entered (each turns over its notional twice, top-ups apart)
        h = self.held
        trades = int(h.entered.sum())
        metrics = {**self.score(h.returns, h.filled), "trades": trades, "turnover": 2.0 * trades / self.windows}
        return {"picked": sel["picked"], "returns": h.returns, "filled": h.filled, "metrics": metrics}

    @property
    def best_strategy(self) -> str | None:
        """In sample: the selection rule over all windows (the best compounded return among strategies with at
        least ``config.selection.min_trades`` trades); None when none has. Picked on the windows it is scored on,
        so its numbers flatter it."""
        rule = SelectionRule(None, self.config.selection.min_trades)
        return rule.pick({n: r.returns for n, r in self.strategies.items()},
                         {n: r.filled for n, r in self.strategies.items()})

    @cached_property
    def overfit(self) -> SelectionStats:
        """Is the best better than luck: trials (the strategies the rule could pick), deflated Sharpe of the
        in-sample best, PSR and DSR of the walk-forward rule, PBO under the rule and SPA against buy and hold
        (close to close and intraday) and cash (:mod:`marketcast.backtest.overfit`)."""
        cfg = self.config
        benchmarks = {"spa": self.benchmark.returns, "spa_intraday": self.benchmark.intraday,
                      "spa_cash": np.zeros(self.windows)}
        return assess({n: r.returns for n, r in self.strategies.items()},
                      {n: r.filled for n, r in self.strategies.items()}, self.best_strategy,
                      self.walk_forward["returns"], benchmarks, self.periods_per_year, cfg.selection.min_trades,
                      splits=cfg.cscv_splits, seed=cfg.seed, spa=cfg.spa)

    @property
    def next_decisions(self) -> dict[str, Decision]:
        """Each strategy's decision at the last bar, for the bar that has not happened yet."""
        return {n: r.next_decision for n, r in self.strategies.items() if r.next_decision is not None}

    def equity(self) -> pd.DataFrame:
        """Equity curves (start 1.0) indexed by settle time, one column per strategy."""
        return pd.DataFrame({n: r.equity for n, r in self.strategies.items()}, index=self.settle_times)

    def trades(self) -> pd.DataFrame:
        """One row per (strategy, window): the forecast used, the orders, the fills and the net return, the
        strategies one after another. Built column by column over every strategy at once (a frame per
        strategy and their concatenation took about 15 ms of the default backtest)."""
        v, n, runs = self.views, self.windows, list(self.strategies.values())

        def each(column: Callable[[StrategyRun], np.ndarray]) -> np.ndarray:
            return np.concatenate([column(run) for run in runs])

        def offsets(run: StrategyRun) -> np.ndarray:
            return np.full((n, 2), np.nan) if run.offset_array is None else run.offset_array

        reasons = np.array([None, *REASONS.values()], dtype=object)
        orders = {f: each(lambda r, f=f: getattr(r.decisions, f)) for f in ("entry_limit", "take_profit")}
        fills = {f: each(lambda r, f=f: getattr(r.settlements, f)) for f in ("filled", "entry_price", "exit_price")}
        return pd.DataFrame({
            "symbol": self.symbol, "strategy": np.repeat(np.array([run.name for run in runs], dtype=object), n),
            "decision_time": [t.isoformat() for t in self.decision_times] * len(runs),
            "settle_time": [t.isoformat() for t in self.settle_times] * len(runs),
            **{name: np.tile(values, len(runs)) for name, values in (
                ("close_t", v.close), ("fc_close_ret", v.close_ret), ("fc_high_ret", v.high_ret),
                ("fc_low_ret", v.low_ret), ("fc_band_low", v.band_low), ("fc_band_high", v.band_high))},
            "side": each(lambda r: r.decisions.side.astype(np.int64)), **orders,
            "offset_entry": each(lambda r: offsets(r)[:, 0]), "offset_exit": each(lambda r: offsets(r)[:, 1]),
            **fills, "exit_reason": reasons[each(lambda r: r.settlements.reason)],
            "fees": each(lambda r: r.settlements.fees), "gross_return": each(lambda r: r.settlements.gross),
            "net_return": each(lambda r: r.returns), "size": each(lambda r: r.sizes),
        }, columns=TRADE_COLUMNS)


TRADE_COLUMNS = ("symbol", "strategy", "decision_time", "settle_time", "close_t", "fc_close_ret", "fc_high_ret",
                 "fc_low_ret", "fc_band_low", "fc_band_high", "side", "entry_limit", "take_profit", "offset_entry",
                 "offset_exit", "filled", "entry_price", "exit_price", "exit_reason", "fees", "gross_return",
                 "net_return", "size")


def decision_ends(n_bars: int, config: BacktestConfig, min_context: int = 2, where: str = "the data") -> np.ndarray:
    """Row positions t of the windows: the last ``windows`` bars with a t+1, then (optionally) the last bar.

    The first window must hold ``config.min_context`` real bars (``--min-context``), else ``min_context`` (the
    forecaster's minimum, at least 2): :func:`marketcast.backtest.context.needed`."""
    asked = getattr(config, "min_context", None)
    need = seen_context.needed(asked, min_context)
    fits = n_bars - need  # the first window ends at row need - 1 and is settled on row need
    first = n_bars - 1 - config.windows
    if first < need - 1:
        fix = f"use --windows {fits} or fewer" if fits >= 1 else "use a longer history"
        flag = "" if asked is None else f"--min-context {need}: "
        fix += "" if asked is None else " or a lower --min-context"
        raise DataError(f"{where}: {n_bars:,} bars fit at most {max(fits, 0):,} windows, not {config.windows:,} "
                        f"({flag}the first needs {need} bars of history and the bar after it); {fix}")
    ends = np.arange(first, n_bars - 1)
    return np.append(ends, n_bars - 1) if config.include_latest else ends


def decision_rows(result: SymbolResult, bars: Bars) -> np.ndarray:
    """Row positions in ``bars`` of the result's decision bars; a :class:`DataError` when the bars are not
    the ones the backtest read (a decision bar is missing or its next bar is not the settle bar)."""
    index = pd.DatetimeIndex(bars.frame.index)
    rows = index.get_indexer(result.decision_times)
    if (rows < 0).any() or (rows + 1 >= len(index)).any() or not index[rows + 1].equals(result.settle_times):
        raise DataError(f"{result.symbol}: the bars given ({bars.source or 'bars'}) are not the ones its backtest "
                        "read; report on the bars of the run")
    return rows


def _check_forecast(fc: Forecast, expected: int, name: str) -> None:
    if not isinstance(fc, Forecast) or fc.batch_size != expected or fc.horizon < 1:
        got = getattr(fc, "samples", None)
        raise MarketcastError(f"forecaster {name!r} returned {getattr(got, 'shape', fc)!r}; "
                              f"expected {expected} windows with horizon >= 1")
    missing = [f for f in FIELDS if f not in fc.fields]
    if missing:
        raise MarketcastError(f"forecaster {name!r} gives fields {fc.fields}; the backtest needs {FIELDS}")
    if fc.quantiles is not None:
        levels = np.asarray(fc.quantile_levels, dtype=np.float64)
        want = (fc.batch_size, len(fc.fields), len(levels), fc.horizon)
        if np.shape(fc.quantiles) != want or len(levels) < 2 or not ((levels > 0) & (levels < 1)).all() \
                or (np.diff(levels) <= 0).any():
            raise MarketcastError(f"forecaster {name!r} returned quantiles {np.shape(fc.quantiles)} at levels "
                                  f"{tuple(fc.quantile_levels)}; expected {want} at >= 2 increasing levels in (0, 1)")


def _floored(fc: Forecast, bars: Bars, ends: np.ndarray) -> Forecast:
    """The forecast layer's rule for paths at or below zero (and non-finite ones), per symbol."""
    return floor_paths(fc, bars.frame["close"].to_numpy()[ends], bars.frame.index[ends], bars.symbol)


def forecast_windows(
    forecaster: Forecaster,
    jobs: Sequence[tuple[Bars, np.ndarray]],
    config: BacktestConfig,
    batched: bool = True,
) -> list[Forecast]:
    """Forecasts of every window of every (bars, ends) job: one forecaster call in total when ``batched``,
    else one call per window (the benchmark's reference)."""
    name = getattr(forecaster, "name", type(forecaster).__name__)
    batches = [make_batch(b.frame, ends, config.context, horizon=1, calendar=b.calendar) for b, ends in jobs]
    sizes = [len(ends) for _, ends in jobs]
    if batched:
        fc = forecaster.forecast(ContextBatch.concat(batches), horizon=1, num_samples=config.num_samples,
                                 seed=config.seed)
        _check_forecast(fc, sum(sizes), name)
        bounds = np.cumsum([0, *sizes])
        return [_floored(fc.take(slice(a, b)), bars, ends) for a, b, (bars, ends) in zip(bounds[:-1], bounds[1:], jobs)]
    out = []
    for (bars, ends) in jobs:
        parts = []
        for t in ends:
            fc = forecaster.forecast(make_batch(bars.frame, [t], config.context, horizon=1, calendar=bars.calendar),
                                     horizon=1,
                                     num_samples=config.num_samples, seed=config.seed)
            _check_forecast(fc, 1, name)
            parts.append(fc)
        knots = None if any(p.quantiles is None for p in parts) else np.concatenate(
            [np.asarray(p.quantiles)[:, :, :, :1] for p in parts])
        out.append(_floored(Forecast(np.concatenate([p.samples[:, :, :, :1] for p in parts]), parts[0].fields,
                                     dict(parts[0].meta), knots, parts[0].quantile_levels), bars, ends))
    return out


def calibrated_forecast(forecast: Forecast, bars: Bars, ends: np.ndarray, config: BacktestConfig
                        ) -> tuple[Forecast, np.ndarray | None]:
    """The horizon-1 forecast with every field recalibrated walk-forward (module docstring), and which windows
    were (bool ``[len(ends)]``); ``(forecast, None)`` unchanged when ``config.calibrate`` is "none".

    Outcomes are bar t+1's close, high and low (NaN for a window whose t+1 is not in the bars: it settles
    before no window). Recalibrated prices stay at least the forecast layer's floor above zero; fields other
    than close, high and low (which no strategy reads) keep their raw samples. A forecast's own quantiles go
    through the same map as its samples (:func:`marketcast.calibrate.recalibrate.recalibrate` ``knots``) and the
    same floor, so the views and the skill read the recalibrated knots."""
    if config.calibrate == "none":
        return forecast, None
    from marketcast.calibrate.recalibrate import recalibrate

    frame = bars.frame
    nxt = ends + 1
    inside = nxt < len(frame)
    floor = FLOOR_FRACTION * frame["close"].to_numpy(dtype=np.float64)[ends][:, None, None]

    has_knots = forecast.quantiles is not None
    knots = np.asarray(forecast.quantiles, dtype=np.float64)[:, :, :, :1] if has_knots else None  # [W, F, K, 1]

    def one(name: str):
        x = np.ascontiguousarray(forecast.field(name)[:, :, :1], dtype=np.float64)  # [W, S, 1]: bar t+1
        col = frame[name].to_numpy(dtype=np.float64)
        outcome = np.where(inside, col[np.minimum(nxt, len(frame) - 1)], np.nan)[:, None]
        got = recalibrate(x, outcome, config.calibrate, horizon=1, step=1,
                          min_windows=config.calibration_min_windows, seed=config.seed,
                          knots=knots[:, forecast.fields.index(name)] if has_knots else None,
                          knot_levels=forecast.quantile_levels)
        moved = None if got.knots is None else np.maximum(got.knots, floor)
        return np.maximum(got.samples, floor, out=got.samples), got.calibrated, moved

    done = {name: one(name) for name in FIELDS}
    samples = np.stack([done[f][0] if f in done else np.asarray(forecast.field(f)[:, :, :1], dtype=np.float64)
                        for f in forecast.fields], axis=1)
    if has_knots:
        knots = np.stack([done[f][2] if f in done else knots[:, i] for i, f in enumerate(forecast.fields)], axis=1)
    meta = {**forecast.meta, "calibration": config.calibrate,
            "calibration_min_windows": config.calibration_min_windows}
    return Forecast(samples, forecast.fields, meta, knots, forecast.quantile_levels), done[FIELDS[0]][1]


HORIZON_NOTE = "horizon 1: the backtest forecasts bar t+1 only, so no longer horizon is reported"


def report_calibration(samples: dict, actual: dict, calibrated: np.ndarray | None, config: BacktestConfig,
                       quantiles: dict | None = None, levels=()) -> dict:
    """Coverage of the 50/80/90/95 % intervals, PIT histogram and uniformity tests per field
    (:func:`marketcast.calibrate.summary.calibration_block`) of the samples the strategies saw: every window,
    or with ``--calibrate`` only the windows after the warm-up (those that traded on recalibrated samples).
    With the model's quantile returns ``{field: [N, K]}`` at ``levels``, intervals whose bounds are knots read
    them."""
    from marketcast.calibrate.summary import calibration_block

    keep = None if calibrated is None else np.asarray(calibrated, dtype=bool)
    block = calibration_block(samples, actual, keep, seed=config.seed, quantiles=quantiles, quantile_levels=levels)
    scope = ("all windows" if keep is None else
             f"after warm-up: {block['windows']} windows" if block["windows"] else
             f"no window past the {config.calibration_min_windows}-window warm-up")
    return {"horizon": 1, "horizons": [1], "horizon_note": HORIZON_NOTE, "scope": scope, **block}


def _sized(walks: dict, views: ForecastViews, latest: WindowView | None, samples: dict, params: StrategyParams,
           config: BacktestConfig, n_settled: int, delay: int = 0) -> tuple[dict, dict[str, float], dict[str, Skill]]:
    """Each strategy's fills scaled by its orders' sizes (``config.sizing``), the size of its next decision on
    the latest window (1.0 with fixed sizing or no latest window), and its measured skill after the last window
    (:func:`marketcast.backtest.sizing.walk_forward_skill`: window k's size reads windows j < k - ``delay`` only,
    ``delay`` the exit rule's lag, :attr:`Exits.delay`)."""
    if config.sizing == "fixed":
        return walks, {}, {}
    kw = dict(kelly_cap=config.kelly_cap, risk_per_trade=config.risk_per_trade, kelly_fraction=config.kelly_fraction)
    settled = {f: s[:n_settled] for f, s in samples.items()}
    out, nxt, skills = {}, {}, {}
    for name, w in walks.items():
        o = w.orders
        orders = OrderSamples.of(o.side, o.entry_limit, o.take_profit, views.close, settled)
        factor, skills[name] = walk_forward_skill(orders.means, np.where(w.fills.filled, w.fills.gross, np.nan),
                                                  delay)
        size = orders.sizes(config.sizing, **kw, skill=factor)
        out[name] = replace(w, fills=w.fills.sized(size))
        if latest is not None:
            d = decide(name, latest, w.final_state, params)
            nxt[name] = decision_size(d, latest, {f: s[n_settled:n_settled + 1] for f, s in samples.items()},
                                      config, skills[name].factor)
    return out, nxt, skills


def _one(decision: Decision) -> tuple[list, list, list]:
    """One decision as the order arrays of :mod:`marketcast.backtest.sizing` (NaN: no limit, no take-profit)."""
    return ([decision.side], [np.nan if decision.entry_limit is None else decision.entry_limit],
            [np.nan if decision.take_profit is None else decision.take_profit])


def decision_size(decision: Decision, view: WindowView, samples: dict, config: BacktestConfig,
                  skill: float) -> float:
    """The size of one decision (the live planner's, and the engine's next decision) from its window's sample
    returns ``{field: [1, S]}`` and the strategy's measured ``skill`` (:attr:`Skill.factor` of the windows
    settled before it): :func:`marketcast.backtest.sizing.order_sizes` of one window, so equal to the engine's
    size of the same order bit for bit."""
    if config.sizing == "fixed":
        return 1.0
    size = order_sizes(*_one(decision), [view.close], samples, config.sizing, kelly_cap=config.kelly_cap,
                       risk_per_trade=config.risk_per_trade, kelly_fraction=config.kelly_fraction, skill=skill)
    return float(size[0])


def decision_mean(decision: Decision, view: WindowView, samples: dict) -> float:
    """The forecast mean of one decision's trade return over the sample paths that fill it (NaN: flat or none
    fills): the m its settled outcome adds to the strategy's :class:`Skill`, as the engine's
    :attr:`marketcast.backtest.sizing.OrderSamples.means`."""
    return float(OrderSamples.of(*_one(decision), [view.close], samples).means[0])


@dataclass(frozen=True)
class Exits:
    """The execution rule (:mod:`marketcast.backtest.execution`) applied to one symbol's settled windows:
    ``exit_open`` ``[N]`` bar t+2's open where a window exits there in each strategy's own record (NaN: at bar
    t+1's close; also for the last window when the bars end before its bar t+2: it is marked at bar t+1's
    close), ``queues`` ``[N]`` where that exit waits queued for the open (a next entry can wash against it),
    ``delay`` the walk-forward pick's lag, ``market_open`` ``[N]`` bar t+2's open where the loop's exit is a
    market order filled there (:func:`~marketcast.backtest.execution.market_exit`; NaN: at bar t+1's close, or
    no bar t+2): the walk-forward record's exit (:meth:`traded`)."""

    exit_open: np.ndarray
    queues: np.ndarray
    delay: int
    market_open: np.ndarray | None = None

    @classmethod
    def of(cls, rule: str, index: pd.DatetimeIndex, asset_class: str, opens: np.ndarray, settled: np.ndarray
           ) -> "Exits":
        auction = execution.closing_auction(index, asset_class, rule)[settled + 1]
        after = settled + 2 < len(opens)
        t2_open = opens[np.minimum(settled + 2, len(opens) - 1)]
        market_open = np.where(execution.market_exit(rule, auction) & after, t2_open, np.nan)
        if not execution.waits_for_next_open(rule):  # every strategy's exit at bar t+1's close
            return cls(np.full(len(settled), np.nan), np.zeros(len(settled), dtype=bool), 0, market_open)
        held = execution.next_open_exit(rule, auction) & after
        exit_open = np.where(held, t2_open, np.nan)
        return cls(exit_open, execution.queued_close(rule, auction) & held, int(execution.waits_for_next_open(rule)),
                   market_open)

    def washed(self, walks: dict) -> dict:
        """Each strategy's walk with the entries the broker refuses as a wash against the previous window's
        queued close not traded (:func:`marketcast.backtest.execution.wash_refused`), after sizing: a trade
        sized 0 sends nothing and queues nothing."""
        if not self.queues.any():
            return walks
        out = {}
        for name, w in walks.items():
            f = w.fills
            refused = execution.wash_refused(w.orders.side, w.orders.take_profit,
                                             f.filled & (f.reason == NEXT_OPEN) & self.queues)
            out[name] = replace(w, fills=f.refused(refused)) if refused.any() else w
        return out

    def traded(self, picked: Sequence[str | None], orders: dict[str, Orders], fills: dict[str, Fills], bar: Bar,
               params: StrategyParams) -> dict:
        """The walk-forward record as the loop trades it: ``returns``, ``filled``, ``refused`` ``[N]`` and the
        ``fills`` (:class:`Fills`) of window k's pick ``picked[k]`` (``orders`` and ``fills``: each strategy's
        own, ``bar`` the windows' bars t+1).

        Window k trades its pick's order unless the trade made at k - 1 on this path still waits for its exit
        at bar t+2's open (:func:`~marketcast.backtest.execution.held_refused`): the loop holds that symbol at
        k's decision and sends no entry (reason ``refused_wash``). A window its strategy's own walk refused as a
        wash (against that strategy's previous window, where the pick may have been another) is settled again
        here, and so is an exit the loop makes at bar t+2's open that the strategy's record marks at bar t+1's
        close (``close``, bars without a closing auction); both from bars t+1 and t+2 only. Each strategy's
        pattern-day-trader refusals (``--equity``) stay as its own walk scored them."""
        n = len(picked)
        names = {name: j for j, name in enumerate(fills)}
        which = np.array([-1 if p is None else names[p] for p in picked], dtype=np.int64)
        rows = np.flatnonzero(which >= 0)
        sized = any(f.size is not None for f in fills.values())

        def of_pick(values: list, flat) -> np.ndarray:  # window k's value of its pick's array, ``flat`` unpicked
            out = np.full(n, flat, dtype=np.asarray(values[0]).dtype)
            out[rows] = np.stack(values)[which[rows], rows]
            return out

        side, limit, tp = (of_pick([getattr(orders[name], col) for name in names], flat)
                           for col, flat in (("side", 0), ("entry_limit", np.nan), ("take_profit", np.nan)))
        path = {col: of_pick([getattr(fills[name], col) for name in names], flat) for col, flat in (
            ("filled", False), ("entry_price", np.nan), ("exit_price", np.nan), ("reason", 0), ("gross", 0.0),
            ("fees", 0.0))} | {"size": of_pick([np.ones(n) if fills[name].size is None else fills[name].size
                                              for name in names], 1.0) if sized else None}
        market = np.full(n, np.nan) if self.market_open is None else self.market_open
        again = (path["reason"] == WASH) | ((path["reason"] == CLOSE) & ~np.isnan(market))
        if again.any():
            s = settle_all(side[again], limit[again], tp[again], bar.open[again], bar.high[again], bar.low[again],
                           bar.close[again], params.costs, params.fill_mode, params.same_bar, market[again])
            if sized:
                s = s.sized(path["size"][again])
            for col, values in path.items():
                if col != "size":
                    values[again] = getattr(s, col)
        traded = Fills(**path)
        refused = execution.held_refused(side, traded.filled & (traded.reason == NEXT_OPEN))
        traded = traded.refused(refused)
        return {"returns": traded.net, "filled": traded.filled, "refused": refused, "fills": traded}


def held_picks(orders: dict[str, Orders], fills: dict[str, Fills], config: BacktestConfig, delay: int, ohlc: tuple,
               settled: np.ndarray, auction: np.ndarray, asset_class: str, costs: Costs) -> Held:
    """``--hold``: the walk-forward pick's decisions (:meth:`SelectionRule.walk_forward` on each strategy's own
    windows, as the live planner picks) held while they agree (:func:`marketcast.backtest.holding.hold`);
    ``auction`` ``[N]``: each window's bar t+1 ends a stock session."""
    picked = config.selection.walk_forward({n: f.net for n, f in fills.items()},
                                           {n: f.filled for n, f in fills.items()}, delay)["picked"]
    n = len(settled)
    side, limit, tp, size = np.zeros(n, dtype=np.int8), np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    for name, d in orders.items():
        k = np.array([p == name for p in picked], dtype=bool)
        sizes = np.ones(n) if fills[name].size is None else fills[name].size
        side[k], limit[k], tp[k], size[k] = d.side[k], d.entry_limit[k], d.take_profit[k], sizes[k]
    rows = np.append(settled, settled[-1] + 1)
    return hold(side, limit, tp, size, tuple(a[rows] for a in ohlc), costs, config.exit, auction,
                asset_class == "crypto", config.fill_mode, config.same_bar)


def _returns_filled(held: Held) -> tuple[np.ndarray, np.ndarray]:
    return held.returns, held.filled


def _traded_record(traded_of: Callable[[dict, dict], dict]) -> Callable[[tuple], tuple[np.ndarray, np.ndarray]]:
    """A Monte Carlo run's ``(views, {name: Fills}, {name: Orders})`` -> its walk-forward (returns, filled) as
    the loop trades the picks (:meth:`Exits.traded`)."""
    def record(run: tuple) -> tuple[np.ndarray, np.ndarray]:
        t = traded_of(run[2], run[1])
        return t["returns"], t["filled"]
    return record


def simulate(bars: Bars, forecast: Forecast, ends: np.ndarray, config: BacktestConfig,
             calibration_only: bool = False, sampling_error: bool = True) -> SymbolResult:
    """Decide and settle every window of one symbol from its (already computed) forecasts, all windows of a
    strategy at once (:func:`marketcast.backtest.vectorised.walk`), after the optional recalibration and with
    the optional sizing (module docstring). ``calibration_only`` stops after the skill and calibration report:
    no strategy runs (``strategies`` is empty, the benchmark has returns but no metrics).

    The result's ``sample_returns`` (not stored in the run store) holds the horizon-1 sample returns the
    strategies saw, ``{field: [B, S]}`` over every window (the latest one last), and ``quantile_returns`` the
    model's own quantiles as returns, ``{field: [B, K]}`` (None for a sample model)."""
    frame = bars.frame
    o, h, lo, c = (frame[col].to_numpy(dtype=np.float64) for col in ("open", "high", "low", "close"))
    index = pd.DatetimeIndex(frame.index)
    forecast, calibrated = calibrated_forecast(forecast, bars, ends, config)
    returns = ForecastReturns.from_forecast(forecast, c[ends])
    atr = atr_fraction(h, lo, c, ends)
    all_views = returns.views(index[ends], config.point, config.ci_band, atr)  # bars <= t
    n_settled = len(ends) - 1 if config.include_latest else len(ends)
    settled = ends[:n_settled]
    views = all_views[:n_settled]
    latest = all_views[n_settled] if config.include_latest else None
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
    bars_next = Bar(o[settled + 1], h[settled + 1], lo[settled + 1], c[settled + 1])
    exits = Exits.of(config.exit, index, bars.asset_class, o, settled)
    pdt = DayTrades.of(config.equity, index, bars.asset_class, o, settled)  # --equity: day trades refused
    exits = replace(exits, delay=max(exits.delay, pdt.delay))
    ppy = bars.periods_per_year
    held = buy_and_hold_returns(o[settled[0] + 1], bars_next.close, params.costs.per_side)

    def settle(batch: ForecastReturns) -> tuple:  # the run's steps on a batch's samples (MC)
        v = batch.views(index[ends], config.point, config.ci_band, atr)[:n_settled]
        w, _, _ = _sized({n: walk(n, v, bars_next, params, exits.exit_open, state=False) for n in config.strategies},
                         v, None, batch.samples, params, config, n_settled, exits.delay)
        w = pdt.scored(exits.washed(w))
        return v, {n: x.fills for n, x in w.items()}, {n: x.orders for n, x in w.items()}

    def traded_of(orders: dict, fills: dict) -> dict:  # the walk-forward record, as the loop trades the picks
        picked = config.selection.walk_forward({n: f.net for n, f in fills.items()},
                                               {n: f.filled for n, f in fills.items()}, exits.delay)["picked"]
        return {"picked": picked, **exits.traded(picked, orders, fills, bars_next, params)}

    held_of = None
    if config.hold:  # the walk-forward pick held (marketcast.backtest.holding): only with --hold
        auction = execution.closing_auction(index, bars.asset_class, config.exit)[settled + 1]

        def held_of(orders: dict, fills: dict) -> Held:
            return held_picks(orders, fills, config, exits.delay, (o, h, lo, c), settled, auction, bars.asset_class,
                              params.costs)

    intraday = intraday_returns(bars_next.open, bars_next.close, params.costs.per_side)  # bar t+1 only
    if calibration_only:  # skill and calibration only: no strategy, fill, metric or selection
        benchmark, walks, next_sizes, metrics, latest = BenchmarkRun(held, {}, intraday), {}, {}, {}, None
        skills = {}
    else:
        benchmark = BenchmarkRun(held, {**buy_and_hold_metrics(held, ppy),
                                        **sharpe_trust(held, ppy, config.bootstrap_reps, config.confidence,
                                                       config.seed, config.selection.min_trades)}, intraday)
        walks = {name: walk(name, views, bars_next, params, exits.exit_open) for name in config.strategies}
        walks, next_sizes, skills = _sized(walks, views, latest, returns.samples, params, config, n_settled,
                                           exits.delay)
        walks = pdt.scored(exits.washed(walks))
        metrics = score_many({n: w.fills.net for n, w in walks.items()},
                             {n: w.fills.filled for n, w in walks.items()}, ppy, held, config.bootstrap_reps,
                             config.confidence, config.seed, config.selection.min_trades)
    runs = {name: StrategyRun(
        name=name, decisions=w.orders, settlements=w.fills, metrics=metrics[name], offset_array=w.offsets,
        next_decision=None if latest is None else decide(name, latest, w.final_state, params),
        final_state=w.final_state, next_size=next_sizes.get(name, 1.0), skill=skills.get(name),
    ) for name, w in walks.items()}

    actual = {"close": bars_next.close / c[settled] - 1.0, "high": bars_next.high / c[settled] - 1.0,
              "low": bars_next.low / c[settled] - 1.0}
    samples = {f: s[:n_settled] for f, s in returns.samples.items()}
    knots = None if returns.quantiles is None else {f: q[:n_settled] for f, q in returns.quantiles.items()}
    point = {"close": views.close_ret, "high": views.high_ret, "low": views.low_ret}
    excursion = excursion_naive(h, lo, c, settled, config.context)  # from bars <= t, like the forecast
    result = SymbolResult(
        symbol=bars.symbol,
        asset_class=bars.asset_class,
        config=config,
        decision_times=index[settled],
        settle_times=index[settled + 1],
        views=views,
        strategies=runs,
        skill=forecast_skill(point, samples, actual, excursion, knots, returns.levels),
        market_return=float(c[settled[-1] + 1] / c[settled[0]] - 1.0),
        forecast_meta=dict(forecast.meta),
        annualisation=bars.annualisation,
        benchmark=benchmark,
        asset_reason=bars.asset_reason or explain_asset_class(bars.symbol, bars.asset_class),
        latest_view=latest,
        monte_carlo=None if calibration_only or not sampling_error else monte_carlo(
            returns, views, {n: w.fills for n, w in walks.items()}, settle, config.selection, params, exits.delay,
            # the walk-forward record of each batch's run: the picks as the loop trades them, or held (--hold)
            _traded_record(traded_of) if held_of is None else lambda run: _returns_filled(held_of(run[2], run[1])),
            {n: w.orders for n, w in walks.items()}),
        settle_delay=exits.delay,
        held=held_of({n: w.orders for n, w in walks.items()}, {n: w.fills for n, w in walks.items()})
        if held_of is not None and walks else None,
        traded=traded_of({n: w.orders for n, w in walks.items()}, {n: w.fills for n, w in walks.items()})
        if walks else None,
        calibrated=None if calibrated is None else calibrated[:n_settled],
        context_seen=seen_context.seen(settled, config.context),
        calibration_report=report_calibration(samples, actual, None if calibrated is None
                                              else calibrated[:n_settled], config, knots, returns.levels),
    )
    result.sample_returns = returns.samples  # an attribute, not a field: the run store does not keep samples
    result.quantile_returns = returns.quantiles
    result.forecast_returns = returns  # the live planner asks it for quantiles as the views do
    return result


def run_many(bars_list: Sequence[Bars], forecaster: Forecaster, config: BacktestConfig,
             batched: bool = True, on_step: Callable[[str], None] | None = None,
             calibration_only: bool = False, sampling_error: bool = True) -> list[SymbolResult]:
    """Backtest several symbols with one batched forecaster call for all their windows (``calibration_only``:
    forecasts, skill and calibration without strategies, see :func:`simulate`; ``sampling_error=False``: no
    Monte Carlo error, ``SymbolResult.monte_carlo`` None, for a caller that reads none, as the live planner).

    ``on_step`` (a progress display) hears of the forecast call and of each symbol's simulation as they start.
    """
    step = on_step or (lambda _description: None)
    min_context = seen_context.model_minimum(forecaster)
    jobs = [(bars, decision_ends(len(bars), config, min_context, f"{bars.symbol} ({bars.source or 'bars'})"))
            for bars in bars_list]
    for bars, _ in jobs:  # mixed bar spacing fails here, before any forecasting
        _ = bars.annualisation
    step(f"forecasting {sum(len(ends) for _, ends in jobs)} windows with {forecaster.name}")
    forecasts = forecast_windows(forecaster, jobs, config, batched=batched)
    results = []
    for (bars, ends), fc in zip(jobs, forecasts):
        step(f"simulating {bars.symbol}")
        results.append(simulate(bars, fc, ends, config, calibration_only, sampling_error))
    return results


def run_backtest(bars: Bars, forecaster: Forecaster, config: BacktestConfig | None = None,
                 sampling_error: bool = True) -> SymbolResult:
    """Walk-forward backtest of one symbol (see the module docstring; ``sampling_error``: :func:`run_many`'s)."""
    return run_many([bars], forecaster, config or BacktestConfig(), sampling_error=sampling_error)[0]
