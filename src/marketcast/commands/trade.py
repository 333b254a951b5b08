"""``marketcast trade run | resume | promote | status | orders | reconcile | replay``.

Paper (the embedded SQLite broker) is the default. Alpaca needs ``--broker alpaca`` and keys in the
environment; live money needs ``--live`` *and* ``--i-understand-live-trading`` (the flags choose the host;
``APCA_API_BASE_URL`` may only agree, and no config file can choose it). One loop per ``--state-dir`` (an OS
lock). Keys are never printed. ``trade run``'s settings come from :mod:`marketcast.commands.trade_settings`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.commands.trade_settings import SECTION, SETTINGS
from marketcast.console import console, err_console, print_json, progress_steps
from marketcast.errors import ConfigError, ExitCode
from marketcast.forecast.registry import MODEL_NAMES
from marketcast.settings import CONFIG_FILE, ENV_FILE, given_flags, resolve, with_options
from marketcast.trade.journal.files import check_state_files
from marketcast.trade.journal.shadow import METRICS
from marketcast.trade.launch import open_venue, resolve_command, setup_logging

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

DEFAULT_SYMBOLS = "SP500,NASDAQ"
STATE_HELP = "folder for broker.db, journal.db, records.jsonl, alerts.jsonl, trade.log"
STATE_OPT = typer.Option(Path("out/trade"), "--state-dir", help=STATE_HELP)


def _symbols(text: str) -> tuple[str, ...]:
    out = tuple(s.strip().upper() for s in text.split(",") if s.strip())
    if not out:
        raise ConfigError("--symbols is empty; pass e.g. SP500,NASDAQ")
    return out


def _venue_flags(paper: bool, i_understand: bool, broker_name: str) -> tuple[str, bool]:
    """(broker, live) from the flags; live money needs both flags, and the host is checked against
    ``APCA_API_BASE_URL`` here, before any request or state file."""
    if not paper and not i_understand:
        raise ConfigError("--live trades real money; add --i-understand-live-trading to confirm")
    if not paper:
        broker_name = "alpaca"
    if broker_name not in ("paper", "alpaca"):
        raise ConfigError(f"--broker {broker_name!r}: choose paper or alpaca")
    if broker_name == "alpaca":
        from marketcast.trade.venues.endpoints import data_url, trading_endpoint

        trading_endpoint(not paper, os.environ, warn=False)
        data_url(os.environ)
    return broker_name, not paper


@app.command()
@with_options(SETTINGS)
def run(
    ctx: typer.Context,
    paper: bool = typer.Option(True, "--paper/--live", help="Paper (default) or live money; only these flags "
                                                             "choose, never a config file."),
    i_understand: bool = typer.Option(False, "--i-understand-live-trading", help="Required with --live."),
    once: bool = typer.Option(False, "--once", help="One cycle on the newest bar, then exit (without it the loop "
                                                    "keeps running on the market's schedule)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; submit nothing, write nothing."),
    config: Path = typer.Option(Path(CONFIG_FILE), "--config", help="TOML settings file (its trade table)."),
    print_config: bool = typer.Option(False, "--print-config", help="Print every setting in effect and where it "
                                                                    "came from, then exit."),
    clock_file: Path | None = typer.Option(None, "--clock-file", help="Paper broker: read 'now' from this file "
                                                                       "(one ISO time) instead of the system "
                                                                       "clock; simulated time for tests and drills."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="INFO on stderr (trade.log always has it)."),
    shadow: str | None = typer.Option(None, "--shadow", help="Candidate weights for the same --model (e.g. "
                                                             "out/tuned): it plans beside the live model on every "
                                                             "cycle, journalled, never ordered; see `trade "
                                                             "promote`. Default: no shadow."),
    shadow_model: str | None = typer.Option(None, "--shadow-model", metavar=choice_list(MODEL_NAMES),
                                            help="The candidate's model, when it is not the live --model (e.g. "
                                                 "--model baseline --shadow-model toto2 --shadow random:4m). "
                                                 "Default: the live --model."),
    as_json: bool = typer.Option(False, "--json", help="With --once or --dry-run: print the cycle's plan and "
                                                       "outcome as one JSON document on stdout "
                                                       "(marketcast schema trade_run)."),
    require_clean: bool = typer.Option(False, "--require-clean", help=options.REQUIRE_CLEAN_HELP), **flags,
) -> None:
    """Run the trading loop (paper by default): continuously, or one cycle with --once.

    Settings: defaults < marketcast.toml (its trade table) < .env.compile < environment
    (MARKETCAST_TRADE_KEY, e.g. MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS; ADD_LATEST) < these flags.
    """
    from marketcast.commands import trade_run as command
    from marketcast.trade.journal.lock import new_state
    from marketcast.trade.start import LoopRequest, preflight

    if ctx.get_parameter_source("config").name == "COMMANDLINE" and not config.exists():
        raise ConfigError(f"--config {config}: no such file")
    settings = resolve(SETTINGS, SECTION, config=config, env_file=Path(ENV_FILE), env=os.environ,
                       flags=given_flags(ctx, SETTINGS, flags))
    broker_name, live = _venue_flags(paper, i_understand, settings["broker"])
    command.check_json(as_json, once, dry_run)
    if print_config:
        return command.print_config(settings, broker_name, live)  # prints; returns None
    setup_logging(None, verbose)
    preflight(settings, broker_name)  # a refused start leaves no file in the state folder
    state_dir, candidate = Path(settings["state_dir"]), {"shadow": shadow, "shadow_model": shadow_model,
                                                          "require_clean": require_clean}
    if not dry_run:
        with new_state(state_dir) as began:  # a full disk before the journal is open: no state folder left
            setup_logging(state_dir, verbose)
            command.run_loop(settings, LoopRequest(state_dir, broker_name, live, once, False, clock_file, began=began,
                                                   **candidate), as_json)
        return
    # read-only: the state is read from a scratch copy, nothing is written back
    with tempfile.TemporaryDirectory(prefix="marketcast-dry-run-") as scratch:
        copy = command.scratch_copy(state_dir, Path(scratch)) if state_dir.is_dir() else Path(scratch)
        command.run_loop(settings, LoopRequest(copy, broker_name, live, once, True, clock_file, resolve_dir=state_dir,
                                               **candidate), as_json)


@app.command()
def resume(state_dir: Path = STATE_OPT, as_json: options.AsJson = False) -> None:
    """Lift a risk halt (the day's loss count restarts from the next equity reading). A halt because the journal
    and the broker disagree needs `trade reconcile` instead; exit 5 while one is left."""
    from marketcast.trade.journal.lock import StateLock
    from marketcast.trade.journal.state import Journal
    from marketcast.trade.risk.limits import lift

    if not (state_dir / "journal.db").exists():
        raise ConfigError(f"{state_dir}: no journal.db; nothing to resume")
    with StateLock(state_dir):
        setup_logging(state_dir, False)
        journal = Journal(state_dir / "journal.db")
        lifted = lift(journal, "trade resume")
        left = journal.halts.active()
        journal.close()
    if as_json:  # src/marketcast/schemas/trade_resume.schema.json
        print_json({"state_dir": str(state_dir), "lifted": lifted, "still_halted": [h.message() for h in left]})
    else:
        console.print(f"lifted {lifted} risk halt(s)" if lifted else "no risk halt to lift", highlight=False)
        for halt in left:
            console.print(f"still halted: {halt.message()}", highlight=False, soft_wrap=True)
    if left:
        raise typer.Exit(ExitCode.HALTED)


@app.command()
def promote(
    state_dir: Path = STATE_OPT,
    min_decisions: int = typer.Option(60, "--min-decisions", min=2, help="Paired settled decisions the shadow "
                                                                         "needs first (one symbol: days; e.g. 120)."),
    alpha: float = typer.Option(0.05, "--alpha", callback=options.open_unit,
                                help="False-promotion rate of the sequential test, strictly between 0 and 1, valid "
                                     "when asked every cycle (e.g. 0.01)."),
    metric: str = typer.Option("pnl", "--metric", callback=options.one_of(METRICS), metavar=choice_list(METRICS),
                               help="What the shadow must beat the live model on: pnl (per-decision paper P&L) or "
                                    "crps (its forecast of the next close, lower is better)."),
    as_json: options.AsJson = False,
) -> None:
    """Make the shadow's weights the active model, only if it beats the live model on --metric (an anytime-valid
    one-sided test on daily differences, P&L after costs: e-value >= 1/--alpha, at least --min-decisions); else
    say why not (exit 1, with --json too: src/marketcast/schemas/trade_promote.schema.json). The test needs no Gaussian or
    symmetric differences, only this assumption: each day's downside second moment (the mean of min(diff, 0)^2
    given the days before) is finite and at most twice the mean of the squared losses of the days before it. It
    bets nothing in the first 20 days or before a losing day, so a shadow that never lost a day is not promoted.
    Takes the state lock: stop the loop first; the next `trade run` loads the active model."""
    from marketcast.trade.journal.lock import StateLock
    from marketcast.trade.journal.state import Journal
    from marketcast.trade.loop.shadow import active_weights, compare, shadow_model, shadow_weights
    from marketcast.trade.loop.shadow import promote as do_promote

    if not (state_dir / "journal.db").exists():
        raise ConfigError(f"{state_dir}: no journal.db; run `marketcast trade run --shadow WEIGHTS` first")
    with StateLock(state_dir):
        journal = Journal(state_dir / "journal.db")
        try:
            before, weights, model = active_weights(journal), shadow_weights(journal), shadow_model(journal)
            pnl = compare(journal)
            promoted, line, result = do_promote(journal, min_decisions, alpha, metric)
        finally:
            journal.close()
    if as_json:
        print_json({"promoted": promoted, "weights": weights, "model": model, "previous": before,
                    "metric": metric, "n": result.n, "min_decisions": min_decisions, **result.test.as_json(),
                    "mean_diff": result.mean_diff, "p": result.p, "alpha": alpha,
                    "shadow_pnl": pnl.shadow_pnl, "live_pnl": pnl.live_pnl, "reason": line})
    else:
        console.print(line, highlight=False, soft_wrap=True)
    if not promoted:
        raise typer.Exit(ExitCode.CHECK_FAILED)


@app.command("reconcile")
def reconcile_cmd(
    accept_broker: bool = typer.Option(False, "--accept-broker",
                                       help="make the journal agree with the broker: adopt the loop's orders it does "
                                            "not know, mark the orders the broker does not know as lost, set the "
                                            "loop's quantities to what the broker can hold, adopt the broker's "
                                            "quantity of a symbol held for holding more (a split), lift the halt"),
    paper: bool = typer.Option(True, "--paper/--live", help="the account to reconcile: paper (default) or live"),
    i_understand: bool = typer.Option(False, "--i-understand-live-trading", help="required with --live"),
    broker_name: str = typer.Option("paper", "--broker", help="paper (embedded) or alpaca"),
    symbols: str = typer.Option(DEFAULT_SYMBOLS, "--symbols", help="the symbols the loop trades (paper: the bars "
                                                                     "to load)"),
    state_dir: Path = STATE_OPT,
    data_dir: options.DataDir = None,
    on_duplicate: options.OnDuplicate = "error",
    fee: options.Fee = None,
    as_json: options.AsJson = False,
) -> None:
    """Compare the journal with the broker; with --accept-broker adopt the broker's view and lift the halt."""
    from marketcast.trade.journal.lock import StateLock
    from marketcast.trade.journal.state import Journal

    setup_logging(None, False)
    broker_name, live = _venue_flags(paper, i_understand, broker_name)
    syms = _symbols(symbols)
    if not (state_dir / "journal.db").exists() and not accept_broker:
        raise ConfigError(f"{state_dir}: no journal.db; run `marketcast trade run` first, or reconcile with "
                          f"--accept-broker to start one from the broker")
    with StateLock(state_dir):
        setup_logging(state_dir, False)
        venue = open_venue(broker_name, live, syms, state_dir, data_dir, fee, on_duplicate=on_duplicate)
        journal = Journal(state_dir / "journal.db")
        from marketcast.trade.loop.orders import OrderDesk
        from marketcast.trade.loop.reconcile import Reconciled, Reconciler

        reconciler = Reconciler(venue.broker, journal, OrderDesk(venue.broker, journal),
                                resolve_command(state_dir, broker_name, live, syms, data_dir))
        if accept_broker:
            changes = reconciler.adopt()
            _reconciled(as_json, venue.broker.endpoint, changes, [], True)
            return
        result = Reconciled()
        disagreements = reconciler.compare("", result)
        if disagreements:
            raise reconciler.halt(disagreements)
        lifted = journal.halts.lift("reconcile", "trade reconcile (journal and broker agree)")
        held = result.book.unexpected(reconciler.assets(())) if result.book is not None else {}
        _reconciled(as_json, venue.broker.endpoint, None, list(held.values()), bool(lifted))


