"""The eight strategies: pure functions of the forecast at t (and state built from bars <= t) -> Decision.

Each strategy turns a :class:`~marketcast.backtest.views.WindowView` (the horizon-1 forecast made at bar t,
as returns relative to close_t) into a :class:`~marketcast.backtest.orders.Decision` for bar t+1. Two keep
state, and that state is updated only after bar t+1 settles, from that bar and earlier forecasts:

* ``unprofit_shutdown``: whether ``simple``'s most recent direction call was right.
* ``maxdiff``: summed grid returns of earlier windows (see :mod:`marketcast.backtest.maxdiff`).

An asset class that cannot be shorted (crypto, see :mod:`marketcast.data.asset`) stays flat wherever a
strategy would short.

==================  ==========================================================================
``simple``          long if the close forecast return > 0, else short
``all_signals``     long if close, high and low forecast returns are all > 0; short if all < 0
``buy_hold``        long every bar, entered at the open and exited by the run's exit rule: a round
                    trip and two costs per bar (not buy and hold; that is the benchmark,
                    :mod:`marketcast.backtest.benchmark`)
``unprofit_shutdown`` ``simple``, but flat while ``simple``'s last call was wrong
``ci_guard``        ``simple``'s side only when the close band, widened by ``ci_multiplier``
                    about its centre, lies entirely on that side of zero
``entry_takeprofit`` market entry at the open in ``simple``'s direction, take profit at the
                    forecast high (long) / low (short), else exit by the run's exit rule
``highlow``         limit entry at the forecast low (long) / high (short), exit by the run's exit rule
``maxdiff``         buy limit at the forecast low, sell limit at the forecast high (or the
                    mirror for a short bias), offsets learned from earlier windows only
==================  ==========================================================================

Where a position exits when no take-profit filled is the run's exit rule (``--exit``,
:mod:`marketcast.backtest.execution`): bar t+2's open under ``next-open`` (the default), bar t+1's close under
``close``. MaxDiff scores its past windows with the same exits.

A direction call is *right* when its sign agrees with bar t+1's open-to-close move (the span every
strategy trades under ``close``; known by the next decision under either rule); a zero move counts as wrong.

*Forecast-blind*: a strategy whose orders never read the forecast (``Strategy.reads_forecast`` False; of the
eight, only ``buy_hold``). It trades the same orders whatever the model says (with ``--sizing kelly`` or
``cvar`` only its size reads the forecast), so it cannot tell models apart: ``models compare`` ranks models on
the walk-forward pick among the others, :data:`FORECAST_DRIVEN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from marketcast.backtest.config import STRATEGY_NAMES, BacktestConfig
from marketcast.backtest.execution import waits_for_next_open
from marketcast.backtest.fills import settle
from marketcast.backtest.maxdiff import MaxDiffState, decide_maxdiff, learn_maxdiff
from marketcast.backtest.orders import FLAT, LONG, SHORT, Bar, Costs, Decision, Settlement
from marketcast.backtest.views import WindowView
from marketcast.data.asset import RULES
from marketcast.errors import ConfigError


@dataclass(frozen=True)
class StrategyParams:
    """Everything a strategy needs besides the forecast: asset rules, CI guard, fill settings and the exit rule
    (:mod:`marketcast.backtest.execution`; MaxDiff learns from the exits it gives)."""

    allow_short: bool = True
    ci_multiplier: float = 1.0
    costs: Costs = Costs(0.0005)
    fill_mode: str = "touch"
    same_bar: str = "pessimistic"
    maxdiff_min_history: int = 10
    maxdiff_grid: str = "atr"
    exit: str = "close"

    @property
    def settle_delay(self) -> int:
        """1 when an exit may wait for bar t+2's open (window k settles after window k + 1 decided), else 0:
        the lag of what a decision may learn from, as the walk-forward pick's (``Exits.delay``)."""
        return int(waits_for_next_open(self.exit))

    @classmethod
    def from_config(cls, config: BacktestConfig, asset_class: str,
                    periods_per_year: float | None = None) -> "StrategyParams":
        return cls(
            allow_short=RULES[asset_class].allow_short,
            ci_multiplier=config.ci_multiplier,
            costs=config.costs(asset_class, periods_per_year),
            fill_mode=config.fill_mode,
            same_bar=config.same_bar,
            maxdiff_min_history=config.maxdiff_min_history,
            maxdiff_grid=config.maxdiff_grid,
            exit=config.exit,
        )


def _side(long: bool, p: StrategyParams) -> int:
    return LONG if long else (SHORT if p.allow_short else FLAT)


def forecast_direction(view: WindowView) -> int:
    """``simple``'s call: +1 if the close forecast return is > 0, else -1 (before long-only rules)."""
    return LONG if view.close_ret > 0 else SHORT


def simple(view: WindowView, state: Any, p: StrategyParams) -> Decision:
    return Decision(_side(view.close_ret > 0, p))


def all_signals(view: WindowView, state: Any, p: StrategyParams) -> Decision:
    rets = (view.close_ret, view.high_ret, view.low_ret)
    if all(r > 0 for r in rets):
        return Decision(LONG)
    if all(r < 0 for r in rets) and p.allow_short:
        return Decision(SHORT)
    return Decision(FLAT)


def buy_hold(view: WindowView, state: Any, p: StrategyParams) -> Decision:
    return Decision(LONG)


def unprofit_shutdown(view: WindowView, state: bool | None, p: StrategyParams) -> Decision:
    """``state`` is whether ``simple``'s last call was right (None before the first settled window)."""
    return Decision(FLAT) if state is False else simple(view, None, p)


