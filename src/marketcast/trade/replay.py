"""Run the loop over history with the paper broker: one cycle per bar, in seconds, resumable.

The replay clock is the paper broker's: before the cycles for bar t it settles bar t (the orders of
bar t-1), so the loop sees exactly what it would see live after the close of t. Each market's clock has its
cycle only at its own bars (a crypto pair on a Saturday, a stock on its sessions), as the live supervisor. Finished cycles are
recorded in the journal, so a killed replay restarted with the same state dir carries on where it
stopped and ends with the same orders and fills as an uninterrupted one.

The paper broker holds as Alpaca does (:mod:`marketcast.trade.venues.holding`): positions carry overnight,
working orders live across bars, the loop closes what earlier bars left, and it looks at each market once while
a bar trades (between the bar's halves, as the live supervisor's watches between two closes), so a crypto entry
that filled gets its separately sent take-profit and, under exit rule ``close``, a stock entry that filled gets
its market-on-close exit (:mod:`marketcast.trade.loop.on_close`). So a replay trades each exit rule as ``trade
run`` does and as ``marketcast backtest --exit RULE`` scores it (docs/trading.md#exit-rule). With ``hold`` the
loop also holds a position while the next decision stays on its side (``LoopConfig.hold_agreeing``). A state
folder keeps the exit rule and ``hold`` it was made with; the other is refused in one line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from marketcast.backtest.execution import describe as describe_exit
from marketcast.data.bars import Bars
from marketcast.data.timestamps import ISO_FIX
from marketcast.errors import ConfigError, StateError
from marketcast.fileio import check_writable, write_atomic
from marketcast.forecast.exposure import weigh
from marketcast.trade.journal.files import FILE_MODE, check_new_state, check_state_files, outside_state, private_dir
from marketcast.trade.journal.state import Journal, check_journal, setting_mismatch
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.loop.on_close import day_trade_note
from marketcast.trade.loop.planner import Planner
from marketcast.trade.ops import blotter
from marketcast.trade.ops.monitor import Monitor
from marketcast.trade.risk.markets import tradable, without_bars
from marketcast.trade.venues.paper import PaperBroker, iso, mode_mismatch

log = logging.getLogger("marketcast.trade")


@dataclass
class ReplayResult:
    state_dir: Path
    cycles_run: int
    equity: pd.Series
    orders: int  # the blotter's rows (trade orders): every order the loop journalled
    filled: int  # ... and those with a fill of their own (marketcast.trade.ops.blotter.counts)
    refusals: int = 0  # orders the broker refused (the rules model should leave none)
    png: Path | None = None
    exposure: dict = field(default_factory=dict)  # symbol -> (what the weights may have seen of its cycles, cycles)


def _day(text, flag: str) -> pd.Timestamp:
    try:
        return pd.Timestamp(text, tz="UTC")
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{flag} {text!r} is not a date ({exc}); {ISO_FIX}") from None


def replay_dates(bars: Mapping[str, Bars], start, end) -> list[pd.Timestamp]:
    lo, hi = _day(start, "--start"), _day(end, "--end")
    if hi <= lo:
        raise ConfigError(f"--end {end} must be after --start {start}")
    stamps = sorted({t for b in bars.values() for t in b.frame.index if lo <= t <= hi})
    if len(stamps) < 2:
        raise ConfigError(f"fewer than 2 bars between {start} and {end}; pick dates inside the data")
    return stamps


def cycles(bars: Bars, dates: list[pd.Timestamp]) -> pd.DatetimeIndex:
    """The decision bars of ``bars``' cycles in a replay over ``dates``: its own bars from the first date to the
    one before the last (the last is only settled)."""
    index = bars.frame.index
    return index[(index >= dates[0]) & (index < dates[-1])]


def replay(
    bars: Mapping[str, Bars],
    planner: Planner,
    state_dir: str | Path,
    start,
    end,
    config: LoopConfig,
    *,
    starting_cash: float = 100_000.0,
    history: int | None = None,
    png: str | Path | None = None,
    max_cycles: int | None = None,
    on_step: Callable[[str], None] | None = None,
    hold: bool = False,
) -> ReplayResult:
    """Decide at every bar in [start, end) and settle through ``end``; resumes from ``state_dir``.

    ``on_step`` (a progress display) hears of each decision date as its cycle starts (or is skipped as done).
    """
    state = Path(state_dir)
    bars = tradable(bars)  # the market check and calendar filter `trade run` applies: before any file
    dates = replay_dates(bars, start, end)
    private_dir(state)
    journal = Journal(state / "journal.db")  # first: a damaged journal stops the replay before the broker moves
    bound = {"exit": config.exit, "hold": "yes" if hold else "no"}
    if (mismatch := setting_mismatch(state / "journal.db", **bound)) is not None:
        journal.close()
        raise ConfigError(mismatch)
    broker = PaperBroker(state / "broker.db", bars, starting_cash=starting_cash, fee=config.fee,
                         start=dates[0], hold=True)
    journal.set_meta(**bound)
    journal.clock = lambda: broker.clock  # one clock in the blotter: a submission at the simulated time
    if hold:  # a position is held on while the decision stays on its side, its take-profit resting
        config = replace(config, hold_agreeing=True)
    loop = TradingLoop(broker, journal, planner, history_feed(bars, lambda: broker.clock, history), config,
                       Monitor(state), {s: b.asset_class for s, b in bars.items()})
    clocks = {clock: [bars[s].frame.index for s in symbols] for clock, symbols in loop.clocks().items()}

    def watch(stamp: pd.Timestamp) -> None:
        """While bar ``stamp`` trades, each market with a bar there looks at its last decided bar (the
        supervisor's watch): fills are booked and a crypto take-profit goes out."""
        for clock, indexes in clocks.items():
            last = journal.last_done_cycle(clock)
            if last is not None and pd.Timestamp(last) < stamp and any(stamp in index for index in indexes):
                loop.reconcile(last, clock=clock)

    between = watch
    run = 0
    for ts in dates[:-1]:
        key = iso(ts)
        if on_step is not None:
            on_step(f"{ts:%Y-%m-%d}")
        due = [c for c, indexes in clocks.items()
               if any(ts in index for index in indexes) and not journal.cycle_done(key, c)]
        if not due:
            continue
        if max_cycles is not None and run >= max_cycles:
            break
        broker.advance_to(ts, between)
        for clock in due:  # each market decides on its own bars: crypto on weekends too, stocks on sessions
            loop.run_cycle(key, clock=clock)
        run += 1
    else:
        broker.advance_to(dates[-1], between)
        loop.reconcile(iso(dates[-1]))
    refusals = sum(outcome == "rejected" for _, outcome in broker.submit_log())
    result = ReplayResult(state, run, broker.equity_curve(), *blotter.counts(blotter.rows(journal)), refusals)
    if png is not None:
        result.png = plot_equity(result.equity, Path(png), title=f"paper replay {dates[0]:%Y-%m-%d} .. {dates[-1]:%Y-%m-%d}")
    broker.close()
    journal.close()
    return result


def plot_equity(equity: pd.Series, path: Path, title: str = "equity") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(equity.index, equity.values, lw=1.2)
    ax.set_title(title)
    ax.set_ylabel("equity")
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    try:  # 0600 before the first byte (an account's equity curve is its owner's); PNG named: no suffix added
        return write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight"),
                            StateError, FILE_MODE)
    finally:
        plt.close(fig)