def _reconciled(as_json: bool, endpoint, changes: list[str] | None, held: list[str], lifted: bool) -> None:
    """What ``trade reconcile`` found: the changes --accept-broker made (None without it), the symbols held back
    (a split or an outside trade: that symbol is held, the rest trades) and whether a halt was lifted."""
    if as_json:  # src/marketcast/schemas/trade_reconcile.schema.json
        print_json({"endpoint": str(endpoint), "accepted_broker": changes is not None, "changes": changes or [],
                    "held": held, "halt_lifted": lifted})
    elif changes is not None:
        for line in changes or ["journal and broker already agree"]:
            console.print(f"- {line}", highlight=False)
        console.print(f"journal now agrees with {endpoint}; halt lifted")
    else:
        for line in held:
            console.print(f"- {line}", highlight=False, soft_wrap=True)
        console.print(f"journal and broker agree ({endpoint})" + ("; halt lifted" if lifted else "")
                      + (f", except {len(held)} held symbol(s) listed above" if held else ""))


@app.command()
def status(
    state_dir: Path = STATE_OPT,
    html: bool = typer.Option(False, "--html", help="also write STATE_DIR/status.html: equity, positions, open "
                                                    "orders, fills, alerts, latency and recompiles (opens offline)"),
    as_json: options.AsJson = False,
) -> None:
    """Summarise the state folder (no broker call): cycles, orders and fills from the journal; endpoint, equity,
    quotes, latency, warm-up and memory from the records; foreign holdings; halts and how to lift them."""
    from marketcast.trade.ops.status import check_state_folder, status_data, status_rows

    if state_dir.is_dir():
        check_state_files(state_dir)  # a FIFO or a device there is refused before anything reads or replaces it
    check_state_folder(state_dir)
    if html:
        from marketcast.report.live import PAGE_NAME, read_state, status_html
        from marketcast.report.page import write_page
        from marketcast.trade.journal.files import FILE_MODE

        write_page(state_dir / PAGE_NAME, status_html(read_state(state_dir)), FILE_MODE)  # 0600, as the state
    if as_json:
        print_json(status_data(state_dir))
    else:
        table = Table(title=f"trade status: {state_dir}")
        table.add_column("what")
        table.add_column("value")
        for what, value in status_rows(state_dir):
            table.add_row(what, value)
        console.print(table)
    if html:
        (err_console if as_json else console).print(f"status page: {state_dir / PAGE_NAME}", highlight=False)


