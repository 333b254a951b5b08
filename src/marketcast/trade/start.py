"""What ``trade run`` does once its settings are resolved: open the journal and the venue, load and warm the
model (the first of the chain that works, or the one ``trade promote`` made active), build the loop, the shadow
candidate beside it, and hand it to the supervisor (or plan one dry cycle per market clock).

The rules the layered settings decide (sizing, gates, portfolio, risk, freshness, alert thresholds) come in
as a :class:`TradeRules`, built by the command from its settings table; how a plan is shown comes in as
functions, so this room never reaches up to the command line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from marketcast.backtest.config import BacktestConfig
from marketcast.console import console
from marketcast.data.asset import asset_classes
from marketcast.errors import ConfigError, ExitCode
from marketcast.forecast.registry import MODEL_NAMES
from marketcast.forecast.exposure import exposure_text, weigh
from marketcast.settings import Settings
from marketcast.trade.launch import Market, check_markets, open_venue, resolve_command
from marketcast.trade.ops.alerts import AlertThresholds
from marketcast.trade.risk.freshness import Freshness
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.risk.limits import RiskLimits
from marketcast.trade.risk.portfolio import PortfolioConfig

log = logging.getLogger("marketcast.trade")
ShowPlan = Callable[[object, str, dict[str, int]], None]  # (cycle report, title, price decimals per symbol)


@dataclass(frozen=True)
class TradeRules:
    """The loop's rules as the layered trade settings decide them."""

    planner: BacktestConfig  # the planner's backtest settings: seed, selection and sizing
    gates: GateConfig
    portfolio: PortfolioConfig
    risk: RiskLimits
    freshness: Freshness
    thresholds: AlertThresholds


@dataclass(frozen=True)
class LoopRequest:
    """Where and how ``trade run`` trades (the venue flags, once, dry run, the shadow candidate)."""

    state_dir: Path
    broker_name: str
    live: bool
    once: bool = False
    dry_run: bool = False
    clock_file: Optional[Path] = None
    resolve_dir: Optional[Path] = None  # the folder the printed commands name (a dry run works on a copy)
    shadow: Optional[str] = None
    shadow_model: Optional[str] = None
    require_clean: bool = False  # refuse rather than label what the weights may have seen (--require-clean)
    began: Optional[Callable[[], None]] = None  # told once the journal is open: the state is kept from then on


def _no_baseline_shadow(shadow: str | None, model: str) -> None:
    """A shadow of the baseline has no weights to compare: refused in one line."""
    if shadow is not None and model == "baseline":
        raise ConfigError(f"--shadow {shadow}: the baseline model has no weights to compare; pass --model toto or "
                          f"kronos with --shadow, or a --shadow-model")


def _refuse(settings: Settings, request: LoopRequest) -> None:
    syms, shadow, shadow_model = settings["symbols"], request.shadow, request.shadow_model
    stray = sorted(set(settings["strategy"]) - set(syms))
    if stray:
        raise ConfigError(f"strategy pins {', '.join(stray)}, which is not among the symbols ({', '.join(syms)}); "
                          f"add it to symbols or drop the pin")
    if shadow_model is not None and shadow is None:
        raise ConfigError(f"--shadow-model {shadow_model} needs --shadow WEIGHTS (e.g. --shadow random:4m or a "
                          f"folder of fine-tuned weights)")
    if shadow_model is not None and shadow_model not in MODEL_NAMES:
        raise ConfigError(f"--shadow-model {shadow_model!r}: choose one of {', '.join(MODEL_NAMES)}")
    if not (request.state_dir / "journal.db").exists():  # refused before a fresh state folder gets its journal
        _no_baseline_shadow(shadow, shadow_model or settings["model"][0])


def preflight(settings: Settings, broker_name: str) -> None:
    """Before the state folder is touched, so a refused start leaves no file: the journal there is marketcast's
    (or absent), and the market check (:func:`marketcast.trade.risk.markets.refuse_untraded`) passes: the paper
    broker's classes from its bars (as ``trade replay`` reads them), Alpaca's from the symbols' names (as its
    venue does); ``--asset-class`` overrides both."""
    from marketcast.data import infer_asset_class, load_symbol
    from marketcast.trade.journal.state import check_journal
    from marketcast.trade.risk.markets import refuse_untraded

    check_journal(Path(settings["state_dir"]) / "journal.db")

    syms, market = settings["symbols"], asset_classes(list(settings["data.asset_class"] or ()), settings["symbols"])
    if broker_name != "paper":
        refuse_untraded({s: market.get(s.upper()) or infer_asset_class(s) for s in syms})
        return
    data_dir = None if settings["data_dir"] is None else Path(settings["data_dir"])
    refuse_untraded({s: load_symbol(s, data_dir, on_duplicate=settings["data.on_duplicate"],
                                    asset_class=market.get(s.upper()),
                                    periods_per_year=settings["data.periods_per_year"]).asset_class for s in syms})


