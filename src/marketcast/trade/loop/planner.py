"""The seam between backtesting and trading: ``plan(bars, costs, learn_from) -> Signal``.

:class:`BacktestPlanner` is a walk-forward backtest (:mod:`marketcast.backtest`) carried from bar to bar: the
strategy picked by the backtest's own selection rule (:mod:`marketcast.backtest.selection`, over the last
``config.selection.lookback`` settled windows) gives the :class:`Decision` for the next bar, with those
windows' metrics for the entry gates. Strategies, fills, metrics and the pick are the backtest's own
(``run_backtest`` for the windows, then the engine's ``step`` one window at a time): nothing is re-implemented
here.

Why carried: MaxDiff learns its offsets from every window a backtest has settled, so re-running a 70-window
backtest each day (the original live loop) learns from a rolling 70 windows and disagrees with a backtest
over the same days. Given ``learn_from`` (the loop's first decision bar) the planner starts its backtest
``windows`` bars before it and keeps each strategy's state from one plan to the next, so a replay's decisions
and fills equal those of one backtest over the same days; each plan forecasts only the new windows. A restart
rebuilds the state with one backtest from the same first window (:meth:`BacktestPlanner.first_window`), for a
young series that starts after the loop's first bar too, so it decides as the uninterrupted run. The window that settles on the decision bar itself
is applied for the plan only, never kept (that bar may be in progress, or carry a quote's mid).

Sizing (``config.sizing``, :mod:`marketcast.backtest.sizing`): every carried window settles with its decision's
size from that window's samples and the strategy's measured skill (the engine's
:func:`~marketcast.backtest.engine.decision_size`; the skill is the :class:`~marketcast.backtest.sizing.Skill`
carried from the start, to which each settled window adds its forecast mean and unit-size outcome, as the
engine's running sums do), so the
record the pick reads is the sized backtest's; the next decision's size is :attr:`Signal.size`, which the
loop multiplies into the quantity it would have sent (:func:`marketcast.trade.risk.portfolio.allocate`). A
decision sized to 0 is no trade, in the backtest and here: the signal goes flat. The planner does not
recalibrate (its backtests are a handful of windows, fewer than any calibration warm-up). Its views are the
engine's (``run_backtest``), so a model's own quantiles drive the median and band here as in the backtest.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol

import pandas as pd

from marketcast.backtest import BacktestConfig, StrategyParams, WindowView, advance, decide, run_backtest, step
from marketcast.backtest.engine import decision_mean, decision_size
from marketcast.backtest.execution import session_last, waits_for_next_open
from marketcast.backtest.fills import NEXT_OPEN, settle
from marketcast.backtest.metrics import strategy_metrics
from marketcast.backtest.orders import FLAT, Bar, Costs, Decision
from marketcast.backtest.sizing import Skill
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.forecast.base import Forecaster

# The original live loop ran 70 walk-forward simulations per symbol before each decision. Its exit rule is the
# backtest's default (marketcast.backtest.execution.DEFAULT_EXIT), as LoopConfig's: a planner built without a
# config scores what a loop built without one trades; `trade run`/`replay` pass the configured rule.
PLANNER_CONFIG = BacktestConfig(windows=70)
# Bars a cycle must load so every backtest window sees a full context, exactly as the offline backtest does.
PLANNER_HISTORY = PLANNER_CONFIG.context + PLANNER_CONFIG.windows + 1
# The broker feed (trade run) loads a year beyond that, so MaxDiff can learn from the loop's first bar on for a
# year (marketcast.trade.loop.feed); after that it learns from the last year.
BROKER_HISTORY = PLANNER_HISTORY + 365
NO_PICK = "none"  # the strategy name of a flat signal when no strategy has min_trades in the selection's lookback
NO_RECORD = {"sharpe": 0.0, "max_drawdown": 0.0, "return": 0.0, "trades": 0}
# The horizon-1 close-return quantiles a Signal carries: the midpoints (k - 1/2) / 25, so the quantile CRPS over
# them is the midpoint rule of CRPS = 2 * integral of the quantile score (marketcast.calibrate.crps); 0.1, 0.5 and
# 0.9 are among them (the 80% central interval and the median).
CLOSE_LEVELS = tuple((k - 0.5) / 25 for k in range(1, 26))


@dataclass(frozen=True)
class Signal:
    """What the planner wants for the bar after ``decision_ts``, and why."""

    symbol: str
    decision_ts: str
    strategy: str
    decision: Decision
    close: float
    metrics: dict = field(default_factory=dict)  # sharpe, max_drawdown, total_return, trades, edge
    forecast_latency_s: float = 0.0
    forecast_meta: dict = field(default_factory=dict)
    pinned: bool = False  # the strategy was set for this symbol, not picked
    size: float = 1.0  # fraction of the quantity the portfolio allows, in (0, 1]; 1.0 with fixed sizing
    close_quantiles: tuple[float, ...] = ()  # the next bar's close return at CLOSE_LEVELS (the shadow scores them)


def close_quantiles(returns) -> tuple[float, ...]:
    """The latest window's close return at :data:`CLOSE_LEVELS`, read as the views read quantiles
    (:meth:`marketcast.backtest.views.ForecastReturns.quantile`: a quantile model's own knots, else the samples)."""
    return tuple(float(returns.quantile("close", q)[-1]) for q in CLOSE_LEVELS)


def _price(value: float) -> float | None:
    """An order array's price as a :class:`Decision` holds it (NaN: none)."""
    return None if value != value else float(value)


class Planner(Protocol):
    """Per-symbol strategy choice and next-bar decision."""

    model: str

    def plan(self, bars: Bars, costs: Costs, learn_from: str | None = None) -> Signal: ...


def expected_edge(decision: Decision, view: WindowView, costs: Costs) -> float:
    """Forecast net return of ``decision`` if it fills, after the round-trip cost.

    Entry at the limit (a market order enters near close_t, the best estimate of the next open); exit at
    the take-profit when there is one, else at the forecast close.
    """
    if decision.side == FLAT:
        return 0.0
    entry = view.close if decision.entry_limit is None else decision.entry_limit
    exit_ = view.price(view.close_ret) if decision.take_profit is None else decision.take_profit
    return decision.side * (exit_ / entry - 1.0) - costs.round_trip(decision.side)


@dataclass
class _Carry:
    """One symbol's backtest so far: each strategy's state after the window ending at ``through`` and its
    (net return, filled) over the last ``windows`` windows, and its measured skill over every window since the
    start (the sizing's; empty with fixed sizing); ``key`` says what it was computed for."""

    key: tuple
    through: pd.Timestamp
    states: dict[str, Any]
    record: dict[str, deque]
    skills: dict[str, Skill] = field(default_factory=dict)
    queued: dict[str, int] = field(default_factory=dict)  # next-open: the side whose close the last window queued


def _relearn_last(name: str, state: Any, view: WindowView, bar: Bar, params: StrategyParams, exit_open: float
                  ) -> Any:
    """``state`` with its last window learnt again at ``exit_open`` (bar t+2's open): a state that holds its last
    windows back until they settle (MaxDiff's ``pending``, under the next-open exit) got that window from a
    backtest whose bars end before bar t+2, which scored it at its close (:meth:`BacktestPlanner._start`)."""
    pending = getattr(state, "pending", ())
    if not pending:
        return state
    return advance(name, replace(state, pending=pending[:-1]), view, bar, None, params, exit_open)


def next_open_record(d: Decision, bar: Bar, exit_open: float, params, size: float, queues: bool,
                     queued: int) -> tuple[tuple[float, bool], int]:
    """One window's (net return, filled) under exit rule ``next-open`` and the side whose close it leaves queued
    for the next open (0: none), as the backtest scores it (:func:`marketcast.backtest.execution.wash_refused`):
    an entry that meets the previous window's queued close (``queued``: the same side, or the other side with a
    take-profit) is refused and trades nothing; else it exits at ``exit_open`` (bar t+2's open) unless its
    take-profit fills in bar t+1, and its close is queued where bar t+1 ends a session (``queues``)."""
    if queued and d.side != FLAT and (d.side == queued or (d.side == -queued and d.take_profit is not None)):
        return (0.0, False), 0
    s = settle(d, bar, params.costs, params.fill_mode, params.same_bar, size, exit_open)
    return (s.net_return, s.filled), (d.side if s.filled and s.exit_reason == "next_open" and queues else 0)


class BacktestPlanner:
    """Backtest the symbol up to the decision bar, trade the best strategy's next decision, or the strategy
    ``pinned`` to the symbol (``{"ETHUSD": "maxdiff"}``: "focus on ETH with MaxDiff") whatever the pick."""

    def __init__(self, forecaster: Forecaster, config: BacktestConfig = PLANNER_CONFIG,
                 strategies: tuple[str, ...] | None = None, pinned: Mapping[str, str] | None = None) -> None:
        self.forecaster = forecaster
        self.model = getattr(forecaster, "name", type(forecaster).__name__)
        self.config = replace(config, strategies=strategies, include_latest=True) if strategies else replace(
            config, include_latest=True)
        self.pinned = {s.upper(): name for s, name in (pinned or {}).items()}
        if self.config.calibrate != "none":
            raise ConfigError(f"the live planner does not recalibrate (calibrate={self.config.calibrate!r}): its "
                              "backtests hold fewer windows than a calibration warm-up; use calibrate='none'")
        missing = sorted(set(self.pinned.values()) - set(self.config.strategies))
        if missing:
            raise ConfigError(f"strategy {', '.join(missing)} is pinned but not among the planner's strategies "
                              f"({', '.join(self.config.strategies)})")
        self._carry: dict[str, _Carry] = {}
        # Bars a first plan needs: the forecaster's minimum context, the bar that settles the first window, and
        # the decision bar (marketcast.backtest.engine.decision_ends).
        self._need = max(int(getattr(forecaster, "min_context", 2)), 2)

    def _warming_up(self, bars: Bars) -> Signal:
        """Flat, with the reason, while the bars are too few for one settled window (the start of a file)."""
        metrics = dict(NO_RECORD, edge=0.0, warming_up=f"{len(bars)} bars of history; the first plan needs "
                       f"{self._need + 2}")
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), NO_PICK, Decision(FLAT),
                      float(bars.frame["close"].iloc[-1]), metrics)

    def _start(self, bars: Bars, config: BacktestConfig, learn_from: str | None, key: tuple) -> _Carry:
        """The backtest up to the bar before the decision bar, from the window of :meth:`first_window` on. Under
        exit rule ``next-open`` its last window, which that backtest marks at its bar t+1's close (its bar t+2,
        the decision bar, is not in it), is settled at the decision bar's open (:func:`next_open_record`)."""
        n = len(bars)
        settled = n - 2 - self.first_window(bars, learn_from)
        # no Monte Carlo error (sampling_error): the loop reads none, and it took half of every cycle's time
        r = run_backtest(bars.head(n - 1), self.forecaster, replace(config, windows=settled, include_latest=False),
                         sampling_error=False)
        records = {k: list(zip(run.returns, run.filled)) for k, run in r.strategies.items()}
        states = {k: run.final_state for k, run in r.strategies.items()}
        queued: dict[str, int] = {}
        if waits_for_next_open(config.exit):
            params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
            auction = session_last(bars.frame.index, bars.asset_class)
            rows = bars.frame.index.get_indexer(r.settle_times)  # each window's bar t+1
            frame = bars.frame
            bar = Bar(*(float(frame[c].iloc[rows[-1]]) for c in ("open", "high", "low", "close")))
            exit_open = float(frame["open"].iloc[rows[-1] + 1])
            for k, run in r.strategies.items():
                d, f = run.decisions, run.settlements
                prev = int(d.side[-2]) if len(f) > 1 and f.filled[-2] and f.reason[-2] == NEXT_OPEN and \
                    auction[rows[-2]] else 0
                last = Decision(int(d.side[-1]), _price(d.entry_limit[-1]), _price(d.take_profit[-1]))
                records[k][-1], queued[k] = next_open_record(last, bar, exit_open, params, float(run.sizes[-1]),
                                                             bool(auction[rows[-1]]), prev)
                states[k] = _relearn_last(k, run.final_state, r.views[-1], bar, params, exit_open)
        return _Carry(key, r.decision_times[-1], states,
                      {k: deque(v, maxlen=self.config.selection.lookback) for k, v in records.items()},
                      {k: run.skill for k, run in r.strategies.items() if run.skill is not None}, queued)

    def first_window(self, bars: Bars, learn_from: str | None) -> int:
        """Row of the decision bar of the first window the symbol's backtest carries: ``windows`` bars before
        ``learn_from`` (without it, before the decision bar), or the first bar that holds the forecaster's
        minimum context when the file starts later (a young 24/7 series beside an older stock), but never fewer
        than the first plan's ``windows - 1``.

        It depends on ``learn_from`` and the bars alone, never on which bar is being planned, so the first plan
        and every plan after a restart start from the same window and carry the same state (MaxDiff's sums
        over every window since): a restart decides as the uninterrupted run did. Only where the bars cannot
        be the symbol's whole history (``learn_from`` before their first bar and as many bars as the broker
        feed loads, :data:`BROKER_HISTORY`: a loop older than its feed) can no rebuild match; it starts at
        the first window with a full context, so every window it learns from was forecast as it was then."""
        n, w = len(bars), max(self.config.windows, 2)
        index = bars.frame.index
        first = n - 1 if learn_from is None else int(index.searchsorted(pd.Timestamp(learn_from)))
        cut = first == 0 and index[0] > pd.Timestamp(learn_from) and n >= BROKER_HISTORY
        floor = self.config.context - 1 if cut else self._need - 1
        return max(min(max(first - w, floor), n - 1 - w), self._need - 1)

    def plan(self, bars: Bars, costs: Costs, learn_from: str | None = None) -> Signal:
        if len(bars) < self._need + 2:
            return self._warming_up(bars)
        config = replace(self.config, fee=costs.fee, spread=costs.spread, slippage=costs.slippage,
                         borrow_rate=costs.borrow_rate)
        params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
        index = bars.frame.index
        started = time.perf_counter()
        key = (learn_from, config.fee, config.spread, config.slippage, config.borrow_rate, bars.asset_class)
        carry = self._carry.get(bars.symbol)
        if (carry is None or carry.key != key or carry.through not in index
                or index.get_loc(carry.through) > len(index) - 3):
            carry = self._start(bars, config, learn_from, key)
        pending = len(index) - 2 - index.get_loc(carry.through)  # windows since; the last settles on the decision bar
        result = run_backtest(bars, self.forecaster, replace(config, windows=pending), sampling_error=False)
        states, record = dict(carry.states), {k: deque(v, maxlen=v.maxlen) for k, v in carry.record.items()}
        late = waits_for_next_open(config.exit)  # a window is recorded once its bar t+2's open is known
        queued = {k: carry.queued.get(k, 0) for k in config.strategies}
        auction = session_last(index, bars.asset_class) if late else None
        skills = {k: carry.skills.get(k, Skill()) for k in config.strategies}
        frame = bars.frame
        samples = result.sample_returns  # {field: [pending + 1, S]}, the latest window last

        def rows(k: int) -> dict:
            return {f: v[k:k + 1] for f, v in samples.items()}

        def sizer(k: int, name: str):
            if config.sizing == "fixed":
                return None
            view = result.views[k] if k < pending else result.latest_view
            return lambda d: decision_size(d, view, rows(k), config, skills[name].factor)

        for k, (view, at) in enumerate(zip(result.views, result.settle_times)):
            if k == pending - 1 and learn_from is not None:  # keep all but the window settled on the decision bar
                kept = {n: deque(v, maxlen=v.maxlen) for n, v in record.items()}
                self._carry[bars.symbol] = _Carry(key, result.decision_times[k - 1] if k else carry.through,
                                                  dict(states), kept, dict(skills) if config.sizing != "fixed" else {},
                                                  dict(queued))
            bar = Bar(*(float(frame.at[at, c]) for c in ("open", "high", "low", "close")))
            row = index.get_loc(at)
            next_open = float(frame["open"].iloc[row + 1]) if late and row + 1 < len(index) else None
            for name in config.strategies:  # the engine's own step (marketcast.backtest.engine.simulate)
                d, s, states[name] = step(name, view, states[name], bar, params, sizer(k, name), next_open)
                if not late:
                    record[name].append((s.net_return, s.filled))
                elif row + 1 < len(index):  # settled at bar t+2's open; the window of the decision bar is not yet
                    entry, queued[name] = next_open_record(d, bar, float(frame["open"].iloc[row + 1]), params, s.size,
                                                           bool(auction[row]), queued[name])
                    record[name].append(entry)
                if config.sizing != "fixed":  # the unit-size outcome, traded or not, is what the skill learns
                    unit = settle(d, bar, params.costs, params.fill_mode, params.same_bar)
                    skills[name] = skills[name].add(decision_mean(d, view, rows(k)),
                                                    unit.gross_return if unit.filled else float("nan"))
        latency = time.perf_counter() - started
        returns = {n: [r for r, _ in v] for n, v in record.items()}
        filled = {n: [f for _, f in v] for n, v in record.items()}
        pinned = self.pinned.get(bars.symbol.upper())
        name = pinned or config.selection.pick(returns, filled)  # the backtest's walk-forward rule
        view = result.latest_view
        decision = Decision(FLAT) if name is None else decide(name, view, states[name], params)
        sized = None if name is None else sizer(pending, name)
        size = 1.0 if sized is None else sized(decision)
        if decision.side != FLAT and not size > 0:
            decision = Decision(FLAT)  # sized to nothing: no trade, as in the backtest
        m = NO_RECORD if name is None else strategy_metrics(returns[name], filled[name], bars.periods_per_year)
        metrics = {
            "sharpe": m["sharpe"],
            "max_drawdown": m["max_drawdown"],
            "total_return": m["return"],
            "trades": m["trades"],
            "edge": expected_edge(decision, view, costs),
            "forecast_low": view.price(view.low_ret),
            "forecast_high": view.price(view.high_ret),
            "size": size,
            **({"skill": skills[name].describe()} if config.sizing != "fixed" and name is not None else {}),
        }
        meta = dict(result.forecast_meta)
        return Signal(bars.symbol, index[-1].isoformat(), name or NO_PICK, decision, float(view.close), metrics,
                      meta.get("latency_s", latency), meta, pinned is not None,
                      size if decision.side != FLAT else 1.0,
                      close_quantiles(result.forecast_returns))