@app.command()
def orders(
    state_dir: Path = STATE_OPT,
    as_json: options.AsJson = False,
    csv_path: Path | None = typer.Option(None, "--csv", help="write every column to this CSV file instead of the "
                                                             "table (atomically, created 0600)"),
) -> None:
    """The order blotter (no broker call): every order the journal recorded, submitted or refused, with its
    decision bar, first submission, status, fills and the cash and buying power its check saw. Columns:
    docs/trading.md."""
    from marketcast.trade.ops import blotter

    if as_json and csv_path is not None:
        raise ConfigError("--json and --csv: choose one")
    blotter.check_csv(csv_path, state_dir)
    journal = blotter.open_journal(state_dir)
    try:
        rows = blotter.rows(journal)
    finally:
        journal.close()
    if as_json:  # every column, one object per order
        print_json(rows)
    elif csv_path is not None:
        path = blotter.write_csv(csv_path, rows)
        console.print(f"{len(rows)} orders: {path}", highlight=False)
    else:
        orders, filled = blotter.counts(rows)
        console.print(blotter.table(rows, f"trade orders: {state_dir} ({orders} orders, {filled} filled)"))


ReplayStart = Annotated[str, typer.Option("--start", "--from", metavar="DATE",
                                          help="First decision day, e.g. 2017-01-01 (UTC).")]
