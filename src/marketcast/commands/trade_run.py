"""What ``trade run`` does once its settings are resolved: open the venue and the journal, load and warm the
model (the first of the chain that works), build the loop and hand it to the supervisor; print a plan (with each
symbol's price decimals) or the settings in effect."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from marketcast.console import console
from marketcast.data.asset import asset_classes
from marketcast.errors import ConfigError, ExitCode
from marketcast.forecast.registry import MODEL_NAMES
from marketcast.settings import Settings
from marketcast.trade.launch import Market, check_markets, open_venue, resolve_command


def scratch_copy(state_dir: Path, scratch: Path) -> Path:
    """Copy the databases (with their write-ahead logs) of ``state_dir`` into ``scratch``, so a dry run can
    reconcile and advance the paper clock without creating or touching a file in ``state_dir``."""
    for name in ("broker.db", "journal.db"):
        for suffix in ("", "-wal"):
            src = state_dir / f"{name}{suffix}"
            if src.exists():
                shutil.copyfile(src, scratch / src.name)
    return scratch


def print_plan(report, title: str, decimals: dict[str, int]) -> None:
    """The plan as a table, each price with its symbol's decimals (a $0.30 coin's limit is not 0.30)."""
    from marketcast.trade.loop.cycle import describe

    table = Table(title=title)
    for col in ("symbol", "strategy", "side", "entry", "take profit", "edge", "sharpe", "qty", "client_order_id",
                "skipped because"):
        table.add_column(col)
    for r in describe(report):
        fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
        price = f".{decimals.get(r['symbol'], 2)}f"
        table.add_row(r["symbol"], r["strategy"], r["side"], fmt(r["entry"], price), fmt(r["take_profit"], price),
                      fmt(r["edge"], ".3%"), fmt(r["sharpe"], ".2f"), fmt(r["qty"], "g"), r["client_order_id"],
                      r["why_not"])
    console.print(table)


def print_config(settings: Settings, broker_name: str, live: bool) -> None:
    from marketcast.commands.trade_settings import config_rows

    table = Table(title=f"trade settings ({', '.join(settings.files)})")
    for col in ("key", "value", "source", "from", "overrides"):
        table.add_column(col)
    for row in config_rows(settings, broker_name, live):
        table.add_row(*map(escape, row))
    console.print(table)


def _no_baseline_shadow(shadow: str | None, model: str) -> None:
    """A shadow of the baseline has no weights to compare: refused in one line."""
    if shadow is not None and model == "baseline":
        raise ConfigError(f"--shadow {shadow}: the baseline model has no weights to compare; pass --model toto or "
                          f"kronos with --shadow, or a --shadow-model")


def run_loop(settings: Settings, state_dir: Path, broker_name: str, live: bool, once: bool, dry_run: bool,
              clock_file: Path | None, resolve_dir: Path | None = None, shadow: str | None = None,
              shadow_model: str | None = None) -> None:
    from marketcast.commands import trade_settings as cfg
    from marketcast.data.ticks import price_decimals
    from marketcast.trade.journal.state import Journal
    from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
    from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
    from marketcast.trade.loop.supervisor import Supervisor
    from marketcast.trade.loop.warmup import load_model
    from marketcast.trade.ops.alerts import Alerts
    from marketcast.trade.ops.monitor import Monitor

    syms = settings["symbols"]
    stray = sorted(set(settings["strategy"]) - set(syms))
    if stray:
        raise ConfigError(f"strategy pins {', '.join(stray)}, which is not among the symbols ({', '.join(syms)}); "
                          f"add it to symbols or drop the pin")
    if shadow_model is not None and shadow is None:
        raise ConfigError(f"--shadow-model {shadow_model} needs --shadow WEIGHTS (e.g. --shadow random:4m or a "
                          f"folder of fine-tuned weights)")
    if shadow_model is not None and shadow_model not in MODEL_NAMES:
        raise ConfigError(f"--shadow-model {shadow_model!r}: choose one of {', '.join(MODEL_NAMES)}")
    if not (state_dir / "journal.db").exists():  # refused before a fresh state folder gets its journal
        _no_baseline_shadow(shadow, shadow_model or settings["model"][0])
    data_dir = None if settings["data_dir"] is None else Path(settings["data_dir"])
    journal = Journal(state_dir / "journal.db")  # first: a damaged journal stops the run before the broker moves
    from marketcast.trade.loop.shadow import Shadow, active_model

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
    weights = weights or active
    _no_baseline_shadow(shadow, shadow_model or chain[0])  # the promoted model, when there is one
    market = Market(asset_classes(list(settings["data.asset_class"] or ()), syms),
                    settings["data.periods_per_year"])
    venue = open_venue(broker_name, live, syms, state_dir, data_dir, settings["fee"], clock_file,
                       settings["data.on_duplicate"], market)
    now = venue.now()  # the first request: refused keys or an unavailable broker end the run here
    check_markets(venue)
    venue.refresh(now)
    decimals = {s: price_decimals(venue.feed(s).frame["close"]) for s in syms}
    alerts = Alerts(None if dry_run else state_dir, settings["alerts.webhook"])
    config = cfg.sizing(settings, replace(PLANNER_CONFIG, seed=settings["seed"],
                                          selection=cfg.selection(settings, PLANNER_CONFIG.selection)))
    loaded = load_model(chain, None if dry_run else venue.feed(syms[0]), config,
                        weights=weights, device=settings["device"], dtype=settings["dtype"],
                        seed=settings["seed"])
    for skipped in loaded.skipped:
        alerts.emit("model_fallback", skipped["model"], f"{skipped['model']} skipped: {skipped['error']}")
    monitor = None if dry_run else Monitor(state_dir)
    if monitor is not None:
        monitor.warmed(loaded.warmup, loaded.skipped)
    where = resolve_dir or state_dir
    add_latest = settings["add_latest"] if settings["add_latest"] is not None else venue.broker.has_quotes
    mode = "live" if live else "paper"
    loop_config = LoopConfig(syms, gates=cfg.gates(settings), portfolio=cfg.portfolio(settings),
                             risk=cfg.risk(settings), freshness=cfg.freshness(settings), add_latest=add_latest,
                             fee=settings["fee"], mode=mode,
                             resolve=resolve_command(where, broker_name, live, syms, data_dir),
                             resume=f"marketcast trade resume --state-dir {where}")
    loop = TradingLoop(venue.broker, journal, BacktestPlanner(loaded.forecaster, config, pinned=settings["strategy"]),
                       venue.feed, loop_config, monitor, venue.asset_classes)
    if shadow is not None:  # the same planner, the candidate's model and weights: journalled, never ordered
        live_name, name = chain[len(loaded.skipped)], shadow_model or chain[0]
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
                             live_model=live_name, alerts=None if dry_run else alerts, failed=failed)
    if dry_run:  # each market's clock plans on its own newest bar
        for clock, symbols in loop.clocks().items():
            bar = max(venue.feed(s).frame.index[-1] for s in symbols).isoformat()
            print_plan(loop.run_cycle(bar, dry_run=True, now=now, clock=clock),
                       f"plan for the bar after {bar} ({clock}; dry run, nothing sent)", decimals)
        return

    def show(report) -> None:
        print_plan(report, f"{mode} cycle at {report.decision_ts} via {venue.broker.endpoint}", decimals)
        console.print(f"submitted {len(report.submitted)}, already there {len(report.already)}, "
                      f"rejected {len(report.rejected)}, refused {len(report.refused)}, "
                      f"equity {report.equity:,.2f}")

    code = Supervisor(loop, venue, alerts, cfg.thresholds(settings), interval_s=settings["interval_s"], once=once,
                      report=show).run()
    if code != ExitCode.OK:
        raise typer.Exit(code)