def _active_model(settings: Settings, journal) -> tuple[tuple[str, ...], Optional[str]]:
    """The model chain and weights to load: the settings', unless ``trade promote`` made another active."""
    from marketcast.trade.loop.shadow import active_model

    chain, weights = settings["model"], settings["weights"]
    promoted = active_model(journal)  # `trade promote` swaps the active model: (name, weights)
    active = None if promoted is None else promoted[1]
    if active is not None and weights is not None and weights != active:
        raise ConfigError(f"--weights {weights}: this state folder's active model is {active} (from `trade "
                          f"promote`); drop --weights or pass --weights {active}")
    if promoted is not None and promoted[0] is not None and promoted[0] != chain[0]:
        if settings.values["model"].source != "default":
            raise ConfigError(f"--model {','.join(chain)}: this state folder's active model is {promoted[0]} "
                              f"{active} (from `trade promote`); drop --model or pass --model {promoted[0]}")
        chain = (promoted[0],)
    return chain, weights or active


def _shadow(loop, journal, settings: Settings, request: LoopRequest, chain, weights, skipped: int, config,
            alerts) -> None:
    """The same planner with the candidate's model and weights: journalled, never ordered."""
    from marketcast.trade.loop.planner import BacktestPlanner
    from marketcast.trade.loop.shadow import Shadow
    from marketcast.trade.loop.warmup import load_model

    shadow = request.shadow
    live_name, name = chain[skipped], request.shadow_model or chain[0]
    planner, failed = None, None
    try:
        candidate = load_model((name,), None, config, weights=shadow, device=settings["device"],
                               dtype=settings["dtype"], seed=settings["seed"])
        planner = BacktestPlanner(candidate.forecaster, config, pinned=settings["strategy"])
    except Exception as exc:  # noqa: BLE001 - a candidate that does not load never stops the live loop
        failed = f"could not load: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
        console.print(f"shadow {name} {shadow} {failed}; the live loop runs without it", highlight=False,
                      soft_wrap=True)
    loop.shadow = Shadow(journal, planner, shadow, weights or f"{live_name} (default weights)", model=name,
                         live_model=live_name, alerts=None if request.dry_run else alerts, failed=failed)