ReplayEnd = Annotated[str, typer.Option("--end", "--to", metavar="DATE", help="Last day settled, e.g. 2017-12-31 (UTC).")]
ReplaySymbols = Annotated[Optional[str], typer.Option("--symbols", help="Symbols to replay, comma separated (default: "
                                                      f"the config's trade.symbols, else {DEFAULT_SYMBOLS}).")]
ReplayConfig = Annotated[Path, typer.Option("--config", help="TOML settings file: its trade table's symbols, strategy "
                                            "pins, gates, portfolio and risk limits are replayed as trade run uses "
                                            "them.")]
ReplayState = Annotated[Optional[Path], typer.Option("--state-dir",
                                                     help=STATE_HELP + " (default out/replay-START-END)")]
Cash = Annotated[float, typer.Option("--cash", min=0.01, help="Starting cash of the paper account.")]
Png = Annotated[Optional[Path], typer.Option("--png", help="Equity curve (default STATE_DIR/equity.png).")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="INFO on stderr (trade.log always has it).")]
Hold = Annotated[Optional[bool], typer.Option("--hold/--no-hold", show_default=False,
                                              help="Hold a position while the next decision stays on its side (its "
                                              "take-profit resting), instead of closing it at each decision "
                                              "(default: the config's trade.hold, else no).")]