def ci_guard(view: WindowView, state: Any, p: StrategyParams) -> Decision:
    centre = 0.5 * (view.band_low + view.band_high)
    half = 0.5 * (view.band_high - view.band_low) * p.ci_multiplier
    if view.close_ret > 0 and centre - half > 0:
        return Decision(LONG)
    if view.close_ret <= 0 and centre + half < 0 and p.allow_short:
        return Decision(SHORT)
    return Decision(FLAT)


def entry_takeprofit(view: WindowView, state: Any, p: StrategyParams) -> Decision:
    side = _side(view.close_ret > 0, p)
    if side == FLAT:
        return Decision(FLAT)
    target = view.high_ret if side == LONG else view.low_ret
    return Decision(side, entry_limit=None, take_profit=view.price(target))


def highlow(view: WindowView, state: Any, p: StrategyParams) -> Decision:
    side = _side(view.close_ret > 0, p)
    if side == FLAT:
        return Decision(FLAT)
    level = view.low_ret if side == LONG else view.high_ret
    return Decision(side, entry_limit=view.price(level), take_profit=None)


def maxdiff(view: WindowView, state: MaxDiffState, p: StrategyParams) -> Decision:
    return decide_maxdiff(view, state, p.allow_short, p.maxdiff_min_history, p.maxdiff_grid)


# --- state: built only from settled bars (t+1 <= the next decision bar) -----------------------------

def _no_state(state, view, bar_next, settlement, p, exit_open):
    return state


def _update_unprofit(state, view: WindowView, bar_next: Bar, settlement: Settlement, p: StrategyParams,
                     exit_open: float | None):
    return bool(forecast_direction(view) * (bar_next.close - bar_next.open) > 0)


def _update_maxdiff(state, view: WindowView, bar_next: Bar, settlement: Settlement, p: StrategyParams,
                    exit_open: float | None):
    return learn_maxdiff(view, bar_next, state, p.allow_short, p.costs, p.fill_mode, p.same_bar, p.maxdiff_grid,
                         exit_open, p.settle_delay)


@dataclass(frozen=True)
class Strategy:
    """A decision rule plus how its state starts and advances after each settled bar."""

    name: str
    description: str
    decide: Callable[[WindowView, Any, StrategyParams], Decision]
    initial_state: Callable[[], Any] = lambda: None
    update: Callable[[Any, WindowView, Bar, Settlement, StrategyParams, float | None], Any] = _no_state
    reads_forecast: bool = True  # False: forecast-blind (module docstring)
    # True: its state sums what every earlier window's forecast led to (maxdiff's offsets), so one draw of samples
    # moves all its later decisions: its Monte Carlo band is flagged (marketcast.backtest.montecarlo, "The bias test")
    carries_samples: bool = False


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("simple", "long if the close forecast is up, else short", simple),
    Strategy("all_signals", "long if close, high and low forecasts are all up; short if all down", all_signals),
    Strategy("buy_hold", "long every bar from its open, exited by the run's exit rule: a round trip and two costs "
             "per bar, not buy and hold", buy_hold, reads_forecast=False),
    Strategy("unprofit_shutdown", "simple, but flat while simple's last call was wrong", unprofit_shutdown,
             lambda: None, _update_unprofit),
    Strategy("ci_guard", "simple's side only when the forecast close band excludes zero", ci_guard),
    Strategy("entry_takeprofit", "market entry in simple's direction, take profit at the forecast extreme, else "
             "exit by the run's exit rule", entry_takeprofit),
    Strategy("highlow", "limit entry at the forecast low (long) or high (short), exit by the run's exit rule",
             highlow),
    Strategy("maxdiff", "buy the forecast low, sell the forecast high, offsets learned from earlier windows "
             "scored with the run's exit rule",
             maxdiff, MaxDiffState.initial, _update_maxdiff, carries_samples=True),
)}
assert tuple(STRATEGIES) == STRATEGY_NAMES
FORECAST_DRIVEN = tuple(name for name, s in STRATEGIES.items() if s.reads_forecast)


def get_strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ConfigError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    return STRATEGIES[name]


def initial_state(name: str) -> Any:
    """The state a strategy starts from before any window has settled."""
    return get_strategy(name).initial_state()


def decide(name: str, view: WindowView, state: Any, params: StrategyParams) -> Decision:
    """Decision of strategy ``name`` at bar t for bar t+1 (works for the latest bar: no t+1 needed)."""
    return get_strategy(name).decide(view, state, params)


def advance(name: str, state: Any, view: WindowView, bar_next: Bar, settlement: Settlement,
            params: StrategyParams, exit_open: float | None = None) -> Any:
    """The strategy's state after the decision made on ``view`` settled on ``bar_next`` (and ``exit_open``, bar
    t+2's open where the exit rule exits there)."""
    return get_strategy(name).update(state, view, bar_next, settlement, params, exit_open)


def step(name: str, view: WindowView, state: Any, bar_next: Bar, params: StrategyParams,
         sizer: Callable[[Decision], float] | None = None, exit_open: float | None = None
         ) -> tuple[Decision, Settlement, Any]:
    """One walk-forward window of one strategy: decide at t, settle on bar t+1 with the decision's size
    (``sizer(decision)``, e.g. :func:`marketcast.backtest.engine.decision_size` over the window's samples; 1.0
    without one) and exiting at ``exit_open`` (bar t+2's open) when given, advance the state (the backtest
    engine and the live planner's carried backtest both walk with this step)."""
    decision = decide(name, view, state, params)
    size = 1.0 if sizer is None else sizer(decision)
    settlement = settle(decision, bar_next, params.costs, params.fill_mode, params.same_bar, size, exit_open)
    return decision, settlement, advance(name, state, view, bar_next, settlement, params, exit_open)