@dataclass(frozen=True)
class ReplayRequest:
    """What ``trade replay`` was asked, its settings resolved: the period, the symbols and their bars, the model,
    the account, and the rules (:class:`marketcast.trade.start.TradeRules`) it trades under."""

    start: str
    end: str
    symbols: tuple[str, ...]
    pins: Mapping[str, str]  # symbol -> strategy, traded whatever the walk-forward pick
    state_dir: Path
    rules: object  # marketcast.trade.start.TradeRules
    model: str = "baseline"
    weights: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    data_dir: Path | None = None
    on_duplicate: str = "error"
    asset_class: list[str] | None = None
    periods_per_year: float | None = None
    fee: float | None = None
    cash: float = 100_000.0
    png: Path | None = None  # default: STATE_DIR/equity.png
    verbose: bool = False
    hold: bool = False  # hold a position while the next decision stays on its side (LoopConfig.hold_agreeing)
    require_clean: bool = False  # refuse rather than label (marketcast.forecast.exposure)


def replay_history(request: ReplayRequest, progress: Callable[[int], object],
                   announce: Callable[[str], object] = log.info) -> tuple[ReplayResult, float]:
    """Load the bars and the model, then replay under the state folder's lock (created only after every check);
    returns the result and the seconds the replay took. ``progress(steps)`` is the progress
    display, a context manager yielding ``step(description)``; ``announce(line)`` hears the exit rule traded (and
    the pattern-day-trader note where it applies) once every check passed.

    Tuned weights (a ``tuning.json``) are refused in one line when a cycle's decision bar is on or before their
    ``until`` on a tuned symbol (:func:`marketcast.forecast.tuning.guard_weights`): its fills would grade the
    model on bars it was trained on. The result carries what the weights may have seen of each symbol's cycles
    (:mod:`marketcast.forecast.exposure`), refused instead with ``require_clean``."""
    import time

    from marketcast.data import load_symbol
    from marketcast.data.asset import asset_classes
    from marketcast.forecast import load_forecaster
    from marketcast.trade.journal.lock import new_state
    from marketcast.trade.launch import resolve_command, setup_logging
    from marketcast.trade.loop.planner import BacktestPlanner

    r = request
    if r.png is not None:  # written exactly there: a FIFO or a device is refused now, not after the replay
        check_writable(outside_state(r.png, r.state_dir, "--png"), "--png", folder=False)
    check_state_files(check_new_state(r.state_dir))
    setup_logging(None, r.verbose)  # the warnings below go to stderr before the state folder exists
    classes = asset_classes(r.asset_class, r.symbols)
    read = {s: load_symbol(s, r.data_dir, on_duplicate=r.on_duplicate, asset_class=classes[s.upper()],
                           periods_per_year=r.periods_per_year) for s in r.symbols}
    bars = tradable(read)
    dates = replay_dates(bars, r.start, r.end)
    check_journal(r.state_dir / "journal.db")  # a foreign file is refused before the lock or the log is made
    for mismatch in (mode_mismatch(r.state_dir / "broker.db", True),
                     setting_mismatch(r.state_dir / "journal.db", exit=r.rules.planner.exit,
                                      hold="yes" if r.hold else "no")):
        if mismatch is not None:
            raise ConfigError(mismatch)
    empty = without_bars(bars, _day(r.start, "--start"), _day(r.end, "--end"))
    syms = tuple(s for s in r.symbols if s not in empty)
    bars = {s: bars[s] for s in syms}
    exposure = weigh(r.model, r.weights, lambda: [(s, read[s].frame, cycles(bars[s], dates)) for s in syms],
                     require_clean=r.require_clean, fix="replay after it (--start {start})",
                     what="cycle {k} (decision bar {bar})")
    forecaster = load_forecaster(r.model, weights=r.weights, device=r.device, dtype=r.dtype, seed=r.seed)
    announce(describe_exit(r.rules.planner.exit))
    if (note := day_trade_note(r.rules.planner.exit, r.cash, [b.asset_class for b in bars.values()])):
        announce(note)
    started = time.perf_counter()
    with new_state(r.state_dir) as began, progress(len(dates) - 1) as step:
        cycles_begun = []

        def on_step(label: str) -> None:  # the second cycle begins: the first is in the journal
            cycles_begun.append(label)
            if len(cycles_begun) == 2:
                began()
            step(label)

        setup_logging(r.state_dir, r.verbose)
        planner = BacktestPlanner(forecaster, r.rules.planner, pinned=r.pins)
        loop_config = LoopConfig(syms, gates=r.rules.gates, portfolio=r.rules.portfolio, risk=r.rules.risk,
                                 fee=r.fee, mode="replay", exit=r.rules.planner.exit,
                                 resolve=resolve_command(r.state_dir, "paper", False, syms, r.data_dir),
                                 resume=f"marketcast trade resume --state-dir {r.state_dir}")
        result = replay(bars, planner, r.state_dir, r.start, r.end, loop_config, starting_cash=r.cash,
                        png=r.png or r.state_dir / "equity.png", on_step=on_step, hold=r.hold)
        began()
    labels = {s: (exposure.meta(s, cycles(bars[s], dates), read[s].frame), len(cycles(bars[s], dates))) for s in syms}
    return replace(result, exposure={s: m for s, m in labels.items() if m[0]}), time.perf_counter() - started