@app.command("replay")
def replay_cmd(
    ctx: typer.Context, start: ReplayStart = ..., end: ReplayEnd = ..., symbols: ReplaySymbols = None,
    config: ReplayConfig = Path(CONFIG_FILE), state_dir: ReplayState = None, model: options.Model = "baseline",
    weights: options.Weights = None, device: options.Device = "cpu", dtype: options.Dtype = "float32",
    seed: options.Seed = 0, data_dir: options.DataDir = None, on_duplicate: options.OnDuplicate = "error",
    asset_class: options.AssetClass = None, periods_per_year: options.PeriodsPerYear = None,
    fee: options.Fee = None,
    cash: Cash = 100_000.0, png: Png = None, verbose: Verbose = False, as_json: options.AsJson = False,
    hold: Hold = None, require_clean: options.RequireClean = False,
    exit_rule: options.Exit = None,  # None: the config's trade.exit, as hold's None the config's trade.hold
) -> None:
    """Run the loop with the paper broker over history (resumable: same --state-dir carries on).

    Everything is checked (dates, bars, model, settings) before the state folder or trade.log is created."""
    from marketcast.commands.trade_settings import rules
    from marketcast.forecast.exposure import exposure_field, exposure_text
    from marketcast.trade.replay import ReplayRequest, replay_history

    if ctx.get_parameter_source("config").name == "COMMANDLINE" and not config.exists():
        raise ConfigError(f"--config {config}: no such file")
    settings = resolve(SETTINGS, SECTION, config=config, env_file=Path(ENV_FILE), env=os.environ)
    syms = _symbols(symbols) if symbols is not None else tuple(settings["symbols"])
    pins = {s: name for s, name in settings["strategy"].items() if s in syms}
    state_dir = state_dir or Path(f"out/replay-{start}-{end}")
    trade_rules = rules(settings, seed)
    if exit_rule is not None:
        trade_rules = replace(trade_rules, planner=replace(trade_rules.planner, exit=exit_rule))
    hold = bool(settings["hold"]) if hold is None else hold
    result, seconds = replay_history(ReplayRequest(
        start, end, syms, pins, state_dir, trade_rules, model, weights, device, dtype, seed, data_dir,
        on_duplicate, asset_class, periods_per_year, fee, cash, png, verbose, hold, require_clean,
    ), progress=lambda steps: progress_steps(steps, "replay"),
        announce=lambda line: (err_console if as_json else console).print(line, highlight=False, soft_wrap=True))
    eq = result.equity
    if as_json:  # src/marketcast/schemas/trade_replay.schema.json
        print_json({"start": start, "end": end, "symbols": list(syms), "cycles": result.cycles_run,
                    "seconds": seconds, "orders": result.orders, "filled": result.filled, "refusals": result.refusals,
                    "equity_first": eq.iloc[0], "equity_last": eq.iloc[-1], "return": eq.iloc[-1] / cash - 1,
                    "png": result.png, "records": state_dir / "records.jsonl", "state_dir": state_dir,
                    **exposure_field(result.exposure)})
        return
    for line in exposure_text(result.exposure):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(
        f"replay {start} .. {end} {','.join(syms)}: {result.cycles_run} cycles run in "
        f"{seconds:.1f}s; orders {result.orders}, filled {result.filled} (as `trade orders` counts them), "
        f"broker refusals {result.refusals}; "
        f"equity {eq.iloc[0]:,.2f} -> {eq.iloc[-1]:,.2f} ({eq.iloc[-1] / cash - 1:+.2%})"
    )
    console.print(f"equity curve: {result.png}\nrecords: {state_dir / 'records.jsonl'}")