def start_loop(settings: Settings, rules: TradeRules, request: LoopRequest, *, show_plan: ShowPlan,
               on_cycle: Callable[[object, str, dict[str, int]], None],
               on_exposure: Callable[[dict], None] = lambda labelled: None) -> int:
    """Trade ``settings``' symbols until stopped (or one cycle with ``once``); returns the supervisor's exit code.

    A dry run plans one cycle per market clock, shows each with ``show_plan`` and returns OK; otherwise every
    cycle's report goes to ``on_cycle(report, title, decimals)``. Tuned weights (live or ``--shadow``, with a
    ``tuning.json``) are refused in one line when the newest bar, the first cycle's decision bar, is on or before
    their ``until`` (:func:`marketcast.forecast.exposure.weigh`; the paper broker's files are matched by content
    too, a broker that serves only its latest bars by name). What the live weights may have seen of the newest bar
    (:mod:`marketcast.forecast.exposure`) is a warning line per label (stderr and trade.log), handed to ``on_exposure``
    (symbol -> (meta, 1)); ``request.require_clean`` refuses it instead.
    """
    from marketcast.data.ticks import price_decimals
    from marketcast.backtest.execution import describe as describe_exit
    from marketcast.trade.journal.state import Journal, setting_mismatch
    from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
    from marketcast.trade.loop.on_close import day_trade_note
    from marketcast.trade.loop.planner import BacktestPlanner
    from marketcast.trade.loop.supervisor import Supervisor
    from marketcast.trade.loop.warmup import load_model
    from marketcast.trade.ops.alerts import Alerts
    from marketcast.trade.ops.monitor import Monitor

    r, syms = request, settings["symbols"]
    _refuse(settings, r)
    data_dir = None if settings["data_dir"] is None else Path(settings["data_dir"])
    rule, hold = rules.planner.exit, bool(settings["hold"])
    bound = {"exit": rule, "hold": "yes" if hold else "no"}  # a state folder keeps both (as a replay's does)
    if (mismatch := setting_mismatch(r.state_dir / "journal.db", **bound)) is not None:
        raise ConfigError(mismatch)
    journal = Journal(r.state_dir / "journal.db")  # first: a damaged journal stops the run before the broker moves
    if r.began is not None:  # before the broker moves: a new state folder that failed before here is removed
        r.began()
    journal.set_meta(**bound)
    chain, weights = _active_model(settings, journal)
    _no_baseline_shadow(r.shadow, r.shadow_model or chain[0])  # the promoted model, when there is one
    market = Market(asset_classes(list(settings["data.asset_class"] or ()), syms),
                    settings["data.periods_per_year"])
    venue = open_venue(r.broker_name, r.live, syms, r.state_dir, data_dir, settings["fee"], r.clock_file,
                       settings["data.on_duplicate"], market, hold=hold)
    now = venue.now()  # the first request: refused keys or an unavailable broker end the run here
    check_markets(venue)
    console.print(describe_exit(rule), highlight=False, soft_wrap=True)  # the rule traded, stated at start
    if (note := day_trade_note(rule, venue.broker.account().equity, venue.asset_classes.values())):
        console.print(note, highlight=False, soft_wrap=True)
    venue.refresh(now)
    decimals = {s: price_decimals(venue.feed(s).frame["close"]) for s in syms}
    newest = lambda: [(s, getattr(venue.history(s), "frame", None), venue.feed(s).frame.index[-1:])  # noqa: E731
                      for s in syms]
    exposures = [weigh(name, candidate, newest, require_clean=r.require_clean, what="the newest bar {bar}",
                       fix="trade on bars after it (the paper broker's --clock-file at {start} or later) or with "
                           "weights tuned to an earlier --until")
                 for name, candidate in [(chain[0], weights), *([(r.shadow_model or chain[0], r.shadow)] if r.shadow
                                                                 is not None else [])]]  # before the model loads
    labelled = {s: (exposures[0].meta(s, bars, frame), 1) for s, frame, bars in newest()}
    for line in exposure_text(labelled):  # one warning line on stderr, kept in trade.log with the run
        log.warning(line)
    on_exposure(labelled)
    alerts = Alerts(None if r.dry_run else r.state_dir, settings["alerts.webhook"])
    config = rules.planner
    loaded = load_model(chain, None if r.dry_run else venue.feed(syms[0]), config,
                        weights=weights, device=settings["device"], dtype=settings["dtype"],
                        seed=settings["seed"])
    for skipped in loaded.skipped:
        alerts.emit("model_fallback", skipped["model"], f"{skipped['model']} skipped: {skipped['error']}")
    monitor = None if r.dry_run else Monitor(r.state_dir)
    if monitor is not None:
        monitor.warmed(loaded.warmup, loaded.skipped)
    where = r.resolve_dir or r.state_dir
    add_latest = settings["add_latest"] if settings["add_latest"] is not None else venue.broker.has_quotes
    mode = "live" if r.live else "paper"
    loop_config = LoopConfig(syms, gates=rules.gates, portfolio=rules.portfolio, risk=rules.risk,
                             freshness=rules.freshness, add_latest=add_latest, fee=settings["fee"], mode=mode,
                             exit=rule, hold_agreeing=hold,
                             resolve=resolve_command(where, r.broker_name, r.live, syms, data_dir),
                             resume=f"marketcast trade resume --state-dir {where}")
    loop = TradingLoop(venue.broker, journal, BacktestPlanner(loaded.forecaster, config, pinned=settings["strategy"]),
                       venue.feed, loop_config, monitor, venue.asset_classes)
    if r.shadow is not None:
        _shadow(loop, journal, settings, r, chain, weights, len(loaded.skipped), config, alerts)
    if r.dry_run:  # each market's clock plans on its own newest bar
        for clock, symbols in loop.clocks().items():
            bar = max(venue.feed(s).frame.index[-1] for s in symbols).isoformat()
            show_plan(loop.run_cycle(bar, dry_run=True, now=now, clock=clock),
                      f"plan for the bar after {bar} ({clock}; dry run, nothing sent)", decimals)
        return ExitCode.OK
    return Supervisor(loop, venue, alerts, rules.thresholds, interval_s=settings["interval_s"], once=r.once,
                      report=lambda report: on_cycle(report, f"{mode} cycle at {report.decision_ts} via "
                                                             f"{venue.broker.endpoint}", decimals)).run()
